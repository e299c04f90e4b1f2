"""No hand-set WORLD_SIZE that contradicts the world torchrun forms.

torchrun sets WORLD_SIZE, RANK and LOCAL_RANK for every worker it starts; a WORLD_SIZE written into the manifest by
hand is overridden for the workers but misleads everything else that reads it (init containers, scripts that
compute batch sizes, readers of the manifest) and is a sign the topology was edited in one place only. Values the
controller injects (the PyTorchJob operator's WORLD_SIZE) are exempt.

Fails: `WORLD_SIZE: "4"` in the env of a Job whose torchrun forms a world of 2 nodes x 8 processes.
Passes: no WORLD_SIZE, or WORLD_SIZE equal to nnodes x processes per node.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import Problem
from .kit import Context, problem

ID = "TOPO008"
NAME = "no-contradicting-world-size"


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if not t.agent or t.world_size is None:
            continue
        pod = t.first.pod
        if "WORLD_SIZE" in pod.injected:
            continue
        value = pod.env.get("WORLD_SIZE")
        if value is not None and str(value) != str(t.world_size):
            yield problem(ID, t, pod.env_fields.get("WORLD_SIZE"),
                          f"WORLD_SIZE is set to {value} by hand but torchrun forms a world of {t.world_size} "
                          f"({t.nnodes_max} nodes x {t.nproc} processes)",
                          "remove WORLD_SIZE from the env: torchrun sets it for every worker")
