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
from ..podspecs import PodSite, pod_sites
from ..topology import Topology

ID_FORMAT = re.compile(r"^(TOPO|RDZV|RESTART|ELASTIC|RES|NCCL|IMG|SEC)\d{3}$")
FAMILIES = {
    "TOPO": "Topology: the torchrun world the launcher really forms",
    "RDZV": "Rendezvous robustness",
    "RESTART": "Restart semantics",
    "ELASTIC": "Elastic jobs",
    "RES": "Resources",
    "NCCL": "NCCL",
    "IMG": "Images",
    "SEC": "Security",
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
    _sites: list[PodSite] | None = dc_field(default=None, repr=False)

    @property
    def sites(self) -> list[PodSite]:
        """Every pod template in the manifests (any kind that makes pods), computed once."""
        if self._sites is None:
            self._sites = pod_sites(self.bundle.manifests)
        return self._sites


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: str
    doc: str
    check: Callable[["Context"], Iterable[Problem]]

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
    fields = {
        ("pytorchjob", "nproc"): "spec.nprocPerNode",
        ("pytorchjob", "nnodes"): "spec.pytorchReplicaSpecs",
        ("trainjob", "nproc"): "spec.trainer.numProcPerNode",
        ("trainjob", "nnodes"): "spec.trainer.numNodes",
    }
    return fields.get((topo.launcher, name), setting_field)


def pods_field(topo: Topology) -> str:
    return {"indexed-job": "spec.completions", "job": "spec.parallelism", "statefulset": "spec.replicas",
            "pytorchjob": "spec.pytorchReplicaSpecs", "trainjob": "spec.trainer.numNodes",
            "jobset": "spec.replicatedJobs"}.get(topo.launcher, "spec")


def _load() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        rule = Rule(id=mod.ID, name=mod.NAME, severity=getattr(mod, "SEVERITY", ERROR), doc=mod.__doc__ or "",
                    check=mod.check)
        if not ID_FORMAT.match(rule.id):
            raise RuntimeError(f"rule id {rule.id} does not follow the family format {ID_FORMAT.pattern}")
        if rule.id in rules:
            raise RuntimeError(f"duplicate rule id {rule.id}")
        rules[rule.id] = rule
    return rules


RULES: dict[str, Rule] = _load()
