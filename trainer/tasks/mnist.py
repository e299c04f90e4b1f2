"""`mnist` and `fashion-mnist`: the standard IDX files from a local folder (the /data volume), a small CNN.

Nothing is downloaded at run time. The four files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each optionally .gz) are looked up in
``<data-root>/<task>``, ``<data-root>/<task>/raw``, torchvision's ``<data-root>/<MNIST|FashionMNIST>/raw``
and ``<data-root>`` itself. The t10k files are the validation set.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from trainer.config import RunConfig
from trainer.errors import TrainerError
from trainer.idx import IdxError, read_idx
from trainer.tasks import Context, Task, classify
from trainer.tasks.classify import Data
from trainer.tasks.models import MnistCNN

FILES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "val_x": "t10k-images-idx3-ubyte",
    "val_y": "t10k-labels-idx1-ubyte",
}
SIDE = 28
CLASSES = 10
TORCHVISION_DIRS = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}


def _existing(folder: Path, base: str) -> Path | None:
    for name in (base, base + ".gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def find_files(root: Path, task: str) -> dict[str, Path]:
    """The folder holding all four IDX files, or a TrainerError saying what is missing where."""
    if not root.exists():
        raise TrainerError(f"data root {root} does not exist: mount the data volume there or pass --data-root")
    if not root.is_dir():
        raise TrainerError(f"data root {root} is not a folder")
    folders = [root / task, root / task / "raw", root / TORCHVISION_DIRS[task] / "raw", root]
    for folder in folders:
        found = {key: _existing(folder, base) for key, base in FILES.items()}
        if all(found.values()):
            return found  # type: ignore[return-value]
        if any(found.values()):
            missing = ", ".join(FILES[k] + "[.gz]" for k, v in found.items() if v is None)
            raise TrainerError(f"{task}: {folder} lacks {missing}")
    raise TrainerError(
        f"{task}: no IDX files under {root}: looked for {FILES['train_x']}[.gz] in "
        + ", ".join(str(f) for f in folders)
    )


def _images_labels(images: Path, labels: Path) -> tuple[np.ndarray, np.ndarray]:
    x = read_idx(images, dtype=np.uint8, ndim=3)
    y = read_idx(labels, dtype=np.uint8, ndim=1)
    if x.shape[1:] != (SIDE, SIDE):
        raise IdxError(f"{images}: images are {x.shape[1]}x{x.shape[2]}, expected {SIDE}x{SIDE}")
    if len(x) != len(y):
        raise IdxError(f"{images} holds {len(x)} images but {labels} holds {len(y)} labels")
    if len(y) == 0:
        raise IdxError(f"{images}: no images")
    if int(y.max()) >= CLASSES:
        raise IdxError(f"{labels}: label {int(y.max())} outside 0..{CLASSES - 1}")
    return x, y


def from_arrays(train_x: np.ndarray, train_y: np.ndarray, val_x: np.ndarray, val_y: np.ndarray,
                description: str, identity: dict) -> Data:
    """uint8 N x 28 x 28 images -> float N x 1 x 28 x 28, standardised with the training set's statistics."""
    tx = torch.from_numpy(np.ascontiguousarray(train_x)).float().div_(255.0)
    vx = torch.from_numpy(np.ascontiguousarray(val_x)).float().div_(255.0)
    mean, std = tx.mean(), tx.std().clamp_min(1e-6)
    return Data(
        train_x=tx.sub_(mean).div_(std).unsqueeze(1), train_y=torch.from_numpy(train_y.astype(np.int64)),
        val_x=vx.sub_(mean).div_(std).unsqueeze(1), val_y=torch.from_numpy(val_y.astype(np.int64)),
        num_classes=CLASSES, description=description, identity=identity,
    )


def loader(task: str):
    def load(args: RunConfig) -> Data:
        files = find_files(Path(args.data_root), task)
        train_x, train_y = _images_labels(files["train_x"], files["train_y"])
        val_x, val_y = _images_labels(files["val_x"], files["val_y"])
        folder = files["train_x"].parent
        return from_arrays(
            train_x, train_y, val_x, val_y,
            description=f"{task} IDX files in {folder} ({len(train_y)} train + {len(val_y)} val images)",
            identity={"train": len(train_y), "val": len(val_y), "shape": [SIDE, SIDE]},
        )

    return load


def build(task: Task, ctx: Context) -> classify.ClassifyRun:
    """`mnist` and `fashion-mnist`: the same reader and model, each task's own folder."""
    return classify.build(task, ctx, loader(task.name), lambda data: MnistCNN(data.num_classes))
