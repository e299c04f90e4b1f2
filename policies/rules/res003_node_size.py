"""A pod asks for no more GPUs than one node of the environment has.

A pod runs on one node. Asking for more GPUs than a node has leaves it Pending for ever, and with it the whole
world waits in rendezvous. The node size comes from the environment's declaration (`gpusPerNode`); without one the
rule cannot run and says so.

Fails: `nvidia.com/gpu: 16` in an environment with `gpusPerNode: 8`.
Passes: `nvidia.com/gpu: 8` there.
"""
from __future__ import annotations

from typing import Iterator

from ..launchers.pods import container_resources
from ..kube.objects import Problem
from .kit import Context, not_run, problem_at

ID = "RES003"
NAME = "gpus-fit-node"
NEEDS = "gpusPerNode"  # from the environment's declaration


def check(ctx: Context) -> Iterator[Problem]:
    gpu = [t for t in ctx.topologies if t.gpus]
    if not gpu:
        return
    if ctx.env is None or ctx.env.gpus_per_node is None:
        yield not_run(ID, ctx, "gpusPerNode")
        return
    size = ctx.env.gpus_per_node
    for t in gpu:
        for pod in ctx.distinct_pods(t):
            gpus = container_resources(pod.container)[0]
            if gpus > size:
                yield problem_at(ID, ctx, t, f"{pod.container_field}.resources.limits", f"{gpus} GPUs per pod but "
                                 f"nodes in {ctx.env.name} have {size}: the pod can never be scheduled",
                                 f"use at most {size} GPUs per pod (more pods, fewer GPUs each)")
