"""The process-group backend matches the hardware: nccl with GPUs, gloo without.

Read from the trainer's `--backend` argument or the `DIST_BACKEND` env (this repository's trainer reads both;
`auto` picks by hardware and always passes). NCCL on a pod without GPUs fails at start; gloo on GPUs runs, but
collectives go through host memory at a fraction of the speed the GPUs were paid for.

Fails: `DIST_BACKEND=nccl` on a kind CPU pod; `DIST_BACKEND=gloo` on a pod with 8 H100s.
Passes: `DIST_BACKEND=gloo` without GPUs, `nccl` with them, or no statement at all.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from .kit import Context, problem

ID = "TOPO007"
NAME = "backend-matches-hardware"


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if not t.pg_backend:
            continue
        backend, where = t.pg_backend
        b = backend.lower()
        if b == "nccl" and not t.gpus:
            yield problem(ID, t, where, "process-group backend is nccl but the pods request no GPUs",
                          "use gloo on CPU pods, or request nvidia.com/gpu")
        elif b == "gloo" and t.gpus:
            gpus = f"{t.gpus} GPU{'s' if t.gpus != 1 else ''}"
            yield problem(ID, t, where, f"process-group backend is gloo on pods with {gpus} each: collectives go "
                          "through host memory", "use nccl on GPU pods", severity=WARNING)
