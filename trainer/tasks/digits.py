"""`digits`: scikit-learn's 8x8 handwritten digits (1,797 real images bundled with the package), a small CNN.

No download and no data volume: `sklearn.datasets.load_digits` reads the copy inside scikit-learn. A fixed
20 % of the images (seed 0, independent of --seed) is held out for validation.
"""

from __future__ import annotations

import numpy as np
import torch

from trainer.config import RunConfig
from trainer.errors import TrainerError
from trainer.tasks import Context, Task, classify
from trainer.tasks.classify import Data
from trainer.tasks.models import DigitsCNN

HOLDOUT = 0.2
SPLIT_SEED = 0


def load(args: RunConfig) -> Data:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise TrainerError("task digits needs scikit-learn (pip install -r trainer/requirements.txt)") from None
    bunch = load_digits()
    images = bunch.images.astype(np.float32) / 16.0  # pixel values are 0..16
    labels = bunch.target.astype(np.int64)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n_val = int(round(HOLDOUT * len(labels)))
    val, train = order[:n_val], order[n_val:]
    mean, std = images[train].mean(), images[train].std()
    x = torch.from_numpy((images - mean) / std).unsqueeze(1)  # N x 1 x 8 x 8
    y = torch.from_numpy(labels)
    return Data(
        train_x=x[train], train_y=y[train], val_x=x[val], val_y=y[val], num_classes=10,
        description=f"sklearn digits ({len(train)} train + {n_val} held-out 8x8 images)",
        identity={"source": "sklearn.datasets.load_digits", "train": len(train), "val": n_val,
                  "split_seed": SPLIT_SEED},
    )


def build(task: Task, ctx: Context) -> classify.ClassifyRun:
    return classify.build(task, ctx, load, lambda data: DigitsCNN(data.num_classes))
