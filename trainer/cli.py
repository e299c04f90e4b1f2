"""The trainer's command line: every flag, its environment variable and its default, and the checks argparse does
not do; `parse_args` returns the run's configuration (trainer/config.py RunConfig). Torch-free, so that the
validation layer can read a manifest's trainer arguments with the trainer's own defaults without importing torch
(`build_parser(environ=...)`).

Each task adds the flags of its own (the registry's `add_arguments`, trainer/tasks/__init__.py).
"""

from __future__ import annotations

import argparse
import os
from typing import Mapping

from trainer import contract
from trainer.config import RunConfig
from trainer.contract import AFTER_DONE, AMP, BACKENDS, RUN_ID as RUN_ID_RE
from trainer.flags import boolean, non_negative_int, positive, positive_seconds
from trainer.tasks import TASKS

DEFAULT_LOG_INTERVAL = 50
# --log-interval unset: a run of fewer steps than this many log intervals logs more often (at least every
# total / MIN_LOG_POINTS steps), so that its report has a curve to draw
MIN_LOG_POINTS = 20


def env_reader(environ: Mapping[str, str]):
    """A flag's default from `environ`, for a variable declared in trainer/contract.py alone (the validator checks
    manifests against that declaration, so the trainer may read no other)."""
    def env(name: str, default):
        if name not in contract.ENV:
            raise KeyError(f"{name} is read by the trainer but not declared in trainer/contract.py")
        return environ.get(name, default)

    return env


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The parser; each default comes from `environ` (os.environ when None) where the flag's variable is set."""
    env = env_reader(os.environ if environ is None else environ)

    p = argparse.ArgumentParser(
        prog="train.py",
        description="DDP trainer started by torchrun. Each flag defaults to the environment variable in brackets.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--task", choices=list(TASKS), default=env("TASK", "synthetic"),
                   help="[TASK] " + "; ".join(f"{t.name}: {t.summary}" for t in TASKS.values()))
    p.add_argument("--epochs", type=positive(int), default=env("EPOCHS", "3"), help="[EPOCHS] total epochs")
    p.add_argument("--batch-size", type=positive(int), default=env("BATCH_SIZE", None),
                   help="[BATCH_SIZE] samples per step on each rank; None: the task's own ("
                   + ", ".join(f"{t.name} {t.default_batch_size}" for t in TASKS.values()) + ")")
    p.add_argument("--lr", type=positive(float), default=env("LR", None),
                   help="[LR] AdamW learning rate; None: the task's own ("
                   + ", ".join(f"{t.name} {t.default_lr:g}" for t in TASKS.values()) + ")")
    p.add_argument("--seed", type=int, default=env("SEED", "42"), help="[SEED] model init, shuffling, synthetic data")
    p.add_argument("--samples", type=positive(int), default=env("SAMPLES", "4096"), help="[SAMPLES] synthetic: training samples")
    p.add_argument("--features", type=positive(int), default=env("FEATURES", "128"), help="[FEATURES] synthetic: input size")
    p.add_argument("--classes", type=positive(int), default=env("CLASSES", "4"), help="[CLASSES] synthetic: classes")
    p.add_argument("--data-root", default=env("DATA_ROOT", "/data"), help="[DATA_ROOT] folder with the IDX files")
    p.add_argument("--out-dir", default=env("OUT_DIR", "/out"), help="[OUT_DIR] checkpoints go to <out-dir>/<run-id>/")
    p.add_argument("--run-id", default=env("RUN_ID", "default"), help="[RUN_ID] name of the run folder")
    p.add_argument("--backend", choices=BACKENDS, default=env("DIST_BACKEND", "auto"),
                   help="[DIST_BACKEND] auto: nccl when CUDA is available, else gloo (gloo trains on the CPU)")
    p.add_argument("--amp", choices=AMP, default=env("AMP", "none"), help="[AMP] autocast dtype")
    p.add_argument("--channels-last", type=boolean, nargs="?", const=True, default=env("CHANNELS_LAST", "false"),
                   help="[CHANNELS_LAST] channels_last memory format for image tasks")
    p.add_argument("--log-interval", type=positive(int), default=env("LOG_INTERVAL", None),
                   help=f"[LOG_INTERVAL] steps between [TRAIN] lines (the ranks also agree on SIGTERM there); None: "
                        f"{DEFAULT_LOG_INTERVAL}, or less for a run of fewer than {DEFAULT_LOG_INTERVAL * MIN_LOG_POINTS} "
                        f"steps, so that it logs at least {MIN_LOG_POINTS} times")
    p.add_argument("--grace-period", type=positive_seconds, default=env("TERMINATION_GRACE_PERIOD_SECONDS", "30"),
                   help="[TERMINATION_GRACE_PERIOD_SECONDS] seconds between SIGTERM and SIGKILL (the pod's "
                        "terminationGracePeriodSeconds); the ranks agree on SIGTERM every min(5, this / 6) s")
    p.add_argument("--pg-timeout", type=positive_seconds, default=env("PG_TIMEOUT", "600"),
                   help="[PG_TIMEOUT] seconds a collective waits for a peer before failing (init_process_group)")
    p.add_argument("--checkpoint-every", type=positive(int), default=env("CHECKPOINT_EVERY", "1"),
                   help="[CHECKPOINT_EVERY] epochs between checkpoints (the last epoch is always saved)")
    p.add_argument("--checkpoint-steps", type=non_negative_int, default=env("CHECKPOINT_STEPS", "0"),
                   help="[CHECKPOINT_STEPS] also save every N steps inside an epoch (0: off)")
    p.add_argument("--max-steps", type=positive(int), default=env("MAX_STEPS", None),
                   help="[MAX_STEPS] stop after this many optimiser steps in total")
    p.add_argument("--after-done", choices=AFTER_DONE, default=env("AFTER_DONE", "exit"),
                   help="[AFTER_DONE] once the run is complete (or found complete at start): exit, or wait doing "
                        "nothing until SIGTERM, then exit 0 (for a controller that restarts a container that exits, "
                        "which would run it again: a StatefulSet)")
    p.add_argument("--compile", type=boolean, nargs="?", const=True, default=env("COMPILE", "false"),
                   help="[COMPILE] torch.compile the model (a Hugging Face model's transformer blocks one by one) and "
                        "causal-lm's loss; the first step compiles (minutes for a large model on a GPU)")
    p.add_argument("--phase-timeout", type=positive_seconds, default=env("PHASE_TIMEOUT", None),
                   help="[PHASE_TIMEOUT] seconds each phase of the run may take (start-up, model load, compile and "
                        "first step, each later step, validation, checkpoint save, export) before the process says "
                        "which phase it was in and exits 3; None: no limit")
    p.add_argument("--record-shards", type=boolean, nargs="?", const=True, default=env("RECORD_SHARDS", "false"),
                   help="[RECORD_SHARDS] every rank writes the indices of its shard per epoch to <run>/shards/ (debug)")
    for task in TASKS.values():
        if task.add_arguments is not None:
            task.add_arguments(p, env)
    return p


def parse_args(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> RunConfig:
    """The run's configuration: argparse's Namespace, checked and completed with the task's defaults, turned into
    the frozen RunConfig here, the one place a Namespace becomes the configuration the trainer reads."""
    parser = build_parser(environ)
    args = parser.parse_args(argv)
    # argparse does not apply `choices` to defaults, which here come from the environment: check them
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if action.choices is not None and value not in action.choices:
            parser.error(f"argument {action.option_strings[0]}: invalid choice {value!r} "
                         f"(choose from {', '.join(map(str, action.choices))})")
    if not RUN_ID_RE.match(args.run_id) or args.run_id in (".", ".."):
        parser.error(f"argument --run-id: {args.run_id!r} is not a plain folder name ([A-Za-z0-9._-], 128 max)")
    if args.lr is None:
        args.lr = TASKS[args.task].default_lr
    if args.batch_size is None:
        args.batch_size = TASKS[args.task].default_batch_size
    return RunConfig.from_namespace(args)


def log_interval(requested: int | None, total_steps: int) -> int:
    """--log-interval as given, else the default, shortened for a short run so that it logs MIN_LOG_POINTS times."""
    if requested is not None:
        return requested
    return max(1, min(DEFAULT_LOG_INTERVAL, total_steps // MIN_LOG_POINTS))
