"""The rule registry. One module per rule; its docstring is the user documentation (docs/rules.md is made from it).
A rule is a pure function from one unit's Context (policies/rules/kit.py: objects, topologies, workloads, the
environment, Argo CD's resolved targets) to Problems, with a stable id, a severity and a fix hint. Ids are stable and
grouped by family: TOPO, RDZV, RESTART, ELASTIC, RES, NCCL, IMG, SEC, ADM, MON, ARGO, TRAINER, REF."""
from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from typing import Callable, Iterable

from ..kube.objects import ERROR, Problem
from .kit import Context

# Modules of this package that are not rules: what every rule reads (kit: the Context and its helpers) and the
# environment declaration that configures them.
NOT_RULES = frozenset({"kit", "environment"})
ID_FORMAT = re.compile(r"^(TOPO|RDZV|RESTART|ELASTIC|RES|NCCL|IMG|SEC|ADM|MON|ARGO|TRAINER|REF)\d{3}$")
FAMILIES = {
    "TOPO": "Topology: the torchrun world the launcher really forms",
    "RDZV": "Rendezvous robustness",
    "RESTART": "Restart semantics",
    "ELASTIC": "Elastic jobs",
    "RES": "Resources",
    "NCCL": "NCCL",
    "IMG": "Images",
    "SEC": "Security",
    "ADM": "Admission: what the cluster's own admission policies in the manifests refuse",
    "MON": "Monitoring: what Prometheus scrapes of the trainer",
    "ARGO": "Argo CD delivery: what auto-sync does with these manifests",
    "TRAINER": "The trainer's contract: the environment /app/trainer/train.py reads (trainer/contract.py)",
    "REF": "References: objects the manifests name",
}


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


def _load() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name in NOT_RULES:
            continue
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

    def family(rule_id: str) -> str:
        m = ID_FORMAT.match(rule_id)
        assert m is not None  # every id was checked against ID_FORMAT above
        return m.group(1)

    return dict(sorted(rules.items(), key=lambda kv: (order.index(family(kv[0])), kv[0])))


RULES: dict[str, Rule] = _load()
