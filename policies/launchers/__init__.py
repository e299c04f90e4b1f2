"""The one home of what each controller does: one module per controller (`pytorchjob`, `trainjob` with its runtimes,
`jobset`, `indexed_job`, `statefulset`, `volcano`, `leaderworkerset`, `katib`, `appwrapper`), each a `Launcher` (the
protocol in `base.py`; its pods are modelled in `pods.py`, what follows a pod's end in `lifecycle.py`) that every
consumer asks instead of branching on kinds; the registry below, keyed by API group and kind; and the table of kinds
no module models (`unmodelled.py`). Every list of launchers elsewhere (docs, tests, `make plan`) is read from LAUNCHERS.

Adding a controller is one module here (a `Launcher` subclass and its instance, which `_discover` finds: there is no
list to edit) and its conformance fixtures under tests/conformance/<launcher id>/ (at least 8, each naming the upstream
source it was read from), then `make docs` for the generated tables: the rules, the simulator, `make scale`,
`make diff`, docs/rules.md and the tests all ask the registry (tried with a throwaway ReplicaSet module on
2026-11-26: the only tests that failed were the fixture count and the generated docs)."""
from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Any, Collection, Iterator

from ..kube.objects import Manifest
from ..kube.values import dig, group_of, kueue_queue, version_of
from . import unmodelled
from .base import Bundle, Check, Child, Launcher, MpiWorld, Need, ScaleSpec, Unreadable, Workload
from ..kube.admission_classes import SYSTEM_PRIORITY_CLASSES
from .kueue import (KUEUE_PRIORITY_CLASS_FIELD, WITHOUT_PRIORITY_CLASS, WITHOUT_WORKLOAD_PRIORITY_CLASS,
                    WORKLOAD_PRIORITY_CLASS, WORKLOAD_PRIORITY_CLASS_LABEL)
from .kueue_config import in_force as kueue_in_force
from .mpirun import leader_mpirun_checks, leader_mpirun_unchecked
from .pods import (COMPLETION_INDEX, GPU_RESOURCES, POD_INDEX, ContainerEnv, Pod, PodGroup, accelerators,
                   container_resources, drop_gpus, gpu_resources, uncounted_devices)



def _discover() -> tuple[Launcher[Any], ...]:
    """Every Launcher instance a module of this package defines at its top level (a module may define several: a
    TrainJob's and its runtimes'), ordered by `Launcher.order`, then id."""
    found: dict[int, Launcher[Any]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Launcher):
                found.setdefault(id(value), value)
    return tuple(sorted(found.values(), key=lambda launcher: (launcher.order, launcher.id)))


# Every modelled kind, in the order docs and messages list them (Launcher.order).
LAUNCHERS: tuple[Launcher[Any], ...] = _discover()
REGISTRY: dict[tuple[str, str], Launcher[Any]] = {gk: launcher for launcher in LAUNCHERS for gk in launcher.kinds}
BY_ID: dict[str, Launcher[Any]] = {launcher.id: launcher for launcher in LAUNCHERS}
# Kinds that start distributed training no module models: their pod templates get the security and image rules, and
# the engine says once per object that the topology was not checked. A kind a module comes to model leaves it.
NOT_MODELLED: tuple[str, ...] = tuple(k for k in unmodelled.NOT_MODELLED if k not in {kind for _, kind in REGISTRY})
unread_world = unmodelled.unread_world


def of(m: Manifest) -> Launcher[Any] | None:
    """The launcher that owns this object's group and kind, if any (asked some 30 times per object in a run: kept
    on the object, whose apiVersion and kind do not change after loading)."""
    try:
        kept: Launcher[Any] | None = m.__dict__["_launcher"]
        return kept
    except KeyError:
        found = m.__dict__["_launcher"] = _lookup(m.api_version, m.kind)
        return found


@functools.lru_cache(maxsize=1024)
def _lookup(api_version: str, kind: str) -> Launcher[Any] | None:
    found = REGISTRY.get((group_of(api_version), kind))
    return None if found is None or version_of(api_version) in found.unread_versions else found


@functools.lru_cache(maxsize=1024)
def groups_modelling(kind: str) -> tuple[str, ...]:
    """The API groups in which some launcher models `kind` (the registry is keyed by group and kind: the same kind
    in another group, such as Trainer's pre-release kubeflow.org/v2alpha1 runtimes, is a different API that no
    launcher reads)."""
    return tuple(g for (g, k) in REGISTRY if k == kind)


def as_admitted(m: Manifest) -> Any:
    """The object as the API server checks it against its schema: after its controller's mutating webhook
    (Launcher.defaulted); as written for a kind no launcher owns."""
    launcher = of(m) if isinstance(m.obj, dict) else None
    return launcher.defaulted(m.obj) if launcher is not None else m.obj


def workload_kinds() -> tuple[str, ...]:
    """The kinds whose objects start pods (Argo CD's workload checks), each once."""
    return tuple(dict.fromkeys(kind for (_, kind), launcher in REGISTRY.items() if launcher.starts_pods))


def pod_templates(m: Manifest) -> Iterator[tuple[str, Any]]:
    """(field path, template) of every pod template in an object of a modelled kind (Launcher.pod_templates) or of a
    kind in the table of unmodelled ones; nothing for any other kind (a Pod is its own template: podspecs reads it)."""
    launcher = of(m)
    return launcher.pod_templates(m) if launcher is not None else unmodelled.pod_templates(m)


def finished_ttl(m: Manifest) -> tuple[str, Any, str] | None:
    """(field, value, what to remove) of the TTL after which a finished object of this kind is itself deleted (Launcher.finished_ttl,
    or the unmodelled kinds' table); None where nothing deletes it."""
    launcher = of(m)
    if launcher is not None:
        return launcher.finished_ttl(m)
    path = unmodelled.TTL_FIELDS.get(m.kind)
    value = dig(m.obj, *path) if path else None
    return None if value is None or path is None else (".".join(path), value, "the TTL")


def run_kinds() -> tuple[str, ...]:
    """The kinds whose change means a new training run: those whose objects start pods, and the unmodelled training
    kinds that behave alike."""
    return tuple(dict.fromkeys(workload_kinds() + unmodelled.RUN_KINDS))


def cluster_scoped() -> tuple[tuple[str, str], ...]:
    return tuple(gk for launcher in LAUNCHERS for gk in launcher.cluster_scoped)


def expand(manifests: list[Manifest]) -> tuple[list[Manifest], list[Child], list[Check]]:
    """The manifests followed by the objects controllers make from them for other controllers (Katib's trial jobs,
    an AppWrapper's components; see Launcher.children), those children, and what the makers' webhooks refuse and the
    children's own controllers refuse of them (Launcher.refused of each child, as of an object written in the file)."""
    children: list[Child] = []
    checks: list[Check] = []
    bundle: Bundle | None = None  # the objects a maker reads beside its own (made once, where one is modelled)
    for m in manifests:
        launcher = of(m)
        if launcher is None:
            continue
        bundle = bundle or Bundle.of(manifests)
        made = launcher.children(m, bundle)
        children += made
        checks += launcher.refused(m, bundle)
        for c in made:  # what the child's own controller refuses (a RayCluster an AppWrapper creates), reported
            maker = of(c.manifest)  # against the parent (engine.to_parents)
            checks += maker.refused(c.manifest, bundle) if maker is not None else []
    return (manifests + [c.manifest for c in children] if children else manifests), children, checks


def priority_needs(m: Manifest, framework: str | None) -> list[Need]:
    """The class Kueue needs to make a queued object's Workload: the WorkloadPriorityClass its label names, else the
    PriorityClass its integration reads from the object (a Kubeflow job's schedulingPolicy), not a system one."""
    name = (m.metadata.get("labels") or {}).get(WORKLOAD_PRIORITY_CLASS_LABEL)
    if isinstance(name, str) and name:
        return [Need(WORKLOAD_PRIORITY_CLASS, "", name, f"metadata.labels['{WORKLOAD_PRIORITY_CLASS_LABEL}']",
                     WITHOUT_WORKLOAD_PRIORITY_CLASS.format(name))]
    path = KUEUE_PRIORITY_CLASS_FIELD.get(framework or "")
    name = dig(m.obj, *path) if path else None
    if not isinstance(name, str) or not name or name in SYSTEM_PRIORITY_CLASSES:
        return []
    return [Need("PriorityClass", "", name, ".".join(path or ()), WITHOUT_PRIORITY_CLASS.format(name))]


def workloads(bundle: Bundle, failed: list[tuple[Manifest, Exception]] | None = None,
              kueue: Collection[str] | None = None) -> list[Workload]:
    """Every object in the bundle that starts pods through one of the modelled controllers. With `failed`, an object
    the model cannot read (a malformed field the schema stage also reports) is listed there instead of raising.
    `kueue`: the Kueue integrations the environment declares on (None: it declares no Kueue); an object of one of
    them that names a LocalQueue is queued (Workload.queued)."""
    out: list[Workload] = []
    for m in bundle.manifests:
        launcher = of(m)
        if launcher is None or not launcher.starts_pods:
            continue
        try:
            w = launcher.build(m, bundle)
        except Exception as exc:  # noqa: BLE001 - reported by the engine as INTERNAL, never a crash
            if failed is None:
                raise
            failed.append((m, exc))
            continue
        w.configmaps = bundle.configmaps
        w.secrets = bundle.secrets
        w.managed_by = launcher.manager(m)
        w.suspended = launcher.suspended(m)
        if kueue is not None and launcher.kueue_framework in kueue:
            w.queued = kueue_queue(m.metadata)
            w.needs.extend(priority_needs(m, launcher.kueue_framework) if w.queued is not None else [])
        child = bundle.children.get(m.ref)
        if child is not None:
            w.copies = child.copies
            w.notes[:0] = child.notes
        out.append(w)
    return out


__all__ = ["kueue_in_force", "unread_world", "leader_mpirun_checks", "leader_mpirun_unchecked", "COMPLETION_INDEX", "GPU_RESOURCES", "POD_INDEX", "NOT_MODELLED", "Bundle", "Check", "Child", "Unreadable",
           "accelerators", "uncounted_devices", "container_resources", "drop_gpus", "gpu_resources", "ContainerEnv", "Launcher", "Pod", "PodGroup",
           "ScaleSpec", "Workload", "LAUNCHERS", "REGISTRY", "BY_ID",
           "of", "as_admitted", "expand", "workloads", "workload_kinds", "cluster_scoped", "groups_modelling",
           "pod_templates", "finished_ttl", "run_kinds"]
