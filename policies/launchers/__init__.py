"""The one home of what each controller does: one module per controller (`pytorchjob`, `trainjob` with its runtimes,
`jobset`, `indexed_job`, `statefulset`, `volcano`, `leaderworkerset`, `katib`, `appwrapper`), each a `Launcher` (see
`base.py`) that every consumer asks instead of branching on kinds, and a registry keyed by API group and kind. Adding a controller is
adding one module here and its conformance fixtures under tests/conformance/."""
from __future__ import annotations

import functools
from typing import Any

from ..model import Manifest
from . import appwrapper, indexed_job, jobset, katib, leaderworkerset, pytorchjob, statefulset, trainjob, volcano
from .base import (COMPLETION_INDEX, DNS1035, DNS1123_LABEL, DNS1123_SUBDOMAIN, GPU_RESOURCES, POD_INDEX, Bundle,
                   Check, Child, ContainerEnv, Launcher, Pod, PodGroup, ScaleSpec, Workload, as_int, dig, downward,
                   listing, mapping, selects)

# Every modelled kind, in the order `make plan` lists launchers.
LAUNCHERS: tuple[Launcher, ...] = (pytorchjob.LAUNCHER, trainjob.LAUNCHER, jobset.LAUNCHER, indexed_job.LAUNCHER,
                                   statefulset.LAUNCHER, trainjob.RUNTIME, volcano.LAUNCHER,
                                   leaderworkerset.LAUNCHER, katib.LAUNCHER, appwrapper.LAUNCHER)
REGISTRY: dict[tuple[str, str], Launcher] = {gk: launcher for launcher in LAUNCHERS for gk in launcher.kinds}
BY_ID: dict[str, Launcher] = {launcher.id: launcher for launcher in LAUNCHERS}


def group_of(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def of(m: Manifest) -> Launcher | None:
    """The launcher that owns this object's group and kind, if any (asked some 30 times per object in a run: kept
    on the object, whose apiVersion and kind do not change after loading)."""
    try:
        return m.__dict__["_launcher"]
    except KeyError:
        found = m.__dict__["_launcher"] = _lookup(m.api_version, m.kind)
        return found


@functools.lru_cache(maxsize=1024)
def _lookup(api_version: str, kind: str) -> Launcher | None:
    return REGISTRY.get((group_of(api_version), kind))


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


def cluster_scoped() -> tuple[tuple[str, str], ...]:
    return tuple(gk for launcher in LAUNCHERS for gk in launcher.cluster_scoped)


def expand(manifests: list[Manifest]) -> tuple[list[Manifest], list[Child], list[Check]]:
    """The manifests followed by the objects controllers make from them for other controllers (Katib's trial jobs,
    an AppWrapper's components; see Launcher.children), those children, and what the makers' webhooks refuse."""
    children: list[Child] = []
    checks: list[Check] = []
    for m in manifests:
        launcher = of(m)
        if launcher is None:
            continue
        made, refused = launcher.children(m)
        children += made
        checks += refused
    return (manifests + [c.manifest for c in children] if children else manifests), children, checks


def workloads(bundle: Bundle, failed: list[tuple[Manifest, Exception]] | None = None) -> list[Workload]:
    """Every object in the bundle that starts pods through one of the modelled controllers. With `failed`, an object
    the model cannot read (a malformed field the schema stage also reports) is listed there instead of raising."""
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
        child = bundle.children.get(m.ref)
        if child is not None:
            w.copies = child.copies
            w.notes[:0] = child.notes
        out.append(w)
    return out


__all__ = ["COMPLETION_INDEX", "DNS1035", "DNS1123_LABEL", "DNS1123_SUBDOMAIN", "GPU_RESOURCES", "POD_INDEX", "Bundle",
           "Check", "Child", "ContainerEnv", "Launcher", "selects",
           "Pod",
           "PodGroup", "ScaleSpec", "Workload", "as_int", "dig", "downward", "listing", "mapping", "LAUNCHERS",
           "REGISTRY", "BY_ID", "of", "as_admitted", "expand", "workloads", "workload_kinds", "group_of",
           "cluster_scoped", "groups_modelling"]
