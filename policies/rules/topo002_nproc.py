"""Processes per node fit the GPUs per pod on GPU pods, and the CPU limit on CPU pods.

`--nproc-per-node` (`nprocPerNode`, `numProcPerNode`) starts that many workers in each pod. On GPUs, more processes
than the `nvidia.com/gpu` limit put two processes on one device, which NCCL refuses: an error. Fewer leave GPUs idle
(a warning: the job runs, slower). `auto` (and `gpu`) on a GPU pod counts the GPUs the device plugin exposes, the
limit, as torchrun does. On CPU pods `auto` means the node's cores, whatever the CPU limit (a TrainJob's `auto`
becomes its CPU request instead), and more processes than the CPU limit share cores: both only cost speed, so
warnings; with no CPU limit or request the check cannot run and says so (a warning). On a pod that asks for an
accelerator other than a GPU (AWS Neuron, TPU, Gaudi: `launchers/pods.py` ACCELERATOR_RESOURCES) the processes run on
those devices, not on the CPUs, and how many a device takes (its cores) is not in the manifests: one info line says
the count was not checked.

`gpu` on a pod that requests no GPU stops torchrun before any worker starts ("Cuda is not available."): an error;
a warning phrased as the condition where the pod asks for a device that may be one but is not counted as a GPU here
(a MIG slice `nvidia.com/mig-*`, `nvidia.com/gpu.shared`, Intel's `gpu.intel.com/*` for `xpu`, a DRA resource claim).

`accelerate launch --multi_gpu` with fewer than 2 processes in all stops at start: an error.

Fails: `nvidia.com/gpu: 1` with `--nproc-per-node=2` (error); `accelerate launch --multi_gpu --num_processes 1`
(error); `--nproc-per-node=gpu` without a GPU (error); `nvidia.com/gpu: 8` with 4 processes, `auto` on a CPU
pod, 4 processes in a pod limited to 2 CPUs (warnings).
Passes: `nvidia.com/gpu: 8` with `--nproc-per-node=8` or `auto`; 2 processes with `cpu: "2"`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, INFO, WARNING, Problem
from ..launchers import accelerators, uncounted_devices
from .kit import Context, problem
from ..model.topology import launcher_field

# torchrun's per-device values of --nproc-per-node and the error each raises without the device.
NEEDS_DEVICE = {"gpu": "ValueError: Cuda is not available.", "xpu": "ValueError: Xpu is not available."}

ID = "TOPO002"
NAME = "nproc-matches-devices"


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if not t.torchrun:
            continue
        assert t.first.inv is not None, "t.torchrun: pod 0 has an invocation (torchrun = first.inv is not None)"
        s = t.first.nproc
        where = launcher_field(t, s.field or t.first.inv.field, "nproc")
        acc = t.first.inv.accelerate
        total = acc.get("num_processes", ("", ""))[0]
        if "multi_gpu" in acc and total.isdigit() and int(total) < 2:
            # accelerate commands/launch.py _validate_launch_command (commit 16cb6eb8 lines 1202-1203)
            yield problem(ID, t, acc["num_processes"][1], f"accelerate launch --multi_gpu with --num_processes "
                          f"{total}: accelerate stops at start (You need to use at least 2 processes to use "
                          "`--multi_gpu`)", "drop --multi_gpu, or give --num_processes the total of all machines' "
                          "processes", severity=ERROR)
            continue
        if "$" in s.value:
            continue  # TOPO012 reports what could not be resolved
        if t.nproc is None and s.value in NEEDS_DEVICE and not t.gpus:
            # torch/distributed/run.py determine_local_world_size: `gpu` (and `xpu`) raise before any worker starts
            # where no such device is visible, and the device plugin shows a container only the GPUs it requests.
            other = uncounted_devices(t.first.pod.container)
            said = f"no nvidia.com/gpu or amd.com/gpu: unless {', '.join(other)} gives each pod one, " if other \
                else "no GPU: "
            yield problem(ID, t, where, f"processes per node is '{s.value}' (one per GPU) but the pods request "
                          f"{said}torchrun stops at start ({NEEDS_DEVICE[s.value]})",
                          "request nvidia.com/gpu, or write the number of processes per pod",
                          severity=WARNING if other else ERROR)
            continue
        if t.nproc is None:
            expected = f"{t.gpus} (the GPU limit)" if t.gpus else "an integer within the CPU limit"
            yield problem(ID, t, where, f"processes per node is '{s.value}', expected {expected}: on a CPU pod it "
                          "depends on the node's cores", "write the number of processes per pod explicitly",
                          severity=WARNING if not t.gpus else ERROR)
            continue
        if t.gpus:
            if t.nproc > t.gpus:
                yield problem(ID, t, where, f"{t.nproc} processes per pod but {t.gpus} GPUs per pod: two processes "
                              "would share a GPU", f"set processes per node to {t.gpus}, or the nvidia.com/gpu limit "
                              f"to {t.nproc}")
            elif t.nproc < t.gpus:
                yield problem(ID, t, where, f"{t.nproc} processes per pod but {t.gpus} GPUs per pod: "
                              f"{t.gpus - t.nproc} GPUs stay idle", f"set processes per node to {t.gpus}, or the "
                              f"nvidia.com/gpu limit to {t.nproc}", severity=WARNING)
            continue
        devices = accelerators(t.first.pod.container)
        if devices:
            yield problem(ID, t, where, f"{t.nproc} processes per pod on {', '.join(devices)}: they run on those devices, "
                          "not on the CPUs, and how many of them a device takes (its cores) is not in the manifests: "
                          "not checked", "check the processes per pod against the cores of the devices it asks for",
                          severity=INFO)
            continue
        cpus = t.cpu_limit if t.cpu_limit is not None else t.cpu_request
        if cpus is None and t.nproc > 1:
            yield problem(ID, t, f"{t.first.pod.container_field}.resources",
                          f"{t.nproc} processes per pod with no CPU limit or request: cannot check they fit",
                          f"set resources.limits.cpu to at least {t.nproc}", severity=WARNING)
        elif cpus is not None and t.nproc > cpus:
            yield problem(ID, t, where, f"{t.nproc} processes per pod but only {cpus:g} CPUs "
                          f"({'limit' if t.cpu_limit is not None else 'request'}): they share cores",
                          f"set resources.limits.cpu to at least {t.nproc}, or processes per node to {int(cpus) or 1}",
                          severity=WARNING)
