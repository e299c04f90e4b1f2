"""What the two checkpoint formats share (trainer/checkpoint/__init__.py says what they are): names, the `latest`
pointer, the search for the resume point and the identity check."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.checkpoint.files import atomic_write, check_writable, remove_temp
from trainer.checkpoint.state import TrainState
from trainer.errors import TrainerError

if TYPE_CHECKING:  # the formats import torch; what they share does not
    import torch
    from torch import nn

LATEST = "latest"
NAME_RE = re.compile(r"^(epoch-\d{4,}|step-\d{8,})$")
FIX = "use another --run-id or --out-dir, or remove that folder"


def epoch_name(epoch: int) -> str:
    return f"epoch-{epoch:04d}"


def step_name(step: int) -> str:
    return f"step-{step:08d}"


@dataclass
class Found:
    """A checkpoint to resume from: its name (epoch-0002, step-00000450), file or folder, and what it records of the
    run (`train`, trainer/checkpoint/state.py: progress, best, identity, seed, world, RNG, flags). `state` holds the
    model and optimiser state when the format reads them whole on rank 0 (single); a sharded checkpoint's every rank
    reads its own."""

    name: str
    path: Path
    train: TrainState
    state: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def check_identity(meta: dict[str, Any], identity: dict[str, Any], where: Path) -> None:
    """Refuse a checkpoint (a record with an `identity`) written for another task, model or data set, saying which
    differs."""
    check_identities(meta.get("identity") or {}, identity, where)


def check_identities(theirs: dict[str, Any], identity: dict[str, Any], where: Path) -> None:
    """`check_identity` of a checkpoint's identity itself."""
    if theirs.get("task") != identity["task"]:
        raise TrainerError(f"checkpoint {where} was written by task {theirs.get('task')!r} (model {theirs.get('model')}), "
                           f"this run is task {identity['task']!r} (model {identity['model']}): {FIX}")
    if (theirs.get("model"), theirs.get("params")) != (identity["model"], identity["params"]):
        raise TrainerError(f"checkpoint {where} holds model {theirs.get('model')} with parameter shapes "
                           f"{theirs.get('params')}, this run builds {identity['model']} with {identity['params']}: {FIX}")
    ours, old = identity["data"], theirs.get("data") or {}
    diffs = [f"{k} {old.get(k)!r} vs {ours.get(k)!r}" for k in sorted(set(ours) | set(old)) if old.get(k) != ours.get(k)]
    if diffs:
        raise TrainerError(f"checkpoint {where} was trained on other data ({', '.join(diffs)}): {FIX}")


class Store:
    """What both formats share: names, the `latest` pointer and the search for the resume point. A format says how
    a checkpoint is written (`save`), read and verified (`read`), loaded into the model and optimiser (`load`), where
    its candidates are (`names`) and what its best model records (`best_record`)."""

    format = ""
    key = "file"  # the [CKPT] line's field: file=epoch-0002.pt or dir=checkpoints/epoch-0002
    kept = ""  # what a resume keeps, for the [DDP] resume line

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir

    # ---- per format
    def save(self, name: str | None, model: nn.Module, wrapped: nn.Module, optimizer: torch.optim.Optimizer,
             train: TrainState, is_best: bool) -> int | None:
        """Collective: checkpoint `name` of the model, the optimiser and `train` (its `state_dict()`, the on-disk
        layout), and the best model when `is_best`. The bytes written."""
        raise NotImplementedError

    def load(self, found: Found, model: nn.Module, wrapped: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
        raise NotImplementedError

    def rng_state(self, device: torch.device) -> Any:
        raise NotImplementedError

    def set_rng(self, saved: list[Any], rank: int, same_world: bool, device: torch.device) -> None:
        raise NotImplementedError

    def best_record(self, identity: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
        raise NotImplementedError

    def display(self, name: str) -> str:
        raise NotImplementedError

    def path(self, name: str) -> Path:
        return self.run_dir / self.display(name)

    @property
    def best_path(self) -> Path:
        raise NotImplementedError

    def names(self) -> list[str]:
        raise NotImplementedError

    def read(self, name: str, pointer: dict[str, Any] | None = None) -> Found:
        """The checkpoint `name`, verified (against `pointer`'s record of it when given); TrainerError when unusable."""
        raise NotImplementedError

    @staticmethod
    def train_state(saved: dict[str, Any], where: Path) -> TrainState:
        """The trainer state of a checkpoint's record (this trainer's layout or an older one's); TrainerError when it
        has none."""
        try:
            return TrainState.from_state_dict(saved)
        except (KeyError, TypeError, ValueError) as e:
            raise TrainerError(f"checkpoint {where} records no trainer state of this trainer ({type(e).__name__}: "
                               f"{e})") from None

    def pointer_name(self, pointer: dict[str, Any]) -> str:
        raise NotImplementedError

    def temp_folders(self) -> list[Path]:
        return [self.run_dir]

    # ---- shared
    def prepare(self) -> list[str]:
        """Rank 0, before anything is written: the run folder is writable; leftovers of a killed write go."""
        check_writable(self.run_dir)
        removed = remove_temp(*[f for f in self.temp_folders() if f.is_dir()])
        if not removed:
            return []
        return [f"removed {len(removed)} leftover temporary file(s) of an interrupted write: " + ", ".join(removed[:5])]

    def write_latest(self, name: str, train: TrainState, **extra: Any) -> None:
        pointer = {**self.pointer_fields(name), "epoch": train.epoch, "step": train.step, **extra}
        atomic_write(self.run_dir / LATEST, (json.dumps(pointer, sort_keys=True) + "\n").encode())

    def pointer_fields(self, name: str) -> dict[str, Any]:
        raise NotImplementedError

    def find(self, rejected: set[str] | frozenset[str] = frozenset()) -> tuple[Found | None, list[str]]:
        """Rank 0: the checkpoint to resume from and the warnings on the way: the one `latest` names when it verifies,
        else the furthest one that does (an epoch checkpoint wins a tie with a step one: it also holds that epoch's
        validation). A checkpoint rejected once, here or in `rejected`, stays rejected."""
        warnings: list[str] = []
        rejected = set(rejected)
        pointer_path = self.run_dir / LATEST
        if pointer_path.exists():
            try:
                pointer = json.loads(pointer_path.read_text())
                name = self.pointer_name(pointer)
                if not NAME_RE.match(name):
                    raise TrainerError(f"`latest` names {name!r}, not a checkpoint")
                if name not in rejected:
                    return self.read(name, pointer), warnings
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                warnings.append(f"ignoring unreadable pointer {pointer_path}: {e}")
            except TrainerError as e:
                warnings.append(f"ignoring `latest`: {e}")
                rejected.add(name)
        # Rare path (no usable pointer): read every checkpoint, keep the furthest.
        best: Found | None = None
        for name in self.names():
            if name in rejected:
                continue
            try:
                found = self.read(name)
            except TrainerError as e:
                warnings.append(f"skipping {e}")
                continue
            rank = (found.train.step, name.startswith("epoch-"))
            if best is None or rank > (best.train.step, best.name.startswith("epoch-")):
                best = found
        return best, warnings
