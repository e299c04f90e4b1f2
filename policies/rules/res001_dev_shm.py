"""GPU pods mount a memory-backed `/dev/shm` with a size limit inside the memory limit.

A container's `/dev/shm` is 64 MB. NCCL moves data between the GPUs of one pod through shared memory and fails with
`No space left on device` (or a bus error) when it runs out; DataLoader workers hand batches over through it too.
Mount an `emptyDir: {medium: Memory, sizeLimit: ...}` at `/dev/shm`. Memory-backed volumes count against the pod's
memory limit, so the size limit must fit inside it (else the pod is OOM-killed instead of told the volume is full).
Missing is an error with more than one GPU per pod where the manifest states the nccl backend (NCCL's intra-node
transport needs it); where the backend is not visible (it lives in the training code), a warning that says "if the
job uses NCCL"; a warning with one GPU. A disk-backed `/dev/shm`, or one without a size limit, is a warning. A pod
with `hostIPC: true` has the node's own `/dev/shm`, not the runtime's 64 MB (containerd's setupSandboxFiles mounts
that tmpfs only for a pod in its own IPC namespace): nothing to say here (host access is SEC008's).

Fails: 8 GPUs per pod and no `/dev/shm` mount; `sizeLimit: 32Gi` with a 16Gi memory limit.
Passes: `emptyDir: {medium: Memory, sizeLimit: 256Gi}` at `/dev/shm` with a 1600Gi memory limit.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, WARNING, Problem
from ..launchers import Pod
from ..kube.values import quantity_bytes
from .kit import Context, nccl_stated, problem_at

ID = "RES001"
NAME = "dev-shm"


def _memory_limit(pod: Pod) -> float | None:
    total = 0.0
    for c in pod.spec.get("containers") or []:
        if c.get("name") == pod.container.get("name"):
            c = pod.container  # a TrainJob's resourcesPerNode lands on the merged container
        q = quantity_bytes(((c.get("resources") or {}).get("limits") or {}).get("memory"))
        if q is None:
            return None
        total += q
    return total or None


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if not t.gpus:
            continue
        for pod in ctx.distinct_pods(t):
            mount = next((m for m in pod.container.get("volumeMounts") or []
                          if isinstance(m, dict) and str(m.get("mountPath", "")).rstrip("/") == "/dev/shm"), None)
            if mount is None and pod.spec.get("hostIPC") is True:
                continue  # the host's own /dev/shm (containerd v1.7 pkg/cri/sbserver setupSandboxFiles; SEC008's)
            if mount is None:
                stated = nccl_stated(t)
                yield problem_at(ID, ctx, t, f"{pod.container_field}.volumeMounts",
                                 f"no /dev/shm volume: the container gets 64 MB of shared memory for "
                                 f"{t.gpus} GPU{'s' if t.gpus > 1 else ''}" +
                                 ((" (NCCL's intra-node transport runs out)" if stated else
                                   " (if the job uses NCCL, its intra-node transport runs out)") if t.gpus > 1 else ""),
                                 "mount an emptyDir {medium: Memory, sizeLimit: <inside the memory limit>} at /dev/shm",
                                 severity=ERROR if t.gpus > 1 and stated else WARNING)
                continue
            name = mount.get("name")
            j, vol = next(((j, v) for j, v in enumerate(pod.spec.get("volumes") or []) if isinstance(v, dict)
                           and v.get("name") == name), (None, None))
            if vol is None:
                continue  # the API server rejects a mount of an undeclared volume; the schema stage cannot see it
            field = f"{pod.spec_field}.volumes[{j}]"
            empty = vol.get("emptyDir")
            if not isinstance(empty, dict) or empty.get("medium") != "Memory":
                yield problem_at(ID, ctx, t, field, f"/dev/shm is volume '{name}', not a memory-backed emptyDir",
                                 "use emptyDir: {medium: Memory, sizeLimit: ...}", severity=WARNING)
                continue
            size = quantity_bytes(empty.get("sizeLimit"))
            if size is None:
                yield problem_at(ID, ctx, t, f"{field}.emptyDir", "memory-backed /dev/shm has no sizeLimit: it can "
                                 "take the whole memory limit and get the pod OOM-killed",
                                 "set emptyDir.sizeLimit inside the memory limit", severity=WARNING)
                continue
            limit = _memory_limit(pod)
            if limit is None:
                yield problem_at(ID, ctx, t, f"{pod.container_field}.resources.limits", "no memory limit: cannot "
                                 "check that /dev/shm fits inside it", "set resources.limits.memory",
                                 severity=WARNING)
            elif size > limit:
                yield problem_at(ID, ctx, t, f"{field}.emptyDir.sizeLimit", f"/dev/shm sizeLimit "
                                 f"{empty.get('sizeLimit')} is above the pod's memory limit "
                                 f"({limit / 2**30:g}Gi): filling it OOM-kills the pod",
                                 "lower sizeLimit below the memory limit (it counts against it)")
