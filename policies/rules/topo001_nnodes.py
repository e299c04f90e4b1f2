"""torchrun's node count equals the number of pods the launcher creates.

torchrun waits until `--nnodes` agents have joined. With fewer pods than that the rendezvous never completes
(every GPU idles until the join timeout); with more, the extra pods form worlds of their own or fail. A torchrun
given no `--nnodes` (or `PET_NNODES`) defaults to `1:1`: each pod trains alone, which looks like training but is not
distributed at all. An elastic range `MIN:MAX` must contain the pod count. The same holds for `accelerate launch`
(`--num_machines`), `deepspeed --no_ssh` (`--num_nodes`) and a script given the PyTorch ImageNet example's
`--dist-url` (`--world-size`, nodes with `--multiprocessing-distributed`, else processes, one per pod). A script
that initialises the `mpi` process group without `mpirun` is an MPI world of one in every pod, whatever WORLD_SIZE
says. A TrainJob of several nodes on a torch runtime whose command is written out and
starts no torchrun, with no WORLD_SIZE, RANK or MASTER_ADDR set: the Trainer injects only `PET_*`, which torchrun
alone reads, so the nodes form no world together (each trains alone, or `init_process_group` fails). Code written
in the manifest (`python -c`) that never touches torch.distributed is not a world and is left alone.

Fails: a Job with `completions: 4` whose container runs `torchrun --nnodes=2 ...`, or JobSet's resnet example,
4 pods whose torchrun has no `--nnodes`; 2 pods running `python train.py --backend mpi`; a TrainJob of 2 nodes
running `python3 mnist.py` (Katib's trainjob-pytorch example).
Also fails: `python main.py --dist-url tcp://... --world-size 3` on 2 pods; `deepspeed --no_ssh --num_nodes 3` on 2.
A script started without a launcher whose hand-set WORLD_SIZE is neither the number of pods nor the pods times
their GPUs gets a warning: env:// waits for WORLD_SIZE ranks, and whether the script starts one process per pod is
not in the manifests.

Passes: `completions: 4` and `torchrun --nnodes=4`; a PyTorchJob, whose operator sets `PET_NNODES` to its replicas.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from .kit import Context, pods_field, problem
from ..model.topology import Topology, launcher_field

ID = "TOPO001"
NAME = "nnodes-matches-pods"


def check(ctx: Context) -> Iterator[Problem]:
    for u in ctx.undetermined:
        c = u.unlinked
        if c is not None:
            m = u.workload.manifest
            yield Problem(ID, c.message, m.source, m.ref, c.field, c.hint, severity=c.severity or "")
    for t in ctx.topologies:
        if t.mpi_world_of_one and t.pods > 1:
            b = t.pg_backend
            yield problem(ID, t, b[1] if b else t.first.pod.container_field,
                          f"the script initialises the mpi backend without mpirun: each of the {t.pods} pods is an "
                          "MPI world of one (torch takes rank and size from MPI, not WORLD_SIZE)",
                          "start the script with mpirun across the pods, or use torchrun with gloo or nccl")
            continue
        if not t.torchrun:
            yield from _env_world(t)
            continue
        if t.nnodes_min is None:
            continue
        assert t.first.inv is not None, "t.torchrun: pod 0 has an invocation (torchrun = first.inv is not None)"
        assert t.nnodes_max is not None, "split_nnodes gives both bounds or neither (command/torchrun.py)"
        s = t.first.nnodes
        where = launcher_field(t, s.field or t.first.inv.field, "nnodes")
        if t.elastic:
            if not (t.nnodes_min <= t.pods <= t.nnodes_max):
                yield problem(ID, t, where,
                              f"elastic --nnodes {s.value} does not admit the {t.pods} pods {t.launcher_id} creates",
                              f"make the range include {t.pods}, or set {pods_field(t)} within {s.value}")
            continue
        if t.nnodes_max == t.pods:
            continue
        if s.origin == "default":
            msg = (f"torchrun gets no --nnodes (default 1:1) but {t.launcher_id} creates {t.pods} pods: "
                   f"each pod forms a world of one")
        else:
            said = t.first.inv.flag("nnodes")
            origin = "" if " in " in said else f" ({s.origin})"  # (a config file's key names its file)
            msg = f"{said} is {s.value}{origin} but {t.launcher_id} creates {t.pods} pods"
        inv = t.first.inv
        yield problem(ID, t, where, msg,
                      f"set {inv.flag('nnodes')}{' (or PET_NNODES)' if inv.reads_pet_env else ''} to {t.pods}, "
                      f"or set {pods_field(t)} to {t.nnodes_max}")


def _env_world(t: Topology) -> Iterator[Problem]:
    """A script started without a launcher, given WORLD_SIZE by hand: env:// waits for that many ranks. Whether the
    script starts one process per pod (as the model takes it) or spawns one per GPU is not in the manifests: a
    warning under that condition, silent where WORLD_SIZE is the pods or the pods x their GPUs."""
    pod = t.first.pod
    value = pod.env.get("WORLD_SIZE")
    if value is None or "WORLD_SIZE" in pod.injected or not str(value).isdigit() or t.pods < 1:
        return
    n = int(value)
    if n in (t.pods, t.pods * max(t.gpus, 1)):
        return
    effect = (f"it waits for {n - t.pods} more ranks, which never join" if n > t.pods else
              f"the ranks from {n} up are outside the world and init refuses them")
    yield problem(ID, t, pod.env_fields.get("WORLD_SIZE") or pod.container_field,
                  f"WORLD_SIZE is {n} but {t.launcher_id} creates {t.pods} pods: if the script starts one process "
                  f"per pod and initialises torch.distributed from env://, {effect}",
                  f"set WORLD_SIZE to {t.pods} (one process per pod), or set {pods_field(t)} to {n}",
                  severity=WARNING)
