"""What a checkpoint records of the run beside the model and optimiser: the trainer's state.

`TrainState` is the one typed form of it; `state_dict()` is what the stores write (the single format's dict beside
``model`` and ``optimizer``, the sharded format's ``trainer.json``) and `load_state_dict` reads it back, as
torchtitan's TrainState is a Stateful its CheckpointManager saves and loads. The on-disk keys are the ones checkpoints
have always had, so every checkpoint on disk resumes; what older trainers did not write reads as they meant it:

- no ``data_seed`` (before the data order belonged to the run): the seed of the run's flags, ``config["seed"]``;
- no ``grad_accum`` (before gradient accumulation): 1;
- no ``epoch_partial`` (before mid-epoch figures were kept): None, the resumed epoch reports no training figures;
- no ``exports``, ``metrics``, ``best``, ``rng``, ``config``, ``world_size``, ``batch_size``: empty or None.

Torch-free: the RNG states are whatever the format keeps (single: a dict of tensors per rank; sharded: a seed per
rank), carried as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The keys a checkpoint's trainer state has on disk (beside a format's own: "format", "model", "optimizer").
KEYS = ("epoch", "epoch_step", "step", "world_size", "batch_size", "grad_accum", "rng", "data_seed", "epoch_partial",
        "identity", "config", "best", "metrics", "exports")


@dataclass
class TrainState:
    """The run's position and what it needs to resume exactly there."""

    epoch: int = 0  # completed epochs = index of the epoch in progress
    epoch_step: int = 0  # steps already done in that epoch (the sampler's position in the epoch's shard)
    step: int = 0  # optimiser steps in total
    world_size: int | None = None  # ranks of the run that saved: the shards' and the RNG states' layout
    batch_size: int | None = None  # --batch-size of that run (per rank)
    grad_accum: int = 1  # micro-batches per optimiser step of that run
    rng: list[Any] = field(default_factory=list)  # every rank's RNG state, by rank (the store's own form)
    data_seed: int | None = None  # the seed the run shuffles its data with (the data order belongs to the run)
    epoch_partial: dict[str, Any] | None = None  # mid-epoch: the epoch's training figures so far, over all ranks
    identity: dict[str, Any] = field(default_factory=dict)  # task, model, params, data (trainer/checkpoint/store.py)
    config: dict[str, Any] = field(default_factory=dict)  # the flags of the run that saved (RunConfig.scalars())
    best: dict[str, Any] = field(default_factory=dict)  # val_loss, val_acc, epoch, step of the best model so far
    metrics: dict[str, Any] = field(default_factory=dict)  # the saved epoch's figures, or {"reason": ...} mid-epoch
    exports: list[str] = field(default_factory=list)  # the task's exports of this checkpoint (written after it)

    def state_dict(self) -> dict[str, Any]:
        """The on-disk layout (KEYS): what the stores write."""
        return {"epoch": self.epoch, "epoch_step": self.epoch_step, "step": self.step, "world_size": self.world_size,
                "batch_size": self.batch_size, "grad_accum": self.grad_accum, "rng": self.rng,
                "data_seed": self.data_seed, "epoch_partial": self.epoch_partial, "identity": self.identity,
                "config": self.config, "best": self.best, "metrics": self.metrics, "exports": self.exports}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Take the state a checkpoint recorded, this trainer's layout or an older one's (the module says how missing
        keys read); the position keys (epoch, epoch_step, step) are required. Other keys are left alone."""
        config = dict(saved.get("config") or {})
        seed = saved.get("data_seed", config.get("seed"))
        self.epoch = int(saved["epoch"])
        self.epoch_step = int(saved["epoch_step"])
        self.step = int(saved["step"])
        self.world_size = _int_or_none(saved.get("world_size"))
        self.batch_size = _int_or_none(saved.get("batch_size"))
        self.grad_accum = int(saved.get("grad_accum") or 1)
        self.rng = list(saved.get("rng") or [])
        self.data_seed = _int_or_none(seed)
        self.epoch_partial = dict(saved["epoch_partial"]) if saved.get("epoch_partial") else None
        self.identity = dict(saved.get("identity") or {})
        self.config = config
        self.best = dict(saved.get("best") or {})
        self.metrics = dict(saved.get("metrics") or {})
        self.exports = [str(e) for e in saved.get("exports") or []]

    @classmethod
    def from_state_dict(cls, saved: dict[str, Any]) -> TrainState:
        state = cls()
        state.load_state_dict(saved)
        return state


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
