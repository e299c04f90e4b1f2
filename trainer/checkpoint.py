"""Checkpoints of a run folder ``<out-dir>/<run-id>/``: atomic writes, the `latest` pointer, `best.pt`, resume.

Layout::

    epoch-0003.pt      state after 3 complete epochs (kept)
    step-00000450.pt   mid-epoch state (--checkpoint-steps or SIGTERM); removed once a newer checkpoint exists
    latest             JSON pointer {"file", "epoch", "step", "sha256", "bytes"} to the newest checkpoint
    best.pt            copy of the checkpoint with the lowest validation loss so far (written before `latest`)
    metrics.jsonl      one JSON object per event (written by rank 0)

Every file is written to a temporary name in the same folder, fsynced, then renamed over the target with
os.replace, and the folder is fsynced; readers ignore temporary names and verify size and sha256, so a
half-written file is never loaded.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from trainer.errors import TrainerError

FORMAT = 1
LATEST = "latest"
BEST = "best.pt"
TMP_PREFIX = ".tmp-"
_CKPT_RE = re.compile(r"^(epoch-\d{4,}|step-\d{8,})\.pt$")
_UMASK = os.umask(0)
os.umask(_UMASK)


def epoch_name(epoch: int) -> str:
    return f"epoch-{epoch:04d}.pt"


def step_name(step: int) -> str:
    return f"step-{step:08d}.pt"


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see either the old file or the complete new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{TMP_PREFIX}{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; other readers (a sync sidecar) need the usual mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def check_writable(folder: Path) -> None:
    """Create the run folder and prove that a file can be written, synced and removed there."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test.{os.getpid()}"  # one per process: ranks sharing a folder must not race
        atomic_write(probe, b"ok\n")
        probe.unlink()
    except OSError as e:
        raise TrainerError(f"output folder {folder} is not writable: {e.strerror or e}") from None


def remove_temp_files(folder: Path) -> list[str]:
    """Delete leftovers of writes that were interrupted (a killed process never renamed them)."""
    removed = []
    for p in folder.glob(f"{TMP_PREFIX}*"):
        p.unlink(missing_ok=True)
        removed.append(p.name)
    return removed


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def serialize(state: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def save(folder: Path, state: dict[str, Any], name: str | None, is_best: bool) -> None:
    """Write checkpoint `name` and repoint `latest` to it; copy the state to best.pt when it is the best so far.

    With `name` None (an epoch between --checkpoint-every saves) only best.pt is written.
    """
    data = serialize(state)
    # best.pt before `latest`: a crash between two writes may leave best.pt ahead of `latest` (the resumed run
    # redoes those steps and writes it again) but never behind the best metrics `latest`'s checkpoint records.
    if name is not None:
        atomic_write(folder / name, data)
    if is_best:
        atomic_write(folder / BEST, data)
    if name is not None:
        pointer = {"file": name, "epoch": state["epoch"], "step": state["step"], "sha256": sha256(data),
                   "bytes": len(data)}
        atomic_write(folder / LATEST, (json.dumps(pointer, sort_keys=True) + "\n").encode())
        # Mid-epoch checkpoints only bridge the gap to the next one: drop the older ones.
        for p in folder.glob("step-*.pt"):
            if p.name != name and _CKPT_RE.match(p.name) and int(p.stem.split("-")[1]) < state["step"]:
                p.unlink(missing_ok=True)


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
    if expect_sha is not None and sha256(data) != expect_sha:
        raise TrainerError(f"checkpoint {path} does not match the sha256 recorded in `latest`")
    return _load_bytes(data, path)


def _candidates(folder: Path) -> list[Path]:
    """Files whose names are checkpoint names (temporary files never are)."""
    return sorted(p for p in folder.iterdir() if _CKPT_RE.match(p.name)) if folder.is_dir() else []


def find_resume(folder: Path) -> tuple[Path | None, dict[str, Any] | None, list[str]]:
    """The checkpoint to resume from: `latest` if it verifies, else the newest readable one.

    Returns (path, state, warnings). Temporary files never match the checkpoint name pattern, and a
    truncated or corrupt file is skipped with a warning.
    """
    warnings: list[str] = []
    pointer_path = folder / LATEST
    if pointer_path.exists():
        try:
            pointer = json.loads(pointer_path.read_text())
            target = folder / pointer["file"]
            if not _CKPT_RE.match(pointer["file"]):
                raise TrainerError(f"`latest` names {pointer['file']!r}, not a checkpoint file")
            return target, read_verified(target, pointer.get("sha256"), pointer.get("bytes")), warnings
        except (ValueError, KeyError, TypeError) as e:
            warnings.append(f"ignoring unreadable pointer {pointer_path}: {e}")
        except TrainerError as e:
            warnings.append(f"ignoring `latest`: {e}")
    # Rare path (no usable pointer): read every checkpoint, keep the furthest; an epoch file wins a tie
    # with a step file because it also holds that epoch's validation.
    best: tuple[Path, dict[str, Any]] | None = None
    for p in _candidates(folder):
        try:
            state = read_verified(p)
        except TrainerError as e:
            warnings.append(f"skipping {e}")
            continue
        rank = (state["step"], p.name.startswith("epoch-"))
        if best is None or rank > (best[1]["step"], best[0].name.startswith("epoch-")):
            best = (p, state)
    if best is None:
        return None, None, warnings
    return best[0], best[1], warnings


def read_best_record(folder: Path, identity: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """What best.pt records of itself (its `best`: val_loss, val_acc, epoch, step), so that a restart keeps it
    until a better model comes; (None, warnings) when there is none or it cannot be read."""
    path = folder / BEST
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


def check_identity(state: dict[str, Any], identity: dict[str, Any], where: Path) -> None:
    """Refuse a checkpoint written for another task, model or data set, saying which differs."""
    theirs = state.get("identity") or {}
    fix = "use another --run-id or --out-dir, or remove that folder"
    if theirs.get("task") != identity["task"]:
        raise TrainerError(f"checkpoint {where} was written by task {theirs.get('task')!r} (model {theirs.get('model')}), "
                           f"this run is task {identity['task']!r} (model {identity['model']}): {fix}")
    if (theirs.get("model"), theirs.get("params")) != (identity["model"], identity["params"]):
        raise TrainerError(f"checkpoint {where} holds model {theirs.get('model')} with parameter shapes "
                           f"{theirs.get('params')}, this run builds {identity['model']} with {identity['params']}: {fix}")
    ours, old = identity["data"], theirs.get("data") or {}
    diffs = [f"{k} {old.get(k)!r} vs {ours.get(k)!r}" for k in sorted(set(ours) | set(old)) if old.get(k) != ours.get(k)]
    if diffs:
        raise TrainerError(f"checkpoint {where} was trained on other data ({', '.join(diffs)}): {fix}")
