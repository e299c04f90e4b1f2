"""`synthetic`: a seeded classification problem generated in memory, identical on every rank.

Inputs are standard normal vectors; a label is the argmax of a fixed random linear map of its input, so
the MLP learns the task quickly and generalises (about 90 % validation accuracy after a few epochs). Validation
samples are a quarter as many, drawn after the training samples from the same generator.
"""

from __future__ import annotations

import torch

from trainer.config import RunConfig
from trainer.errors import TrainerError
from trainer.tasks import Context, Task, classify
from trainer.tasks.classify import Data
from trainer.tasks.models import MLP

GENERATOR_VERSION = 1  # bump when the generated data changes, so old checkpoints are refused


def make(samples: int, features: int, classes: int, seed: int) -> Data:
    if samples < 2 or features < 1 or classes < 2:
        raise TrainerError(f"synthetic task needs --samples >= 2, --features >= 1, --classes >= 2 "
                           f"(got {samples}, {features}, {classes})")
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(features, classes, generator=g)
    n_val = max(1, samples // 4)
    x = torch.randn(samples + n_val, features, generator=g)
    y = torch.argmax(x @ teacher, dim=1)
    return Data(
        train_x=x[:samples], train_y=y[:samples], val_x=x[samples:], val_y=y[samples:], num_classes=classes,
        description=f"synthetic ({samples} train + {n_val} val samples, {features} features, {classes} classes, "
                    f"seed {seed})",
        identity={"samples": samples, "features": features, "classes": classes, "seed": seed,
                  "generator": GENERATOR_VERSION},
    )


def load(args: RunConfig) -> Data:
    return make(args.samples, args.features, args.classes, args.seed)


def build(task: Task, ctx: Context) -> classify.ClassifyRun:
    return classify.build(task, ctx, load, lambda data: MLP(data.train_x.shape[1], data.num_classes))
