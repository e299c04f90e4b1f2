"""The run's configuration: every flag of the trainer's command line (trainer/cli.py), typed and frozen.

`parse_args` builds it once from argparse's Namespace (after the checks argparse does not do and the task's defaults);
the trainer and the tasks read this, never a Namespace. Torch-free, like the command line. The one field a run
changes after start-up is `seed`: a resumed run shuffles with its checkpoint's seed, so the trainer replaces its
configuration with `dataclasses.replace` (trainer/loop.py `_resume`), never mutates it.

Every task's flags are fields here, whatever the task: the parser declares them all (a run records them all in its
checkpoints' `config` and its telemetry's parameters), and `from_namespace` refuses a Namespace whose flags are not
exactly these fields, so that a new flag cannot be forgotten here.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunConfig:
    # the trainer's flags (trainer/cli.py build_parser)
    task: str
    epochs: int
    batch_size: int  # the task's default when none is given
    lr: float  # the task's default when none is given
    seed: int
    samples: int
    features: int
    classes: int
    data_root: str
    out_dir: str
    run_id: str
    backend: str
    amp: str
    channels_last: bool
    log_interval: int | None
    grace_period: float
    pg_timeout: float
    checkpoint_every: int
    checkpoint_steps: int
    max_steps: int | None
    after_done: str
    compile: bool
    phase_timeout: float | None
    record_shards: bool
    # the causal-lm task's flags (trainer/tasks/causal_lm_flags.py)
    model_local_dir: str | None
    tokenizer_local_dir: str | None
    model_id: str | None
    local_files_only: bool
    train_file: str | None
    val_file: str | None
    seq_len: int
    grad_accum: int
    clip_grad: float
    warmup_steps: int | None
    lr_schedule: str
    min_lr_ratio: float
    weight_decay: float
    strategy: str
    token_cache: str | None
    save_epochs: bool

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> RunConfig:
        given = vars(ns)
        names = {f.name for f in dataclasses.fields(cls)}
        missing, unknown = sorted(names - set(given)), sorted(set(given) - names)
        if missing or unknown:
            raise TypeError(f"the command line and RunConfig disagree: flags without a field {unknown}, "
                            f"fields without a flag {missing} (trainer/config.py)")
        return cls(**given)

    def to_dict(self) -> dict[str, Any]:
        """Every flag by its argparse name (what `vars(namespace)` was): telemetry's parameters."""
        return dataclasses.asdict(self)

    def scalars(self) -> dict[str, Any]:
        """The flags a checkpoint records (its `config`)."""
        return {k: v for k, v in self.to_dict().items() if isinstance(v, (str, int, float, bool, type(None)))}
