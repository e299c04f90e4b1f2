"""Registry of training tasks: each module in this package registers one or more `Task` objects.

A task turns the parsed flags into in-memory tensors (`Data`) and builds the model for them; the training
loop in trainer/train.py is the same for every task. Add a task by adding a module and importing it below.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from trainer.errors import TrainerError


@dataclass
class Data:
    """A whole data set in memory: training and validation tensors plus what to log and check on resume."""

    train_x: torch.Tensor
    train_y: torch.Tensor  # int64 class labels
    val_x: torch.Tensor
    val_y: torch.Tensor
    num_classes: int
    description: str  # printed in the [DDP] and [DONE] lines: which data this run used
    identity: dict[str, Any] = field(default_factory=dict)  # must match a checkpoint's to resume from it

    def to(self, device: torch.device, channels_last: bool = False) -> "Data":
        def move(x: torch.Tensor) -> torch.Tensor:
            x = x.to(device, non_blocking=True)
            return x.contiguous(memory_format=torch.channels_last) if channels_last and x.dim() == 4 else x

        return Data(move(self.train_x), self.train_y.to(device), move(self.val_x), self.val_y.to(device),
                    self.num_classes, self.description, self.identity)


@dataclass(frozen=True)
class Task:
    name: str
    summary: str
    load: Callable[[argparse.Namespace], Data] | None  # CPU tensors; raises TrainerError on bad input
    build_model: Callable[[Data], nn.Module] | None
    default_lr: float
    image: bool  # 4-D image input: --channels-last applies
    # A task whose data does not fit the in-memory classification loop runs its own (given the Trainer),
    # with flags of its own added to the parser; load and build_model are then None.
    run: Callable[[Any], int] | None = None
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    # --batch-size when none is given: small data sets need small batches to take enough steps per epoch
    default_batch_size: int = 256


TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    if task.name in TASKS:
        raise ValueError(f"task {task.name!r} registered twice")
    TASKS[task.name] = task
    return task


def get(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise TrainerError(f"unknown task {name!r}; known: {', '.join(sorted(TASKS))}") from None


# Importing the modules registers their tasks; keep this list in the order `--help` shows them.
from trainer.tasks import synthetic, digits, mnist, causal_lm  # noqa: E402,F401
