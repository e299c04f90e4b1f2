"""The sharded checkpoint format: torch.distributed.checkpoint (DCP) folders that every rank writes and reads its own
part of (the causal-LM task, whose best model is a Hugging Face folder that the task exports beside them).

Layout of ``<out-dir>/<run-id>/``::

    checkpoints/epoch-0002/      DCP: every rank writes its own shards (.distcp) and reads them back itself;
    checkpoints/step-00000450/        `.metadata` says where each tensor lives, `trainer.json` the progress
    latest                       JSON pointer {"dir", "epoch", "step"} to the newest complete checkpoint

A checkpoint is written under a temporary name and renamed when every rank's shards and the metadata are on disk,
then `latest` moves to it; a reader never sees half a checkpoint. Before a run resumes from one, rank 0 checks that
every file `.metadata` places a tensor in is there and long enough (a truncated shard is rejected like a corrupt
single file, and the search goes on with the previous checkpoint); a checkpoint that passes and still fails to load is
rejected the same way on every rank. Under FSDP the shards are the ranks' own slices, and DCP re-slices them when the
run resumes with another world size. The model never travels through rank 0 for a checkpoint.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from trainer import distributed as D
from trainer import engine
from trainer.checkpoint import files
from trainer.checkpoint.state import TrainState
from trainer.checkpoint.store import NAME_RE, Found, Store, check_identity
from trainer.errors import TrainerError

FORMAT = "causal-lm/1"
CHECKPOINTS = "checkpoints"
META = "trainer.json"
DCP_METADATA = ".metadata"


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


def _identity(meta: dict[str, Any]) -> dict[str, Any]:
    """The identity in the shape both formats share; checkpoints written before the one checkpoint API recorded
    {model_type, params, tokenizer, seq_len, train, val}."""
    ident = meta.get("identity") or {}
    if "model_type" in ident:
        ident = {"task": "causal-lm", "model": ident.get("model_type"), "params": ident.get("params"),
                 "data": {k: ident.get(k) for k in ("tokenizer", "seq_len", "train", "val")}}
    return ident


def verify(folder: Path) -> None:
    """Every file the DCP metadata places a tensor in exists and reaches the end of its last tensor."""
    try:
        with (folder / DCP_METADATA).open("rb") as f:
            metadata = pickle.load(f)  # DCP's own format (FileSystemReader.read_metadata)
        storage = dict(metadata.storage_data)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError) as e:
        raise TrainerError(f"checkpoint {folder} has no readable {DCP_METADATA} ({_first_line(e)})") from None
    needed: dict[str, int] = {}
    for info in storage.values():
        needed[info.relative_path] = max(needed.get(info.relative_path, 0), int(info.offset) + int(info.length))
    for rel, end in sorted(needed.items()):
        path = folder / rel
        try:
            have = path.stat().st_size
        except OSError as e:
            raise TrainerError(f"checkpoint {folder}: shard {rel} cannot be read ({e.strerror or e})") from None
        if have < end:
            raise TrainerError(f"checkpoint {folder}: shard {rel} has {have} bytes, its tensors need {end} (truncated?)")


class Sharded(Store):
    format = "sharded"
    key = "dir"
    kept = "model, AdamW moments and step counts, data order"

    def display(self, name: str) -> str:
        return f"{CHECKPOINTS}/{name}"

    @property
    def best_path(self) -> Path:
        return self.run_dir / "best"

    def temp_folders(self) -> list[Path]:
        return [self.run_dir, self.run_dir / CHECKPOINTS]

    def names(self) -> list[str]:
        folder = self.run_dir / CHECKPOINTS
        return sorted(p.name for p in folder.iterdir() if p.is_dir() and NAME_RE.match(p.name)) if folder.is_dir() else []

    def pointer_name(self, pointer: dict[str, Any]) -> str:
        parent, _, name = pointer["dir"].rpartition("/")
        if parent != CHECKPOINTS:
            raise TrainerError(f"`latest` names {pointer['dir']!r}, not a folder under {CHECKPOINTS}/")
        return name

    def pointer_fields(self, name: str) -> dict[str, Any]:
        return {"dir": self.display(name)}

    def read(self, name: str, pointer: dict[str, Any] | None = None) -> Found:
        folder = self.path(name)
        try:
            meta = json.loads((folder / META).read_text())
        except (OSError, ValueError) as e:
            raise TrainerError(f"checkpoint {folder} has no readable {META} ({_first_line(e)})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise TrainerError(f"{folder} is not a causal-lm checkpoint of this trainer (format "
                               f"{meta.get('format') if isinstance(meta, dict) else None!r}, expected {FORMAT!r})")
        verify(folder)
        meta["identity"] = _identity(meta)
        return Found(name, folder, self.train_state(meta, folder))

    def save(self, name: str | None, model: nn.Module, wrapped: nn.Module, optimizer: torch.optim.Optimizer,
             train: TrainState, is_best: bool) -> int | None:
        """Collective: every rank writes its shards of model and optimiser; rank 0 then writes the metadata, renames
        the folder into place and moves `latest`. Older mid-epoch checkpoints are removed. The best model is the
        task's export, not a copy of this state. Returns the checkpoint's bytes."""
        if name is None:
            return None
        folder = self.run_dir / CHECKPOINTS
        tmp = folder / f"{files.TMP_PREFIX}{name}"
        meta = {**train.state_dict(), "format": FORMAT}

        def clear() -> None:
            if D.is_main():
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir(parents=True, exist_ok=True)

        D.agree(clear)
        model_sd, optim_sd = get_state_dict(wrapped, optimizer)
        try:
            dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=tmp)
        except OSError as e:
            raise TrainerError(f"cannot write checkpoint {tmp}: {e.strerror or e}") from None
        written: list[int] = []

        def publish() -> None:
            if not D.is_main():
                return
            target = folder / name
            try:
                files.atomic_write(tmp / META, (json.dumps(meta, sort_keys=True) + "\n").encode())
                if target.exists():
                    shutil.rmtree(target)
                os.replace(tmp, target)
                files.fsync_dir(folder)
                self.write_latest(name, train)
                written.append(files.size(target))
            except OSError as e:
                raise TrainerError(f"cannot write checkpoint {target}: {e.strerror or e}") from None
            for p in folder.glob("step-*"):
                if p.name != name and NAME_RE.match(p.name) and int(p.name.split("-")[1]) < train.step:
                    shutil.rmtree(p, ignore_errors=True)

        D.agree(publish)
        return written[0] if written else None

    def load(self, found: Found, model: nn.Module, wrapped: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
        """Collective: every rank reads the slices it holds now (DCP re-slices for another world size); the optimiser
        keeps this run's hyperparameters (returns what changed). A failure is a TrainerError on every rank: DCP
        gathers every rank's outcome of the read."""

        def read() -> None:
            model_sd, optim_sd = get_state_dict(wrapped, optimizer)
            state: dict[str, Any] = {"model": model_sd, "optim": optim_sd}
            try:
                dcp.load(state, checkpoint_id=found.path)
            except (Exception, CheckpointException) as e:  # every rank's outcome (a BaseException), a damaged tensor
                failures = getattr(e, "failures", None)  # CheckpointException: {rank: (exception, traceback)}
                if isinstance(failures, dict) and failures:
                    rank, (cause, _) = min(failures.items(), key=lambda kv: kv[0])
                    why = f"rank {rank}: {type(cause).__name__}: {_first_line(cause).split('. ')[0]}"
                else:
                    why = f"{type(e).__name__}: {_first_line(e).split('. ')[0]}"
                raise TrainerError(f"checkpoint {found.path} cannot be loaded ({why})") from None
            set_state_dict(wrapped, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])

        return engine.keep_hyperparameters(optimizer, read)

    def rng_state(self, device: torch.device) -> Any:
        # one seed per rank, drawn from its generator (JSON in trainer.json; a resume reseeds with it)
        return int(torch.randint(0, 2**31 - 1, (1,)).item())

    def set_rng(self, saved: list[Any], rank: int, same_world: bool, device: torch.device) -> None:
        if same_world and rank < len(saved):
            torch.manual_seed(int(saved[rank]))

    def best_record(self, identity: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
        """What best/metrics.json records (val_loss, epoch, step, ...), so that a restart keeps a better best/ until a
        better model comes; (None, warnings) when there is none or it cannot be read."""
        path = self.best_path / "metrics.json"
        if not self.best_path.exists():
            return None, []
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            return None, [f"{path} cannot be read ({_first_line(e)}): the next best model of this run replaces it"]
        if not isinstance(record, dict) or not isinstance(record.get("val_loss"), (int, float)):
            return None, [f"{path} records no validation loss: the next best model of this run replaces it"]
        if record.get("identity") is not None and record["identity"] != identity:
            check_identity(record, identity, self.best_path)
        return {k: record[k] for k in ("val_loss", "val_ppl", "val_acc", "epoch", "step") if k in record}, []
