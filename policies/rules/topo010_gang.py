"""All pods of the world run at the same time and know their index.

An Indexed Job runs `parallelism` pods at once out of `completions`: with fewer running than torchrun waits for,
the rendezvous hangs; a NonIndexed Job gives its pods neither an index nor a stable hostname. A StatefulSet's
default `OrderedReady` creates pod 1 only after pod 0 is Ready, while pod 0 waits in rendezvous for pod 1: without a
probe pod 0 is Ready once it starts, so the pods only start one after another (a warning); with a probe the
container answers, a warning phrased as the probe succeeding only once training runs (what it asks of the image or
the script is not in the manifests).

Fails: `completions: 4, parallelism: 2`; a NonIndexed Job with 4 pods; a StatefulSet without
`podManagementPolicy: Parallel`.
Passes: `completionMode: Indexed, completions: 4, parallelism: 4`; `podManagementPolicy: Parallel`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import Problem
from .kit import Context, problem

ID = "TOPO010"
NAME = "pods-start-together"


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        c = t.workload.launcher.startup(t.workload)
        if c is not None:
            yield problem(ID, t, c.field, c.message, c.hint, severity=c.severity or "")
