"""The training tasks: what each one trains on and how one step goes. The trainer (trainer/loop.py) owns everything
else, the same for every task: the process group, DDP or FSDP2, the optimiser, the loop over epochs and steps, the
stop vote, validation's loop, checkpoints and resume (trainer/checkpoint/), logs and telemetry.

This registry is torch-free: the command line (trainer/cli.py) lists the tasks, their defaults and their flags without
importing a task. A task is a module with `build(task, ctx) -> TaskRun`, imported when a run uses it. Add one by
writing that module and a line in TASKS below; its flags, if it has any, go in a torch-free function beside it
(`add_arguments`, as trainer/tasks/causal_lm_flags.py).
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from trainer.config import RunConfig
from trainer.errors import TrainerError
from trainer.tasks import causal_lm_flags


@dataclass(frozen=True)
class Context:
    """What a task's `build` gets from the trainer."""

    config: RunConfig  # the run's flags (trainer/config.py)
    denv: Any  # trainer.distributed.DistEnv
    device: Any  # torch.device
    run_dir: Path


class TaskRun(Protocol):
    """What a task builds for one run (torchtitan's TrainSpec, evaluated). Indices are rows of the data set: samples,
    or the causal-LM task's token blocks; the shards and validation's split of them are the trainer's."""

    model: Any  # torch.nn.Module on the host, unwrapped: the trainer moves, wraps and optimises it
    model_name: str  # the [DDP] line's model= and the checkpoint identity's
    data_identity: dict[str, Any]  # must match a checkpoint's to resume from it
    description: str  # which data this run uses, for the [DDP] and [DONE] lines
    train_size: int  # rows the shards are drawn from
    val_size: int
    unit: str  # what the loss is a mean over and the throughput counts: "samples" or "tokens"
    strategy: str  # "ddp" or "fsdp" (trainer/fsdp.py)
    weight_decay: float  # AdamW's
    accumulation: int  # micro-batches of --batch-size rows per optimiser step
    index_device: Any  # where the trainer keeps the shard indices it hands to `fetch`
    warnings: list[str]

    def to(self, device: Any, channels_last: bool) -> None:
        """Move what the steps read to the training device (or leave it on the host and fetch per batch)."""

    def start(self, total_steps: int) -> dict[str, Any]:
        """The run's plan is known (every step it will take): the [DDP] line's fields of this task."""

    def fetch(self, indices: Any) -> Any:
        """The batch of one step (timed as the step's data time)."""

    def train_step(self, model: Any, optimizer: Any, batch: Any, step: int) -> tuple[Any, float, int]:
        """One optimiser step on the wrapped model: (loss sum as a float64 device scalar, the count it sums over,
        rows trained). No host sync: the trainer reads the sums at its log intervals."""

    def val_step(self, model: Any, indices: Any) -> Any:
        """Sums over some validation rows (maybe none: every rank runs as many batches): float64 device tensor
        [loss sum, correct, count]."""

    def train_fields(self, loss: float, step: int) -> dict[str, Any]:
        """Extra fields of a [TRAIN] line."""

    def val_fields(self, val_loss: float) -> dict[str, Any]:
        """Extra validation figures of an [EPOCH] line (e.g. perplexity)."""

    def exports(self, epoch: int, complete: bool, is_best: bool) -> list[str]:
        """Folders (names under the run folder) the task writes after this epoch's checkpoint: a model users load."""

    def export(self, run_dir: Path, name: str, model: Any, metrics: dict[str, Any]) -> None:
        """Collective: write export `name` from the wrapped model, with `metrics` (and their step) beside it."""

    def exported_step(self, run_dir: Path, name: str) -> int | None:
        """The step export `name` holds, or None when it is missing or unreadable."""


@dataclass(frozen=True)
class Task:
    name: str
    summary: str
    module: str  # the module whose build(task, ctx) makes this task's TaskRun
    default_lr: float
    # --batch-size when none is given: small data sets need small batches to take enough steps per epoch
    default_batch_size: int = 256
    image: bool = False  # 4-D image input: --channels-last applies
    checkpoint: str = "single"  # the checkpoint format (trainer/checkpoint/): "single" or "sharded"
    headline: str = "val_acc"  # the validation figure the [DONE] lines quote beside the loss
    add_arguments: Callable[[argparse.ArgumentParser, Callable[[str, Any], Any]], None] | None = None

    def build(self, ctx: Context) -> TaskRun:
        return importlib.import_module(self.module).build(self, ctx)


TASKS: dict[str, Task] = {t.name: t for t in (  # in the order `--help` shows them
    Task("synthetic", "seeded random classification problem (--samples, --features, --classes), MLP",
         "trainer.tasks.synthetic", default_lr=3e-3),
    # 1,438 training images: at 256 per rank two ranks take 3 steps an epoch and stay below 90 % after 3 epochs;
    # at 32 they take 23 and pass 95 % (docs/trainer.md quotes the run).
    Task("digits", "scikit-learn's bundled 8x8 handwritten digits (real data, no download), small CNN",
         "trainer.tasks.digits", default_lr=3e-3, default_batch_size=32, image=True),
    Task("mnist", "MNIST handwritten digits from IDX files under --data-root (no download), CNN",
         "trainer.tasks.mnist", default_lr=1e-3, image=True),
    Task("fashion-mnist", "Fashion-MNIST clothing images from IDX files under --data-root (no download), CNN",
         "trainer.tasks.mnist", default_lr=1e-3, image=True),
    Task("causal-lm", "fine-tune a Hugging Face causal LM from --model-local-dir on JSONL (perplexity, best/ via "
         "save_pretrained)", "trainer.tasks.causal_lm", default_lr=5e-5, default_batch_size=8, checkpoint="sharded",
         headline="val_ppl", add_arguments=causal_lm_flags.add_arguments),
)}


def get(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise TrainerError(f"unknown task {name!r}; known: {', '.join(sorted(TASKS))}") from None
