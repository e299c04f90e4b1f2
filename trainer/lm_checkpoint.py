"""Checkpoints of the causal-LM task: sharded training state with torch.distributed.checkpoint (DCP), and
Hugging Face folders (`save_pretrained`) for the per-epoch models and `best`.

Layout of ``<out-dir>/<run-id>/``::

    checkpoints/epoch-0002/      DCP: every rank writes its own shards (.distcp) and reads them back itself;
    checkpoints/step-00000450/        `.metadata` says where each tensor lives, `trainer.json` the progress
    latest                       JSON pointer {"dir", "epoch", "step"} to the newest complete checkpoint
    epoch-0002/                  save_pretrained: model, tokenizer, config after epoch 2 (+ metrics.json)
    best/                        the same for the epoch with the lowest validation loss so far
    tokens/                      the token cache (trainer/lm_data.py)

A checkpoint is written under a temporary name and renamed when every rank's shards and the metadata are
on disk, then `latest` moves to it; a reader never sees half a checkpoint. Under FSDP the shards are the
ranks' own slices, and DCP re-slices them when the run resumes with another world size. The model never
travels through rank 0 for a checkpoint; only `best/` and `epoch-*/` gather it there, once per epoch,
because a Hugging Face folder is one file set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict, get_state_dict,
                                                     set_state_dict)

from trainer import checkpoint as ckpt
from trainer import distributed as D
from trainer.errors import TrainerError

FORMAT = "causal-lm/1"
CHECKPOINTS = "checkpoints"
LATEST = "latest"
BEST = "best"
META = "trainer.json"
TMP = ".tmp-"
_NAME_RE = re.compile(r"^(epoch-\d{4,}|step-\d{8,})$")


def _is_main() -> bool:
    return not D.active() or torch.distributed.get_rank() == 0


def epoch_name(epoch: int) -> str:
    return f"epoch-{epoch:04d}"


def step_name(step: int) -> str:
    return f"step-{step:08d}"


def save(run_dir: Path, name: str, model: nn.Module, optimizer: torch.optim.Optimizer, meta: dict[str, Any]) -> None:
    """Collective: every rank writes its shards of model and optimiser; rank 0 then writes the metadata,
    renames the folder into place and moves `latest`. Older mid-epoch checkpoints are removed."""
    folder = run_dir / CHECKPOINTS
    tmp = folder / f"{TMP}{name}"

    def clear() -> None:
        if _is_main():
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True, exist_ok=True)

    D.agree(clear)
    model_sd, optim_sd = get_state_dict(model, optimizer)
    try:
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=tmp)
    except OSError as e:
        raise TrainerError(f"cannot write checkpoint {tmp}: {e.strerror or e}") from None

    def publish() -> None:
        if not _is_main():
            return
        try:
            ckpt.atomic_write(tmp / META, (json.dumps(meta, sort_keys=True) + "\n").encode())
            target = folder / name
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
            ckpt.atomic_write(run_dir / LATEST, (json.dumps({"dir": f"{CHECKPOINTS}/{name}", "epoch": meta["epoch"],
                                                             "step": meta["step"]}) + "\n").encode())
        except OSError as e:
            raise TrainerError(f"cannot write checkpoint {folder / name}: {e.strerror or e}") from None
        for p in folder.glob("step-*"):
            if p.name != name and _NAME_RE.match(p.name) and int(p.name.split("-")[1]) < meta["step"]:
                shutil.rmtree(p, ignore_errors=True)

    D.agree(publish)


def remove_temp(run_dir: Path) -> list[str]:
    """Leftovers of writes a killed process never renamed (rank 0, before any rank writes)."""
    removed = []
    for p in [*run_dir.glob(f"{TMP}*"), *(run_dir / CHECKPOINTS).glob(f"{TMP}*")]:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
    return removed


def find_resume(run_dir: Path) -> tuple[Path | None, dict[str, Any] | None]:
    """The checkpoint `latest` names and its trainer.json; (None, None) for a new run. Each rank reads it."""
    pointer = run_dir / LATEST
    if not pointer.exists():
        return None, None
    try:
        target = run_dir / json.loads(pointer.read_text())["dir"]
        meta = json.loads((target / META).read_text())
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TrainerError(f"{pointer} does not lead to a readable checkpoint ({e}): remove the run folder "
                           f"or use another --run-id") from None
    if meta.get("format") != FORMAT:
        raise TrainerError(f"{target} is not a causal-lm checkpoint of this trainer (format {meta.get('format')!r}, "
                           f"expected {FORMAT!r}): use another --run-id or --out-dir")
    return target, meta


def check_identity(meta: dict[str, Any], identity: dict[str, Any], where: Path) -> None:
    """A checkpoint of another model or data set cannot resume this run; say which part differs."""
    theirs = meta.get("identity") or {}
    diffs = [f"{k} {theirs.get(k)!r} vs {identity.get(k)!r}" for k in sorted(set(identity) | set(theirs))
             if theirs.get(k) != identity.get(k)]
    if diffs:
        raise TrainerError(f"checkpoint {where} was written for another model or data ({'; '.join(diffs)}): "
                           f"use another --run-id or --out-dir, or remove that folder")


def load(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Collective: every rank reads the slices it holds now (DCP re-slices for another world size)."""
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def export_pretrained(run_dir: Path, name: str, model: nn.Module, base: nn.Module, tokenizer,
                      metrics: dict[str, Any]) -> None:
    """Collective: gather the full weights on rank 0 (CPU), which writes <run>/<name>/ with save_pretrained
    (model, config, tokenizer) and metrics.json, swapped in whole."""
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def write() -> None:
        if not _is_main():
            return
        target, tmp, old = run_dir / name, run_dir / f"{TMP}{name}", run_dir / f"{TMP}old-{name}"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            base.save_pretrained(tmp, state_dict=full)
            tokenizer.save_pretrained(tmp)
            # transformers writes the weights through a 0600 temporary file: give them the usual mode, so that
            # an inference server running as another user of the pod's group can read best/
            for f in tmp.iterdir():
                f.chmod(0o666 & ~ckpt._UMASK)
            ckpt.atomic_write(tmp / "metrics.json", (json.dumps(metrics, sort_keys=True) + "\n").encode())
            shutil.rmtree(old, ignore_errors=True)
            if target.exists():
                os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        except OSError as e:
            raise TrainerError(f"cannot write {target}: {e.strerror or e}") from None

    D.agree(write)
