"""NCCL asynchronous error handling stays on.

`TORCH_NCCL_ASYNC_ERROR_HANDLING` (formerly `NCCL_ASYNC_ERROR_HANDLING`) decides what a rank does when a collective
fails or times out: 1 aborts and tears the process down, 2 aborts only, 3 (the default) tears down; 0 does nothing,
so the other ranks hang in the collective with every GPU held until someone notices. Leave it unset or set 1-3.
Checked on NCCL workloads (GPUs or `DIST_BACKEND=nccl`); a value from a ConfigMap is reported at the ConfigMap.

Fails: `TORCH_NCCL_ASYNC_ERROR_HANDLING: "0"` in the environment's ConfigMap.
Passes: `TORCH_NCCL_ASYNC_ERROR_HANDLING: "1"`, or unset.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem

from .kit import Context, env_problem, training_uses_nccl

ID = "NCCL001"
NAME = "nccl-async-error-handling"
SEVERITY = WARNING
NAMES = ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")


def check(ctx: Context) -> Iterator[Problem]:
    seen = set()
    for t in ctx.topologies:
        if not training_uses_nccl(t):
            continue
        for pod in ctx.distinct_pods(t):
            name = next((n for n in NAMES if pod.env.get(n) is not None), None)
            if name is None or str(pod.env[name]).strip() != "0":
                continue
            p = env_problem(ID, ctx, t, pod, name, f"{name} is 0: a failed or timed-out collective leaves every "
                            "other rank hanging", f"set {name} to 1 (abort and tear down), or remove it")
            if (p.obj, p.field) not in seen:
                seen.add((p.obj, p.field))
                yield p
