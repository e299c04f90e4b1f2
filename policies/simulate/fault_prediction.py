"""What the rules predict for the pods a fault run lost (policies/model/recovery.py: the controller's own counting,
replayed), set beside what the run did in its report (fault_run.FaultRun.report)."""
from __future__ import annotations

from typing import Any

from ..model import recovery
from ..report import engine
from . import faults as F
from .pods import SimPod


def prediction(faults: list[F.Fault], trainers: list[SimPod], bundle: Any, check: engine.Unit) -> tuple[str, str]:
    """What the rules predict for the pods this run lost, and why: recovers, fails, or waits (a pod on a lost node
    that nothing deletes)."""
    kinds = {F.KILL: recovery.KILLED, F.TERM: recovery.DELETED, F.NODE_LOST: recovery.NODE_LOST,
             F.KILL_WORKER: recovery.WORKER}
    losses: dict[str, list[recovery.Loss]] = {}
    for f in faults:
        if f.fired and f.action in kinds:
            sp = trainers[f.target]
            losses.setdefault(sp.workload.manifest.ref, []).append(recovery.Loss(sp.pod.index, kinds[f.action]))
    survival = {t.manifest.ref: (t, s) for t, s in check.recovery}
    predicted, basis = "recovers", []
    for ref, lost in losses.items():
        if ref not in survival:
            continue
        t, s = survival[ref]
        ok, waited, why = recovery.predicts(t, bundle, lost)
        if not ok:
            predicted = "fails"
            basis.append(f"{ref} {s.words()}; {why}")
            continue
        basis.append(f"{ref} {s.words()}, this run lost {len(lost)}")
        returns = {trainers[f.target].name for f in faults if f.action == F.RETURN}
        if waited is not None and predicted == "recovers" and not returns:
            predicted = "waits"
            basis.append(f"{waited.controller}: {waited.why}")
    if not losses:
        basis.append("no pod lost")
    # What keeps the world from re-forming (recovery.BLOCKERS), reported by its rule or suppressed.
    blocked = sorted({s.blocker.rule for _, s in check.recovery if s.blocker is not None})
    if blocked and predicted == "recovers":
        return "fails", f"{'; '.join(basis)}, but {', '.join(blocked)}: the world does not re-form"
    return predicted, "; ".join(basis)
