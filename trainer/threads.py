"""How many CPU threads each process gives torch: the container's CPU limit shared by the local processes.

torch's default is one thread per core of the *node*, whatever the pod's `resources.limits.cpu`: a one-process
CPU pod limited to 4 CPUs on a 64-core node runs 64 threads and is throttled by the CFS quota. The trainer
sets `torch.set_num_threads(max(1, cpus // local processes))`, where cpus is the smallest of the cgroup
CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us / cpu.cfs_period_us`, rounded down, at least 1) and the CPUs
this process may run on (`os.sched_getaffinity`). An explicit `OMP_NUM_THREADS` wins (torch applies it
itself; torchrun sets it to 1 when it starts more than one process per node and it is unset).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _quota_v2(text: str) -> float | None:
    """`cpu.max` holds "<quota> <period>" or "max <period>" (no limit)."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    quota, period = int(parts[0]), int(parts[1])
    return quota / period if quota > 0 and period > 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _own_cgroup_paths(proc_cgroup: str | None) -> tuple[str | None, str | None]:
    """(v2 path, v1 cpu-controller path) of this process from /proc/self/cgroup."""
    v2 = v1 = None
    for line in (proc_cgroup or "").splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hid == "0" and controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _ancestors(root: Path, rel: str | None) -> list[Path]:
    """root/rel, its parents up to root, and root itself (a limit on any of them applies)."""
    folders = [root]
    if rel and rel != "/":
        parts = [p for p in rel.split("/") if p]
        folders = [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]
    return folders


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> tuple[float | None, str]:
    """The CPU quota of this process's cgroup in CPUs (None: no limit found) and the file it came from."""
    if proc_cgroup is None:
        proc_cgroup = _read(Path("/proc/self/cgroup"))
    v2_rel, v1_rel = _own_cgroup_paths(proc_cgroup)
    found: list[tuple[float, str]] = []
    # cgroup v2: <root>/<path>/cpu.max (with a cgroup namespace, as in a container, <path> is "/")
    for folder in _ancestors(root, v2_rel):
        text = _read(folder / "cpu.max")
        if text is not None:
            try:
                quota = _quota_v2(text)
            except ValueError:
                quota = None
            if quota is not None:
                found.append((quota, str(folder / "cpu.max")))
    # cgroup v1: the cpu controller's hierarchy
    for base in (root / "cpu", root / "cpu,cpuacct", root):
        for folder in _ancestors(base, v1_rel) if base != root else [root]:
            q, p = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
            if q is None or p is None:
                continue
            try:
                quota, period = int(q), int(p)
            except ValueError:
                continue
            if quota > 0 and period > 0:
                found.append((quota / period, str(folder / "cpu.cfs_quota_us")))
    if not found:
        return None, "no cgroup CPU limit"
    return min(found)


def affinity_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def choose_threads(env: Mapping[str, str], local_processes: int, root: Path = CGROUP_ROOT,
                   proc_cgroup: str | None = None, cpus: int | None = None) -> tuple[int | None, str]:
    """(threads to set, or None to leave torch's as they are; why), for one of `local_processes` processes."""
    explicit = env.get("OMP_NUM_THREADS", "").strip()
    if explicit:
        return None, f"OMP_NUM_THREADS={explicit}"
    cpus = affinity_cpus() if cpus is None else cpus
    limit, source = cgroup_cpu_limit(root, proc_cgroup)
    if limit is not None and limit < cpus:
        usable, why = max(1, math.floor(limit)), f"cgroup limit {limit:g} CPUs ({source})"
    else:
        usable, why = cpus, f"{cpus} CPUs in the affinity mask" + (f", cgroup limit {limit:g}" if limit else "")
    local = max(1, local_processes)
    return max(1, usable // local), f"{why} / {local} local process{'es' if local > 1 else ''}"
