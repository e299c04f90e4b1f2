"""The process-group backend matches the hardware: nccl with GPUs, gloo without.

Read from the trainer's `--backend` argument or the `DIST_BACKEND` env (this repository's trainer reads both;
`auto` picks by hardware and always passes). NCCL on a pod without GPUs fails at start; gloo on GPUs runs, but
collectives go through host memory at a fraction of the speed the GPUs were paid for. A pod whose GPU may come from
what is not counted as one here (a MIG slice `nvidia.com/mig-*`, a time-sliced `nvidia.com/gpu.shared`, a DRA
resource claim, whose devices the cluster's DeviceClass decides) gets nccl without `nvidia.com/gpu` as a warning
phrased as that condition.

Fails: `DIST_BACKEND=nccl` on a kind CPU pod; `DIST_BACKEND=gloo` on a pod with 8 H100s.
Passes: `DIST_BACKEND=gloo` without GPUs, `nccl` with them, or no statement at all.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from ..launchers import uncounted_devices
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
            other = uncounted_devices(t.first.pod.container)
            if other:
                yield problem(ID, t, where, f"process-group backend is nccl and the pods request no nvidia.com/gpu "
                              f"or amd.com/gpu: unless {', '.join(other)} gives each pod a GPU, NCCL fails at start",
                              "request nvidia.com/gpu, or use gloo where the pods have no GPU", severity=WARNING)
                continue
            yield problem(ID, t, where, "process-group backend is nccl but the pods request no GPUs",
                          "use gloo on CPU pods, or request nvidia.com/gpu")
        elif b == "gloo" and t.gpus:
            gpus = f"{t.gpus} GPU{'s' if t.gpus != 1 else ''}"
            yield problem(ID, t, where, f"process-group backend is gloo on pods with {gpus} each: collectives go "
                          "through host memory", "use nccl on GPU pods", severity=WARNING)
