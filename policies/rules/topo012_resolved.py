"""Every topology value can be worked out from the manifests.

A `$(VAR)` that no env entry defines stays literally `$(VAR)` in the container's arguments (the kubelet leaves it),
so torchrun receives `--nnodes=$(NNODES)` and fails; a workload with no pods trains nothing. A check that cannot
work out a value says so here rather than passing silently.

`accelerate launch --config_file PATH` takes what its command line leaves out from that file: read where a
ConfigMap or Secret in the manifests is mounted at PATH; a file from the image cannot be read here, and where the
command line does not give the number of machines, the processes and the main process itself, an info line says
the world was not checked (no error: the file may well be right).

Fails: `--nnodes=$(NNODES)` with no `NNODES` in the env; a Job with `completions: 0`.
Passes: every `$(VAR)` defined in the container's env.
"""
from __future__ import annotations

from ..model import INFO, Problem
from ..rulekit import problem

ID = "TOPO012"
NAME = "topology-resolved"


def check(ctx):
    for w in ctx.unresolved:
        if not w.unresolved:  # (TOPO011 reports why the controller's pods cannot be worked out)
            m = w.manifest
            yield Problem(ID, f"{w.launcher_id} creates no pods", m.source, m.ref, "spec",
                          "set the replica count to the number of nodes")
    for u in ctx.undetermined:
        if u.unlinked:  # (TOPO001 reports that its pods form no world together)
            continue
        m = u.workload.manifest
        yield Problem(ID, "the container starts no torchrun (or accelerate) and gets no MASTER_ADDR or WORLD_SIZE: "
                      "whether the script forms a distributed world cannot be told from the manifest, so the "
                      "topology checks did not run", m.source, m.ref, "spec", "start the script with torchrun if it "
                      "calls torch.distributed", severity=INFO)
    for unread in ctx.unread:
        m = unread.workload.manifest
        yield Problem(ID, f"accelerate launch reads its settings from {unread.path}, which no ConfigMap or Secret in "
                      "the manifests is mounted at: the number of machines, the processes and the main process were "
                      "not checked", m.source, m.ref, unread.field or "spec", "mount the config from a ConfigMap, or "
                      "give --num_machines, --num_processes and --main_process_ip on the command line", severity=INFO)
    for t in ctx.topologies:
        v = t.first
        for label, s in (("nnodes", v.nnodes), ("processes per node", v.nproc), ("rendezvous endpoint", v.endpoint),
                         ("node rank", v.node_rank)):
            if "$" in s.value:
                yield problem(ID, t, s.field, f"{label} is '{s.value}': a variable the container env does not define",
                              "define the variable in the container's env, or write the value")
