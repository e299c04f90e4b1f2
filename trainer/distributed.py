"""Process-group set-up from torchrun's environment, and the few collectives the trainer needs.

Every check that can fail on one rank only runs through `agree`, so all ranks exit together instead of
leaving the healthy ones blocked at the next collective.
"""

from __future__ import annotations

import os
import traceback
from datetime import timedelta
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar

import torch
import torch.distributed as dist

from trainer.cli import BACKENDS
from trainer.errors import TrainerError

T = TypeVar("T")


@dataclass(frozen=True)
class DistEnv:
    """What torchrun told this process, after validation."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    backend: str  # "nccl" or "gloo"
    launched: bool  # started by torchrun (a process group is created, even for a world of one)
    restart_count: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _int_env(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise TrainerError(f"{name}={raw!r} is not an integer") from None


def read_env(env: Mapping[str, str], backend: str, cuda_devices: int) -> DistEnv:
    """Validate torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, ...) against the flags and the GPUs.

    Pure function of its arguments so that every inconsistency is unit-testable without processes.
    """
    if backend not in BACKENDS:
        raise TrainerError(f"--backend {backend!r} is not one of {', '.join(BACKENDS)}")
    if backend == "nccl" and cuda_devices == 0:
        raise TrainerError("--backend nccl needs CUDA, but no GPU is visible; use --backend gloo or auto")
    chosen = backend if backend != "auto" else ("nccl" if cuda_devices > 0 else "gloo")

    world = _int_env(env, "WORLD_SIZE")
    rank = _int_env(env, "RANK")
    local_rank = _int_env(env, "LOCAL_RANK")
    local_world = _int_env(env, "LOCAL_WORLD_SIZE")
    restarts = _int_env(env, "TORCHELASTIC_RESTART_COUNT") or 0

    if world is None:
        if rank not in (None, 0) or local_rank not in (None, 0):
            raise TrainerError(
                f"RANK={env.get('RANK')} / LOCAL_RANK={env.get('LOCAL_RANK')} are set but WORLD_SIZE is not: "
                "start the trainer with torchrun, or unset them for a single process"
            )
        # Plain `python trainer/train.py`: a world of one, no process group.
        return DistEnv(0, 0, 1, 1, chosen, launched=False, restart_count=0)

    if world < 1:
        raise TrainerError(f"WORLD_SIZE={world} must be at least 1")
    if local_rank is None:
        if world > 1:
            raise TrainerError(
                f"WORLD_SIZE={world} but LOCAL_RANK is not set: this process was not started by torchrun; "
                "start it with `torchrun --nnodes=<nodes> --nproc-per-node=<procs> trainer/train.py ...`"
            )
        local_rank = 0
    if rank is None:
        raise TrainerError(f"WORLD_SIZE={world} but RANK is not set: start the trainer with torchrun")
    if not 0 <= rank < world:
        raise TrainerError(f"RANK={rank} is outside 0..{world - 1} (WORLD_SIZE={world})")
    if local_world is None:
        local_world = 1 if world == 1 else local_rank + 1
    if not 1 <= local_world <= world:
        raise TrainerError(f"LOCAL_WORLD_SIZE={local_world} is outside 1..WORLD_SIZE={world}")
    if not 0 <= local_rank < local_world:
        raise TrainerError(f"LOCAL_RANK={local_rank} is outside 0..{local_world - 1} (LOCAL_WORLD_SIZE={local_world})")
    if world > 1:
        for name in ("MASTER_ADDR", "MASTER_PORT"):
            if not env.get(name):
                raise TrainerError(f"WORLD_SIZE={world} but {name} is not set: start the trainer with torchrun")
        port = _int_env(env, "MASTER_PORT")
        if port is None or not 0 < port < 65536:
            raise TrainerError(f"MASTER_PORT={env.get('MASTER_PORT')!r} is not a TCP port")
    if chosen == "nccl" and local_rank >= cuda_devices:
        visible = env.get("CUDA_VISIBLE_DEVICES", "<unset>")
        raise TrainerError(
            f"LOCAL_RANK={local_rank} but only {cuda_devices} GPU(s) are visible (CUDA_VISIBLE_DEVICES={visible}): "
            "--nproc-per-node must not exceed the GPUs of the node"
        )
    return DistEnv(rank, local_rank, world, local_world, chosen, launched=True, restart_count=restarts)


def attempt_store(env: Mapping[str, str], denv: DistEnv, timeout: timedelta | None = None) -> dist.Store | None:
    """A key namespace of its own for each torchrun restart, where torchrun reuses one store for all of them.

    torchrun (torch 2.13) hands every restart of the workers the same agent-hosted TCPStore
    (TORCHELASTIC_USE_AGENT_STORE=True) with no per-attempt prefix, so the restarted group reads the dead
    group's gloo addresses or NCCL id and fails to connect ("Gloo connectFullMesh failed ... Connection
    refused"; pytorch/pytorch#167288). The restart count is the same on every node with static rendezvous;
    with c10d rendezvous over several nodes it can differ, so there set TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
    on torchrun (docs/trainer.md), which gives every round a fresh store and bypasses this function.
    """
    if env.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or denv.world_size == 1:
        return None
    client = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), denv.world_size, is_master=False,
                           timeout=timeout or dist.constants.default_pg_timeout)
    return dist.PrefixStore(f"trainer/attempt-{denv.restart_count}", client)


def init(backend: str, timeout_s: float | None = None) -> tuple[DistEnv, torch.device]:
    """Read and check the environment, pick the device, create the process group when torchrun started us.

    `timeout_s` (--pg-timeout) bounds how long a collective waits for a peer that hangs without dying:
    torch's default is 30 minutes for gloo (10 for NCCL).
    """
    cuda_devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    denv = read_env(os.environ, backend, cuda_devices)
    if denv.backend == "nccl":
        device = torch.device("cuda", denv.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if denv.launched:
        kwargs: dict[str, Any] = {"device_id": device} if device.type == "cuda" else {}
        timeout = timedelta(seconds=timeout_s) if timeout_s else None
        if timeout is not None:
            kwargs["timeout"] = timeout
        store = attempt_store(os.environ, denv, timeout)
        if store is not None:
            kwargs["store"] = store
        dist.init_process_group(backend=denv.backend, rank=denv.rank, world_size=denv.world_size, **kwargs)
    return denv, device


def active() -> bool:
    return dist.is_available() and dist.is_initialized()


def is_main() -> bool:
    """Rank 0, or the only process of a world of one."""
    return not active() or dist.get_rank() == 0


def shutdown() -> None:
    if active():
        dist.destroy_process_group()


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over all ranks in place (no-op for a single process)."""
    if active():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_gather_objects(obj: T) -> list[T]:
    if not active():
        return [obj]
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: T, src: int = 0) -> T:
    if not active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def agree(fn: Callable[[], T]) -> T:
    """Run `fn` on every rank, then fail on every rank if it failed on any.

    A `TrainerError` becomes the same `TrainerError` everywhere (rank 0's own, else the first failing rank's
    prefixed with its rank), so rank 0 can print one line and all ranks exit non-zero without a hang.
    An unexpected exception keeps its traceback on the rank where it happened.
    """
    result: T | None = None
    err: str | None = None
    try:
        result = fn()
    except TrainerError as e:
        err = str(e)
    except Exception as e:  # a bug, not bad input: keep the traceback on this rank, still release the others
        traceback.print_exc()
        err = f"{type(e).__name__}: {e}"
    errors = all_gather_objects(err)
    failed = [(r, e) for r, e in enumerate(errors) if e]
    if failed:
        first_rank, first = failed[0]  # rank 0's own error when it has one: that is the rank that prints
        raise TrainerError(first if first_rank == 0 else f"rank {first_rank}: {first}")
    return result  # type: ignore[return-value]
