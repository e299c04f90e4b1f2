"""The overlay's GPUs fit the environment's capacity.

All pods of a world must run at once. An overlay that needs more GPUs (pods x GPUs per pod, the elastic maximum for
elastic jobs, summed over its workloads, each Katib trial that runs at once counted) than the environment can give
never starts: some pods stay Pending while the others time out in rendezvous. The capacity comes from the
environment's declaration (`gpuCapacity`); without one the rule cannot run and says so.

Fails: 64 pods x 8 GPUs (512) in an environment with `gpuCapacity: 256`.
Passes: 512 GPUs with `gpuCapacity: 512`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import Problem
from .kit import Context, not_run, pods_field, problem

ID = "RES004"
NAME = "gpu-capacity"
NEEDS = "gpuCapacity"  # from the environment's declaration


def check(ctx: Context) -> Iterator[Problem]:
    gpu = [t for t in ctx.topologies if t.gpus]
    if not gpu:
        return
    if ctx.env is None or ctx.env.gpu_capacity is None:
        yield not_run(ID, ctx, "gpuCapacity")
        return
    # A Katib Experiment runs `copies` trials of its job at once.
    need = {t.manifest.ref: t.gpus * max(t.pods, t.nnodes_max or 0) * t.workload.copies for t in gpu}
    total = sum(need.values())
    cap = ctx.env.gpu_capacity
    if total > cap:
        t = max(gpu, key=lambda t: need[t.manifest.ref])
        parts = " + ".join(f"{ref} {n}" for ref, n in need.items())
        yield problem(ID, t, pods_field(t), f"the overlay needs {total} GPUs ({parts}) but {ctx.env.name} has "
                      f"{cap}: part of the world stays Pending", f"fit the world in {cap} GPUs")
