"""A training world survives the pod losses its environment asks for, counted as its controller counts them.

A lost pod (a node gone, an eviction, a container killed) ends more than itself: in a static world every other
pod's workers lose their peer and their torchrun exits, so every pod fails or restarts, and the controller counts
each one. A PyTorchJob sums the restartCounts of its running pods and fails at `backoffLimit` (training-operator
v1.9.4 `pkg/core/job.go` lines 113-132): with 4 pods and `backoffLimit: 3` the first lost pod fails the job; a
Job with `restartPolicy: OnFailure` does the same (`pastBackoffLimitOnFailure`, `>=`), one with `Never` counts failed
pods (`> backoffLimit`) and a `FailJob` rule ends it at the first; a JobSet restarts every Job up to
`failurePolicy.maxRestarts`. On a dynamic rendezvous whose torchrun restarts its workers only the lost pod restarts,
unless it hosts the c10d store (pod 0). `policies/model/recovery.py` replays lost pods through the launcher's own
decisions (`Launcher.after_exit`, which `make simulate FAULT=...` carries out too) and `make validate` and `make plan`
print the figure for every workload; this rule compares it with the environment's `podLosses`. A rule that marks
the world as not re-forming (RESTART005, RESTART006) counts as surviving none. A warning: the world trains; what
fails is its recovery (`components/64x8-h100/policy.yaml` makes it an error for 512 GPUs).

Fails: a PyTorchJob of 4 pods with `backoffLimit: 3` where the environment asks for one pod loss.
Passes: the same with `backoffLimit: 5` (one loss costs 4 container restarts; the second reaches 5).
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from ..model.recovery import in_context
from .kit import Context, not_run, obj_problem

ID = "RESTART007"
NAME = "survives-pod-losses"
SEVERITY = WARNING
NEEDS = "podLosses"  # from the environment's declaration


def check(ctx: Context) -> Iterator[Problem]:
    if not ctx.topologies:
        return
    if ctx.env is None or ctx.env.pod_losses is None:
        yield not_run(ID, ctx, NEEDS)
        return
    asked = ctx.env.pod_losses
    for t in ctx.topologies:
        s = in_context(ctx, t)
        if not s.modelled or s.losses is None or s.losses >= asked:
            continue
        field, hint = t.workload.launcher.restart_limit(t.workload, asked)
        yield obj_problem(ID, t.manifest, field, f"{s.words()} ({s.why}); {ctx.env.name} asks for {asked}", hint,
                          severity=WARNING)

