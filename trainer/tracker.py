"""Where a run is and what it has trained: the one progress tracker of the training loop.

`Progress` is the position a checkpoint records (completed epochs, the step within the epoch in progress, the
global step, the best validation so far, and mid-epoch the epoch's figures before the checkpoint). `Meter` counts the
epoch in progress: loss sums on the device (read only at a log interval, a vote or the epoch's end), the count they
are a mean over (samples or tokens), rows trained, training and batch-fetch time, per log interval and per epoch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Progress:
    epoch: int = 0  # completed epochs = index of the epoch in progress
    epoch_step: int = 0  # steps already done in that epoch
    step: int = 0  # optimiser steps in total
    best: dict[str, Any] = field(default_factory=dict)  # val_loss, val_acc, epoch, step of the best model
    partial: dict[str, Any] | None = None  # mid-epoch resume: the epoch's training figures before the checkpoint


class Meter:
    """The epoch in progress on this rank. A resumed epoch starts from its checkpoint's figures (`partial`, sums over
    all ranks: rank 0 adds them once, the epoch's all-reduce spreads them)."""

    def __init__(self, device: torch.device, partial: dict[str, Any] | None, is_main: bool):
        self.device = device
        self.loss = torch.zeros((), device=device, dtype=torch.float64)  # the epoch's, closed intervals only
        self.count = 0.0
        self.samples = 0
        self.offset_s = 0.0  # training time of this epoch before the checkpoint it resumed from
        if partial:
            if is_main:
                self.loss += float(partial["loss_sum"])
                self.samples = int(partial["samples"])
                self.count = float(partial.get("count", partial["samples"]))
            self.offset_s = float(partial["train_s"])
        self.i_loss = torch.zeros((), device=device, dtype=torch.float64)
        self.i_count = 0.0
        self.i_samples = 0
        self.i_data = self.vote_data = 0.0  # seconds fetching batches since the last log interval / vote
        self.started = self.i_started = time.perf_counter()
        self.cpu_started = time.process_time()  # this process's CPU time, all its threads (gloo's included)
        self.ended: float | None = None
        self.cpu_ended: float | None = None

    def add(self, loss_sum: torch.Tensor, count: float, samples: int, data_s: float) -> None:
        self.i_loss += loss_sum
        self.i_count += count
        self.i_samples += samples
        self.i_data += data_s
        self.vote_data += data_s

    def close_interval(self, now: float | None = None) -> None:
        self.loss += self.i_loss
        self.count += self.i_count
        self.samples += self.i_samples
        self.i_loss = torch.zeros((), device=self.device, dtype=torch.float64)
        self.i_count, self.i_samples, self.i_data = 0.0, 0, 0.0
        self.i_started = time.perf_counter() if now is None else now

    def finish(self) -> None:
        """The epoch's training is over: its training and CPU time stop here (validation and checkpoints excluded)."""
        self.ended, self.cpu_ended = time.perf_counter(), time.process_time()

    def train_seconds(self) -> float:
        return self.offset_s + (self.ended or time.perf_counter()) - self.started

    def cpu_seconds(self) -> float:
        return (self.cpu_ended or time.process_time()) - self.cpu_started

    def partial(self) -> dict[str, Any]:
        """This rank's figures of the epoch so far (a host sync), for a mid-epoch checkpoint."""
        return {"loss_sum": float((self.loss + self.i_loss).item()), "count": self.count + self.i_count,
                "samples": self.samples + self.i_samples, "train_s": self.train_seconds()}

    def epoch_sums(self) -> torch.Tensor:
        """[loss sum, count, samples] of the epoch on the device, for the epoch's all-reduce (the interval closed)."""
        return torch.stack([self.loss, torch.tensor(self.count, device=self.device, dtype=torch.float64),
                            torch.tensor(float(self.samples), device=self.device, dtype=torch.float64)])


def merge_partials(partials: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The epoch's figures over all ranks from each rank's `Meter.partial`, so that a resumed epoch reports the whole
    epoch."""
    if not partials:
        return None
    return {"loss_sum": sum(p["loss_sum"] for p in partials), "count": sum(p.get("count", p["samples"]) for p in partials),
            "samples": sum(p["samples"] for p in partials), "train_s": max(p["train_s"] for p in partials)}
