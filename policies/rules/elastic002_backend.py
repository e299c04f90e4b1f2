"""An elastic job uses a dynamic rendezvous backend, not `static`.

The static rendezvous fixes the world at `--nnodes` members with fixed node ranks: it cannot admit a node that
joins late or replace one that left, so an elastic range (`--nnodes MIN:MAX` with MIN < MAX, or a PyTorchJob
`elasticPolicy`) is not elastic with it. Use `c10d` (no extra service) or `etcd-v2`.

Fails: `--nnodes=1:4 --rdzv-backend=static`; an `elasticPolicy` with `rdzvBackend: static`.
Passes: `--nnodes=1:4 --rdzv-backend=c10d --rdzv-endpoint=...`; a fixed `--nnodes=4` with static rendezvous.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import Problem
from .kit import Context, problem

ID = "ELASTIC002"
NAME = "elastic-dynamic-backend"


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if not t.agent:
            continue
        assert t.first.inv is not None, "t.agent: pod 0 has an invocation (Topology.agent checks first_view.inv)"
        policy = t.workload.elastic_range is not None
        if not (t.elastic or policy) or t.backend != "static":
            continue
        s = t.first.backend
        where = s.field if s.field and not s.field.endswith("controller") else (
            "spec.elasticPolicy.rdzvBackend" if policy else t.first.inv.field)
        what = f"--nnodes {t.first.nnodes.value}" if t.elastic else "elasticPolicy"
        yield problem(ID, t, where, f"{what} is elastic but the rendezvous backend is static, which fixes the world "
                      "and its ranks", "use --rdzv-backend=c10d with an --rdzv-endpoint on a pod that stays")
