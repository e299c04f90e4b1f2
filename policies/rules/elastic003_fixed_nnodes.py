"""No fixed `--nnodes N` on the command line of an elastic PyTorchJob.

torchrun takes a command-line flag over its `PET_*` env. An `elasticPolicy` sets `PET_NNODES=MIN:MAX`; a command
that also says `--nnodes=4` (as some upstream elastic examples do) turns the job into a fixed world of 4: it does
not scale, and one lost node stops it.

Fails: `elasticPolicy: {minReplicas: 1, maxReplicas: 4}` with `torchrun --nnodes=4 ...`.
Passes: the same job whose command has no `--nnodes` (torchrun reads `PET_NNODES`).
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem

from ..launchers import pytorchjob

from .kit import Context, problem

ID = "ELASTIC003"
NAME = "elastic-no-fixed-nnodes"
SEVERITY = WARNING
KINDS = (pytorchjob.KIND,)


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if t.workload.elastic_range is None or not t.agent:
            continue
        s = t.first.nnodes
        if s.origin == "flag" and t.nnodes_min is not None and t.nnodes_min == t.nnodes_max:
            yield problem(ID, t, s.field, f"--nnodes {s.value} on the command line overrides the elastic range the "
                          "operator sets (PET_NNODES): the world is fixed", "remove --nnodes from the command")
