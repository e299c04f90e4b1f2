"""An elastic job's range holds its replicas, and torchrun uses that very range.

A PyTorchJob `elasticPolicy` gives torchrun `PET_NNODES=minReplicas:maxReplicas`. `minReplicas` above
`maxReplicas`, or a minimum below 1, cannot form a world; replicas outside the range are pods torchrun will not
admit (or waits for in vain); an explicit `--nnodes MIN:MAX` on the command line that differs from the policy wins
over it, so the operator scales between bounds torchrun does not know.

Fails: `elasticPolicy: {minReplicas: 4, maxReplicas: 2}`; `--nnodes=1:8` with `elasticPolicy` 2:4.
Passes: `minReplicas: 1, maxReplicas: 4` with 2 Worker replicas and no `--nnodes` of its own.
"""
from __future__ import annotations

from typing import Iterator

from ..launchers import pytorchjob

from ..command.torchrun import split_nnodes
from ..kube.objects import Problem
from .kit import Context, problem

ID = "ELASTIC001"
NAME = "elastic-range"
KINDS = (pytorchjob.KIND,)


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if t.workload.elastic_range is None:
            continue
        mn, mx = t.workload.elastic_range
        mn, mx = (t.pods if mn is None else mn), (t.pods if mx is None else mx)
        if mn < 1 or mn > mx:
            yield problem(ID, t, "spec.elasticPolicy", f"elastic range minReplicas {mn} .. maxReplicas {mx} is empty "
                          "or below one node", "set 1 <= minReplicas <= maxReplicas")
            continue
        s = t.first.nnodes
        fmn, fmx = split_nnodes(s.value) if t.torchrun else (None, None)
        if s.origin == "flag" and fmn is not None and fmn != fmx and (fmn, fmx) != (mn, mx):
            yield problem(ID, t, s.field, f"--nnodes {s.value} on the command line overrides the elasticPolicy "
                          f"range {mn}:{mx}", f"remove --nnodes, or make it {mn}:{mx}")
        elif not mn <= t.pods <= mx and not (s.origin != "flag" and t.torchrun):
            # (with torchrun reading PET_NNODES, TOPO001 already reports the pods outside the range)
            yield problem(ID, t, "spec.pytorchReplicaSpecs", f"{t.pods} replicas outside the elastic range "
                          f"{mn}:{mx}", f"set the replicas within {mn}..{mx}")
