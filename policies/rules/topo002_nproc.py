"""Processes per node equal the GPUs per pod on GPU pods, and fit the CPU limit on CPU pods.

`--nproc-per-node` (`nprocPerNode`, `numProcPerNode`) starts that many workers in each pod. On GPUs it must be an
integer equal to the `nvidia.com/gpu` limit: fewer leaves GPUs idle, more puts two processes on one device (NCCL
refuses duplicate GPUs). `auto`, `gpu` and `cpu` are not allowed: their meaning depends on what the node shows at run
time (a TrainJob's `auto` without GPUs silently becomes the CPU count). On CPU pods the processes must fit the CPU
limit; with no CPU limit or request the check cannot run and says so (a warning).

Fails: `nvidia.com/gpu: 8` with `--nproc-per-node=4`; a PyTorchJob without `nprocPerNode` (default `auto`);
2 processes in a pod limited to 1.5 CPUs.
Passes: `nvidia.com/gpu: 8` with `--nproc-per-node=8`; 2 processes with `cpu: "2"`.
"""
from __future__ import annotations

from ..model import WARNING
from ..rulekit import launcher_field, problem

ID = "TOPO002"
NAME = "nproc-matches-devices"


def check(ctx):
    for t in ctx.topologies:
        if not t.torchrun:
            continue
        s = t.first.nproc
        where = launcher_field(t, s.field or t.first.inv.field, "nproc")
        if "$" in s.value:
            continue  # TOPO012 reports what could not be resolved
        if t.nproc is None:
            expected = f"{t.gpus} (the GPU limit)" if t.gpus else "an integer within the CPU limit"
            yield problem(ID, t, where, f"processes per node is '{s.value}', expected {expected}",
                          "write the number of processes per pod explicitly")
            continue
        if t.gpus:
            if t.nproc != t.gpus:
                yield problem(ID, t, where, f"{t.nproc} processes per pod but {t.gpus} GPUs per pod",
                              f"set processes per node to {t.gpus}, or the nvidia.com/gpu limit to {t.nproc}")
            continue
        cpus = t.cpu_limit if t.cpu_limit is not None else t.cpu_request
        if cpus is None and t.nproc > 1:
            yield problem(ID, t, f"{t.first.pod.container_field}.resources",
                          f"{t.nproc} processes per pod with no CPU limit or request: cannot check they fit",
                          f"set resources.limits.cpu to at least {t.nproc}", severity=WARNING)
        elif cpus is not None and t.nproc > cpus:
            yield problem(ID, t, where, f"{t.nproc} processes per pod but only {cpus:g} CPUs "
                          f"({'limit' if t.cpu_limit is not None else 'request'})",
                          f"set resources.limits.cpu to at least {t.nproc}, or processes per node to {int(cpus) or 1}")
