"""How a model is spread over the ranks: `ddp` (a replica per rank, gradients all-reduced) or `fsdp` (PyTorch's
FSDP2 `fully_shard`: parameters, gradients and optimiser state sharded over the ranks).

Under FSDP each transformer block is its own unit (the model's `_no_split_modules`, as Hugging Face declares
them), then the root, so one block at a time is gathered in full. Both strategies give the same state-dict
interface to torch.distributed.checkpoint (trainer/checkpoint/sharded.py). The training loop (trainer/loop.py) wraps
every task's model here: the classification tasks always under `ddp`.
"""

from __future__ import annotations

import torch
from torch import nn

from trainer import distributed as D
from trainer.errors import TrainerError
from trainer.tasks.causal_lm_flags import STRATEGIES


def block_classes(model: nn.Module) -> set[str]:
    return set(getattr(model, "_no_split_modules", None) or [])


def wrap(model: nn.Module, strategy: str, device: torch.device) -> tuple[nn.Module, int]:
    """The module to train (the same object under FSDP2, a DDP wrapper under DDP) and the number of FSDP units."""
    if strategy == "ddp":
        if not D.active():
            return model, 0
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[device.index] if device.type == "cuda" else None), 0
    if strategy != "fsdp":
        raise TrainerError(f"--strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    if not D.active():
        raise TrainerError("--strategy fsdp needs a process group: start the trainer with torchrun "
                           "(torchrun --nproc-per-node=1 for a world of one)")
    from torch.distributed.fsdp import fully_shard

    names = block_classes(model)
    units = 0
    for module in model.modules():
        if type(module).__name__ in names:
            fully_shard(module)
            units += 1
    fully_shard(model)
    return model, units + 1

