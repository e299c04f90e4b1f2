"""All pods of the world run at the same time and know their index.

An Indexed Job runs `parallelism` pods at once out of `completions`: with fewer running than torchrun waits for,
the rendezvous hangs; a NonIndexed Job gives its pods neither an index nor a stable hostname. A StatefulSet's
default `OrderedReady` creates pod 1 only after pod 0 is Ready, while pod 0 waits in rendezvous for pod 1.

Fails: `completions: 4, parallelism: 2`; a NonIndexed Job with 4 pods; a StatefulSet without
`podManagementPolicy: Parallel`.
Passes: `completionMode: Indexed, completions: 4, parallelism: 4`; `podManagementPolicy: Parallel`.
"""
from __future__ import annotations

from . import problem

ID = "TOPO010"
NAME = "pods-start-together"


def check(ctx):
    for t in ctx.topologies:
        f = t.workload.facts
        if t.launcher == "indexed-job":
            completions, parallelism = f.get("completions"), f.get("parallelism")
            if completions != parallelism:
                yield problem(ID, t, "spec.parallelism", f"parallelism is {parallelism} but completions is "
                              f"{completions}: not every rank runs at the same time",
                              f"set parallelism and completions both to {t.pods}")
        elif t.launcher == "job" and t.pods > 1:
            yield problem(ID, t, "spec.completionMode", f"completionMode is {f.get('completion_mode')}: the "
                          f"{t.pods} pods get no index and no stable hostname", "set completionMode: Indexed")
        elif t.launcher == "statefulset" and t.pods > 1 and f.get("pod_management_policy") != "Parallel":
            yield problem(ID, t, "spec.podManagementPolicy", f"podManagementPolicy is "
                          f"{f.get('pod_management_policy')}: pod 1 waits for pod 0 to be Ready while pod 0 waits "
                          "in rendezvous for pod 1", "set podManagementPolicy: Parallel (immutable: recreate the StatefulSet)")
