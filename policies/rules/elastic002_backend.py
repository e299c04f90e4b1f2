"""An elastic job uses a dynamic rendezvous backend, not `static`.

The static rendezvous fixes the world at the range's maximum with the node ranks as given (torch 2.13
torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py create_rdzv_handler: `world_size =
params.max_nodes`): it cannot admit a node that joins late or replace one that left, so an elastic range
(`--nnodes MIN:MAX` with MIN < MAX, or a PyTorchJob `elasticPolicy`) is not elastic with it. Where the pods are
exactly MAX, the world forms at that fixed size (their node ranks are TOPO009's): a warning. Where the input shows
another number of pods, the world of MAX never forms (fewer pods: it waits for nodes that never come; more: the pods
past rank MAX-1 have no place in it): an error. Use `c10d` (no extra service) or `etcd-v2`.

Fails: `--nnodes=1:4 --rdzv-backend=static` on 2 pods (an error); an `elasticPolicy` with `rdzvBackend: static`;
`--nnodes=1:2 --rdzv-backend=static` on 2 pods (a warning: a fixed world of 2).
Passes: `--nnodes=1:4 --rdzv-backend=c10d --rdzv-endpoint=...`; a fixed `--nnodes=4` with static rendezvous.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, WARNING, Problem
from .kit import Context, problem

ID = "ELASTIC002"
NAME = "elastic-dynamic-backend"
SEVERITY = WARNING


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
        hint = "use --rdzv-backend=c10d with an --rdzv-endpoint on a pod that stays"
        said = f"{what} is elastic but the rendezvous backend is static, which fixes the world and its ranks"
        mx, pods = t.nnodes_max, t.pods
        if mx is None or pods == mx:
            size = f" at {mx} nodes" if mx is not None else ""
            yield problem(ID, t, where, f"{said}: the world forms{size} only, and a node that leaves is not replaced",
                          hint)
        elif pods < mx:
            yield problem(ID, t, where, f"{said}: it waits for {mx} nodes (the range's maximum) and {pods} "
                          f"pod{'s' if pods != 1 else ''} run, so the world never forms", hint, severity=ERROR)
        else:
            yield problem(ID, t, where, f"{said}: a world of {mx} nodes (the range's maximum) and {pods} pods run, so "
                          f"the pods past node rank {mx - 1} have no place in it", hint, severity=ERROR)
