"""One checkpoint API for a run folder ``<out-dir>/<run-id>/``, over two storage formats:

- `single` (trainer/checkpoint/single.py): the whole training state in one file that rank 0 writes and reads,
  ``epoch-0003.pt``, ``step-00000450.pt``, with ``best.pt`` a copy of the best one (the classification tasks);
- `sharded` (trainer/checkpoint/sharded.py): torch.distributed.checkpoint folders that every rank writes and reads
  its own part of, ``checkpoints/epoch-0003/`` (the causal-LM task, whose best model is a Hugging Face folder).

Both keep the same things in the same places: a checkpoint per epoch (kept) and mid-epoch ones (removed once a newer
one exists), a ``latest`` pointer moved only when a checkpoint is complete, the progress and identity of the run in
every checkpoint (`TrainState`, trainer/checkpoint/state.py: the store writes its `state_dict()` and reads it back
with `load_state_dict`), and the same answers to the trainer's three questions: save this state, where does this run
resume (`Store.find`: `latest` when it verifies, else the furthest checkpoint that does, never one that was rejected),
and was this checkpoint written by this run's task, model and data (`check_identity`).
"""

from __future__ import annotations

from pathlib import Path

from trainer.checkpoint.files import atomic_write, check_writable  # noqa: F401  (the API: files written whole)
from trainer.checkpoint.state import TrainState  # noqa: F401  (what a checkpoint records of the run)
from trainer.checkpoint.store import (LATEST, NAME_RE, Found, Store, check_identities, check_identity,  # noqa: F401
                                      epoch_name, step_name)


def open_store(kind: str, run_dir: Path) -> Store:
    """The store of a task's checkpoint format: "single" or "sharded"."""
    if kind == "single":
        from trainer.checkpoint.single import SingleFile

        return SingleFile(run_dir)
    if kind == "sharded":
        from trainer.checkpoint.sharded import Sharded

        return Sharded(run_dir)
    raise ValueError(f"unknown checkpoint format {kind!r}")
