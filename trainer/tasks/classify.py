"""What the classification tasks (synthetic, digits, mnist, fashion-mnist) share: a whole data set in memory
(`Data`), moved to the training device once, batches sliced from it by index (no DataLoader), a cross-entropy step
and validation sums with accuracy. Each task module supplies `load(args) -> Data` and its model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from trainer import distributed as D
from trainer import engine
from trainer.tasks import Context, Task


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


class ClassifyRun:
    """The TaskRun of a classification task (trainer/tasks/__init__.py)."""

    unit = "samples"
    strategy = "ddp"
    weight_decay = 0.0
    accumulation = 1

    def __init__(self, data: Data, model: nn.Module, amp: torch.dtype | None, channels_last: bool):
        self.data, self.model, self.amp = data, model, amp
        self.channels_last = channels_last
        self.model_name = type(model).__name__
        self.data_identity, self.description = data.identity, data.description
        self.train_size, self.val_size = data.train_x.shape[0], data.val_x.shape[0]
        self.index_device = torch.device("cpu")
        self.warnings: list[str] = []

    def to(self, device: torch.device, channels_last: bool) -> None:
        self.data = self.data.to(device, channels_last)
        self.index_device = device  # the shard goes to the device once per epoch, batches are slices of it

    def start(self, total_steps: int) -> dict[str, Any]:
        return {}

    def fetch(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.data.train_x[idx], self.data.train_y[idx]

    def train_step(self, model: nn.Module, optimizer: torch.optim.Optimizer, batch: tuple[torch.Tensor, torch.Tensor],
                   step: int) -> tuple[torch.Tensor, float, int]:
        xb, yb = batch
        b = yb.shape[0]
        loss = engine.train_step(model, optimizer, xb, yb, self.amp, self.channels_last)
        return loss * b, b, b

    def val_step(self, model: nn.Module, idx: torch.Tensor) -> torch.Tensor:
        if idx.numel() == 0:
            return torch.zeros(3, device=self.data.val_x.device, dtype=torch.float64)
        return engine.eval_sums(model, self.data.val_x[idx], self.data.val_y[idx], self.amp, self.channels_last)

    def train_fields(self, loss: float, step: int) -> dict[str, Any]:
        return {}

    def val_fields(self, val_loss: float) -> dict[str, Any]:
        return {}

    def exports(self, epoch: int, complete: bool, is_best: bool) -> list[str]:
        return []  # best.pt is a copy of the checkpoint (trainer/checkpoint/single.py)


def build(task: Task, ctx: Context, load: Callable[[Any], Data], model: Callable[[Data], nn.Module]) -> ClassifyRun:
    """Every rank loads the data and builds the model (seeded by the trainer), then the ranks agree."""
    args = ctx.config

    def make() -> ClassifyRun:
        data = load(args)
        return ClassifyRun(data, model(data), engine.AMP_DTYPES[args.amp], bool(args.channels_last) and task.image)

    return D.agree(make)
