"""The single-file checkpoint format: the whole training state in one file that rank 0 writes and reads.

Layout of ``<out-dir>/<run-id>/``::

    epoch-0003.pt      state after 3 complete epochs (kept)
    step-00000450.pt   mid-epoch state (--checkpoint-steps, --max-steps or a stop); removed once a newer one exists
    latest             JSON pointer {"file", "epoch", "step", "sha256", "bytes"} to the newest checkpoint
    best.pt            copy of the checkpoint with the lowest validation loss so far (written before `latest`)

Files are written whole (trainer/checkpoint/files.py); a reader checks size and sha256 against `latest`, so a
half-written or corrupted file is never loaded. The state reaches the other ranks by broadcast, so the run folder only
has to be on rank 0's node.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from trainer import distributed as D
from trainer import engine
from trainer.checkpoint import files
from trainer.checkpoint.state import TrainState
from trainer.checkpoint.store import LATEST, NAME_RE, Found, Store, check_identity
from trainer.errors import TrainerError

FORMAT = 1
BEST = "best.pt"
SUFFIX = ".pt"


def serialize(state: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def write(folder: Path, state: dict[str, Any], name: str | None, is_best: bool) -> int:
    """Write checkpoint `name` (a file name, e.g. epoch-0002.pt) and repoint `latest` to it; copy the state to
    best.pt when it is the best so far. With `name` None (an epoch between --checkpoint-every saves) only best.pt is
    written. Returns the bytes of one copy."""
    data = serialize(state)
    # best.pt before `latest`: a crash between two writes may leave best.pt ahead of `latest` (the resumed run
    # redoes those steps and writes it again) but never behind the best metrics `latest`'s checkpoint records.
    if name is not None:
        files.atomic_write(folder / name, data)
    if is_best:
        files.atomic_write(folder / BEST, data)
    if name is not None:
        pointer = {"file": name, "epoch": state["epoch"], "step": state["step"], "sha256": files.sha256(data),
                   "bytes": len(data)}
        files.atomic_write(folder / LATEST, (json.dumps(pointer, sort_keys=True) + "\n").encode())
        # Mid-epoch checkpoints only bridge the gap to the next one: drop the older ones.
        for p in folder.glob("step-*.pt"):
            if p.name != name and NAME_RE.match(p.stem) and int(p.stem.split("-")[1]) < state["step"]:
                p.unlink(missing_ok=True)
    return len(data)


def _load_bytes(data: bytes, where: Path) -> dict[str, Any]:
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, wrong pickle, ...: the message is all the user can act on
        first = str(e).splitlines()[0].split(". ")[0][:160] if str(e) else type(e).__name__
        raise TrainerError(f"checkpoint {where} is unreadable: {first}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise TrainerError(f"{where} is not a checkpoint of this trainer (format {FORMAT})")
    return state


def read_verified(path: Path, expect_sha: str | None = None, expect_bytes: int | None = None) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TrainerError(f"checkpoint {path} cannot be read: {e.strerror or e}") from None
    if expect_bytes is not None and len(data) != expect_bytes:
        raise TrainerError(f"checkpoint {path} has {len(data)} bytes, `latest` recorded {expect_bytes} (truncated?)")
    if expect_sha is not None and files.sha256(data) != expect_sha:
        raise TrainerError(f"checkpoint {path} does not match the sha256 recorded in `latest`")
    return _load_bytes(data, path)


def rng_state(device: torch.device) -> dict[str, Any]:
    np_state = np.random.get_state()
    assert isinstance(np_state, tuple)  # the legacy form (MT19937, the global RandomState's generator)
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


class SingleFile(Store):
    format = "single"
    key = "file"
    kept = "model, AdamW moments and step counts, RNG, data order"

    def display(self, name: str) -> str:
        return name + SUFFIX

    @property
    def best_path(self) -> Path:
        return self.run_dir / BEST

    def names(self) -> list[str]:
        if not self.run_dir.is_dir():
            return []
        return sorted(p.stem for p in self.run_dir.iterdir() if p.suffix == SUFFIX and NAME_RE.match(p.stem))

    def pointer_name(self, pointer: dict[str, Any]) -> str:
        file = pointer["file"]
        if not file.endswith(SUFFIX):
            raise TrainerError(f"`latest` names {file!r}, not a checkpoint file")
        return file[: -len(SUFFIX)]

    def pointer_fields(self, name: str) -> dict[str, Any]:
        return {"file": self.display(name)}

    def read(self, name: str, pointer: dict[str, Any] | None = None) -> Found:
        path = self.path(name)
        pointer = pointer or {}
        state = read_verified(path, pointer.get("sha256"), pointer.get("bytes"))
        meta = {k: v for k, v in state.items() if k not in ("model", "optimizer")}
        return Found(name, path, self.train_state(meta, path),
                     {"model": state["model"], "optimizer": state["optimizer"]})

    def save(self, name: str | None, model: nn.Module, wrapped: nn.Module, optimizer: torch.optim.Optimizer,
             train: TrainState, is_best: bool) -> int | None:
        """Collective (rank 0 writes, every rank learns whether it worked): checkpoint `name` and `latest`, best.pt
        when `is_best`. The bytes of the file."""
        if name is None and not is_best:
            return None
        state = {**train.state_dict(), "format": FORMAT, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
        written: list[int] = []

        def run() -> None:
            if D.is_main():
                try:
                    written.append(write(self.run_dir, state, self.display(name) if name else None, is_best))
                except OSError as e:
                    raise TrainerError(f"cannot write checkpoint in {self.run_dir}: {e.strerror or e}") from None

        D.agree(run)
        return written[0] if written else None

    def load(self, found: Found, model: nn.Module, wrapped: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
        """Every rank, from the state rank 0 read and broadcast: the model's weights and the optimiser's moments,
        this run's hyperparameters (returns what changed, e.g. ["lr 0.003->1e-05"])."""
        assert found.state is not None
        model.load_state_dict(found.state["model"])
        return engine.load_optimizer_state(optimizer, found.state["optimizer"])

    def rng_state(self, device: torch.device) -> Any:
        return rng_state(device)

    def set_rng(self, saved: list[Any], rank: int, same_world: bool, device: torch.device) -> None:
        if rank < len(saved):
            set_rng_state(saved[rank], device)

    def best_record(self, identity: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
        """What best.pt records of itself (its `best`: val_loss, val_acc, epoch, step), so that a restart keeps it
        until a better model comes; (None, warnings) when there is none or it cannot be read."""
        path = self.best_path
        if not path.exists():
            return None, []
        try:
            state = read_verified(path)
        except TrainerError as e:
            return None, [f"{e}: the next best model of this run replaces it"]
        check_identity(state, identity, path)
        record = state.get("best") or {}
        if not isinstance(record.get("val_loss"), (int, float)):
            return None, [f"{path} records no validation loss: the next best model of this run replaces it"]
        return dict(record), []
