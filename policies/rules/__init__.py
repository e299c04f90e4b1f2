"""The rule registry. One module per rule; its docstring is the user documentation (docs/rules.md is made from it).
A rule is a pure function from one overlay's objects and topologies to Problems, with a stable id, a severity and a
fix hint. Ids are stable and grouped by family: TOPO, RDZV, RESTART, ELASTIC, RES, NCCL, IMG, SEC."""
from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field as dc_field
from typing import Any, Callable, Iterable

from ..environment import Environment
from ..launchers import Bundle, Workload
from ..model import ERROR, INFO, Manifest, Problem
from ..podspecs import ContainerSite, PodSite, container_sites, pod_sites
from ..topology import Topology

ID_FORMAT = re.compile(r"^(TOPO|RDZV|RESTART|ELASTIC|RES|NCCL|IMG|SEC|ARGO)\d{3}$")
FAMILIES = {
    "TOPO": "Topology: the torchrun world the launcher really forms",
    "RDZV": "Rendezvous robustness",
    "RESTART": "Restart semantics",
    "ELASTIC": "Elastic jobs",
    "RES": "Resources",
    "NCCL": "NCCL",
    "IMG": "Images",
    "SEC": "Security",
    "ARGO": "Argo CD delivery: what auto-sync does with these manifests",
}


@dataclass
class Context:
    """What every rule reads: the overlay's objects, the training workloads' topologies, where they came from, and
    the environment's declaration (None for manifests validated without one)."""

    bundle: Bundle
    topologies: list[Topology]
    unresolved: list[Workload]
    source: str
    env: Environment | None = None
    # Every workload of a modelled controller, training or not (admission checks read them all).
    workloads: list[Workload] = dc_field(default_factory=list)
    _sites: list[PodSite] | None = dc_field(default=None, repr=False)
    _containers: list[ContainerSite] | None = dc_field(default=None, repr=False)
    # Values several rules derive from the same objects, worked out once per overlay (images, ...).
    memo: dict[str, Any] = dc_field(default_factory=dict, repr=False)

    @property
    def sites(self) -> list[PodSite]:
        """Every pod template in the manifests (any kind that makes pods), computed once."""
        if self._sites is None:
            self._sites = pod_sites(self.bundle.manifests)
        return self._sites

    @property
    def containers(self) -> list[ContainerSite]:
        """Every container and init container of those pod templates, with their security contexts."""
        if self._containers is None:
            self._containers = container_sites(self.sites)
        return self._containers


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: str
    doc: str
    check: Callable[["Context"], Iterable[Problem]]
    # The environment declaration key the rule reads, if any.
    needs: str | None = None
    # The kinds the rule reads: it is skipped for an overlay that has none of them (None: always runs).
    kinds: frozenset[str] | None = None

    @property
    def title(self) -> str:
        return self.doc.strip().splitlines()[0].rstrip(".")


def obj_problem(rule: str, m: Manifest, field: str | None, message: str, hint: str,
                severity: str = ERROR) -> Problem:
    return Problem(rule=rule, message=message, source=m.source, obj=m.ref, field=field, hint=hint, severity=severity)


def not_run(rule: str, ctx: Context, needs: str) -> Problem:
    """This rule needs a value only an environment declaration gives: say it could not run (the engine folds these
    into one `ENV` line per unit) rather than pass in silence."""
    return Problem(rule=rule, message=f"needs {needs}", source=ctx.source, severity=INFO,
                   extra={"not_run": needs})


def problem(rule: str, topo: Topology, field: str | None, message: str, hint: str, severity: str = ERROR) -> Problem:
    m = topo.manifest
    return Problem(rule=rule, message=message, source=m.source, obj=m.ref, field=field, hint=hint, severity=severity)


def service_problem(rule: str, topo: Topology, field: str, message: str, hint: str) -> Problem:
    """A problem about the Service behind a workload, pointed at the Service's own file and object."""
    p = problem(rule, topo, field, message, hint)
    p.source, p.obj = topo.service.source, topo.service.ref
    return p


def launcher_field(topo: Topology, setting_field: str | None, name: str) -> str | None:
    """Point a setting the controller injected back at the field the user wrote."""
    if setting_field and not setting_field.endswith("controller"):
        return setting_field
    return topo.workload.controller.setting_field(topo.workload, name) or setting_field


def pods_field(topo: Topology) -> str:
    return topo.workload.controller.pods_field(topo.workload)


def at(ctx: Context, topo: Topology, field: str | None) -> tuple[Manifest, str | None]:
    """The object and field a problem about `field` of a workload's pods belongs to: a TrainJob's pod template
    lives in its runtime, so `(runtime) spec...` points at the runtime object where it is in the manifests."""
    if field and field.startswith("(runtime) "):
        runtime = topo.workload.facts.get("runtime")
        if runtime is not None:
            return runtime, field[len("(runtime) "):]
    return topo.manifest, field


def problem_at(rule: str, ctx: Context, topo: Topology, field: str | None, message: str, hint: str,
               severity: str = ERROR) -> Problem:
    m, f = at(ctx, topo, field)
    return obj_problem(rule, m, f, message, hint, severity)


def find_object(ctx: Context, kind: str, name: str) -> Manifest | None:
    for m in ctx.bundle.manifests:
        if m.kind == kind and m.name == name:
            return m
    return None


def env_problem(rule: str, ctx: Context, topo: Topology, pod: Any, name: str, message: str, hint: str,
                severity: str = ERROR) -> Problem:
    """A problem about env variable `name`: at the ConfigMap key when it came through envFrom (where the user
    edits it), else at the container's env entry."""
    field = pod.env_fields.get(name)
    m = re.search(r"\.envFrom\[(\d+)\]$", field or "")
    if m:
        sources = pod.container.get("envFrom") or []
        i = int(m.group(1))
        ref = (sources[i].get("configMapRef") or {}) if i < len(sources) else {}
        cm = find_object(ctx, "ConfigMap", str(ref.get("name"))) if ref else None
        if cm is not None:
            return obj_problem(rule, cm, f"data.{name}", message, hint, severity)
    return problem_at(rule, ctx, topo, field or pod.container_field, message, hint, severity)


def distinct_pods(topo: Topology) -> list[Any]:
    """One pod per pod template (PyTorchJob Master and Worker, not two Workers)."""
    return topo.distinct_pods()


_QUANTITY = re.compile(r"^([0-9.]+)([A-Za-z]*)$")
_UNITS = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "m": 1e-3,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity_bytes(value: Any) -> float | None:
    """`256Gi` -> bytes; None where it is not a quantity."""
    if value is None:
        return None
    m = _QUANTITY.match(str(value).strip())
    if not m or m.group(2) not in _UNITS:
        return None
    try:
        return float(m.group(1)) * _UNITS[m.group(2)]
    except ValueError:
        return None


def training_uses_nccl(topo: Topology) -> bool:
    return bool(topo.gpus) or bool(topo.pg_backend and topo.pg_backend[0].lower() == "nccl")


def _load() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        rule = Rule(id=mod.ID, name=mod.NAME, severity=getattr(mod, "SEVERITY", ERROR), doc=mod.__doc__ or "",
                    check=mod.check, needs=getattr(mod, "NEEDS", None),
                    kinds=frozenset(mod.KINDS) if getattr(mod, "KINDS", None) else None)
        if not ID_FORMAT.match(rule.id):
            raise RuntimeError(f"rule id {rule.id} does not follow the family format {ID_FORMAT.pattern}")
        if rule.id in rules:
            raise RuntimeError(f"duplicate rule id {rule.id}")
        rules[rule.id] = rule
    order = list(FAMILIES)
    return dict(sorted(rules.items(), key=lambda kv: (order.index(ID_FORMAT.match(kv[0]).group(1)), kv[0])))


RULES: dict[str, Rule] = _load()
