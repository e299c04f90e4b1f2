#!/usr/bin/env python3
"""Train one task with DDP on every rank torchrun starts; resume from the run folder's `latest` checkpoint.

    torchrun --nnodes=N --nproc-per-node=M trainer/train.py --task synthetic --epochs 3 --batch-size 256
    python trainer/train.py --task digits          # a world of one, no torchrun
    python -m trainer.train --task mnist --data-root /data

Every flag has an environment default (shown in --help); flags win. See docs/trainer.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # started as a file (torchrun /app/trainer/train.py): make the `trainer` package importable
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]  # no top-level `tasks`, `idx`, ...
    sys.path.insert(0, str(_here.parent))

import argparse
import hashlib
import json
import math
import os
import random
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from trainer import checkpoint as ckpt
from trainer import distributed as D
from trainer import engine
from trainer.flags import boolean as _bool, env as _env, non_negative_int as _non_negative_int, positive as _positive
from trainer import telemetry
from trainer import threads as T
from trainer.errors import EXIT_PEER_LOST, EXIT_PREEMPTED, EXIT_USAGE, Preempted, TrainerError, write_error_file
from trainer.metrics import RunLog
from trainer.sharding import digest, eval_indices, shard_indices
from trainer.tasks import TASKS, Data, get as get_task

RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


# --------------------------------------------------------------------------------------------- flags
def _positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="DDP trainer started by torchrun. Each flag defaults to the environment variable in brackets.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--task", choices=list(TASKS), default=_env("TASK", "synthetic"),
                   help="[TASK] " + "; ".join(f"{t.name}: {t.summary}" for t in TASKS.values()))
    p.add_argument("--epochs", type=_positive(int), default=_env("EPOCHS", "3"), help="[EPOCHS] total epochs")
    p.add_argument("--batch-size", type=_positive(int), default=_env("BATCH_SIZE", None),
                   help="[BATCH_SIZE] samples per step on each rank; None: the task's own ("
                   + ", ".join(f"{t.name} {t.default_batch_size}" for t in TASKS.values()) + ")")
    p.add_argument("--lr", type=_positive(float), default=_env("LR", None),
                   help="[LR] AdamW learning rate; None: the task's own ("
                   + ", ".join(f"{t.name} {t.default_lr:g}" for t in TASKS.values()) + ")")
    p.add_argument("--seed", type=int, default=_env("SEED", "42"), help="[SEED] model init, shuffling, synthetic data")
    p.add_argument("--samples", type=_positive(int), default=_env("SAMPLES", "4096"), help="[SAMPLES] synthetic: training samples")
    p.add_argument("--features", type=_positive(int), default=_env("FEATURES", "128"), help="[FEATURES] synthetic: input size")
    p.add_argument("--classes", type=_positive(int), default=_env("CLASSES", "4"), help="[CLASSES] synthetic: classes")
    p.add_argument("--data-root", default=_env("DATA_ROOT", "/data"), help="[DATA_ROOT] folder with the IDX files")
    p.add_argument("--out-dir", default=_env("OUT_DIR", "/out"), help="[OUT_DIR] checkpoints go to <out-dir>/<run-id>/")
    p.add_argument("--run-id", default=_env("RUN_ID", "default"), help="[RUN_ID] name of the run folder")
    p.add_argument("--backend", choices=D.BACKENDS, default=_env("DIST_BACKEND", "auto"),
                   help="[DIST_BACKEND] auto: nccl when CUDA is available, else gloo (gloo trains on the CPU)")
    p.add_argument("--amp", choices=sorted(engine.AMP_DTYPES), default=_env("AMP", "none"),
                   help="[AMP] autocast dtype")
    p.add_argument("--channels-last", type=_bool, nargs="?", const=True, default=_env("CHANNELS_LAST", "false"),
                   help="[CHANNELS_LAST] channels_last memory format for image tasks")
    p.add_argument("--log-interval", type=_positive(int), default=_env("LOG_INTERVAL", "50"),
                   help="[LOG_INTERVAL] steps between [TRAIN] lines (the ranks also agree on SIGTERM there)")
    p.add_argument("--grace-period", type=_positive_seconds, default=_env("TERMINATION_GRACE_PERIOD_SECONDS", "30"),
                   help="[TERMINATION_GRACE_PERIOD_SECONDS] seconds between SIGTERM and SIGKILL (the pod's "
                        "terminationGracePeriodSeconds); the ranks agree on SIGTERM every min(5, this / 6) s")
    p.add_argument("--pg-timeout", type=_positive_seconds, default=_env("PG_TIMEOUT", "600"),
                   help="[PG_TIMEOUT] seconds a collective waits for a peer before failing (init_process_group)")
    p.add_argument("--checkpoint-every", type=_positive(int), default=_env("CHECKPOINT_EVERY", "1"),
                   help="[CHECKPOINT_EVERY] epochs between checkpoints (the last epoch is always saved)")
    p.add_argument("--checkpoint-steps", type=_non_negative_int, default=_env("CHECKPOINT_STEPS", "0"),
                   help="[CHECKPOINT_STEPS] also save every N steps inside an epoch (0: off)")
    p.add_argument("--max-steps", type=_positive(int), default=_env("MAX_STEPS", None),
                   help="[MAX_STEPS] stop after this many optimiser steps in total")
    p.add_argument("--after-done", choices=AFTER_DONE, default=_env("AFTER_DONE", "exit"),
                   help="[AFTER_DONE] once the run is complete (or found complete at start): exit, or wait doing "
                        "nothing until SIGTERM, then exit 0 (for a controller that restarts a container that exits, "
                        "which would run it again: a StatefulSet)")
    p.add_argument("--record-shards", type=_bool, nargs="?", const=True, default=_env("RECORD_SHARDS", "false"),
                   help="[RECORD_SHARDS] every rank writes the indices of its shard per epoch to <run>/shards/ (debug)")
    for task in TASKS.values():
        if task.add_arguments is not None:
            task.add_arguments(p)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
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
    return args


# --------------------------------------------------------------------------------------------- state
MAX_STOP_CHECK_S = 5.0
AFTER_DONE = ("exit", "wait")
# For `make simulate FAULT=...@step=N` (policies/simulate/fault_run.py): the global steps after which every rank stops
# itself (SIGSTOP) until the simulator, having injected the fault due there, continues it (SIGCONT): the fault lands
# between step N and N+1 on every rank, not a few steps later.
PAUSE_ENV = "PAUSE_AT_STEPS"


def pause_steps(text: str) -> frozenset[int]:
    return frozenset(int(t) for t in text.replace(",", " ").split() if t.isdigit())


def stop_check_seconds(grace_period: float) -> float:
    """How often (in seconds of training) the ranks agree on SIGTERM: a sixth of the grace period, at most
    5 s, so that the vote, the last step and the checkpoint fit well inside it."""
    return min(MAX_STOP_CHECK_S, max(0.05, grace_period / 6))


def steps_until_next_check(seconds_per_step: float, check_s: float) -> int:
    """Steps that fit in `check_s` at the measured pace (at least 1). Every rank computes it from the same
    all-reduced figures, so all ranks vote at the same step."""
    if not seconds_per_step > 0:
        return 1
    return max(1, min(1_000_000, int(check_s / seconds_per_step)))


class StopFlag:
    """SIGTERM (pre-emption, pod deletion, torchrun shutting down) and SIGINT (Ctrl-C, which torchrun forwards
    to its workers) only set a flag; the ranks act on it together: save, then exit 143."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.requested = False
        self.signal: str | None = None  # the first signal this rank received

    def install(self) -> None:
        for signum in self.SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.requested = True
        self.signal = self.signal or signal.Signals(signum).name

    @property
    def reason(self) -> str:
        """What the logs name as the cause: this rank's signal (rank 0 may stop on another rank's vote)."""
        return self.signal or "SIGTERM"


def rng_state(device: torch.device) -> dict[str, Any]:
    np_state = np.random.get_state()
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


def model_signature(model: torch.nn.Module) -> str:
    text = ";".join(f"{k}:{tuple(v.shape)}" for k, v in model.state_dict().items())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Progress:
    epoch: int = 0  # completed epochs = index of the epoch in progress
    epoch_step: int = 0  # steps already done in that epoch
    step: int = 0  # optimiser steps in total
    best: dict[str, Any] = field(default_factory=dict)  # val_loss, val_acc, epoch, step of best.pt
    partial: dict[str, Any] | None = None  # mid-epoch resume: the epoch's training figures before the checkpoint


@dataclass
class Prepared:
    data: Data
    model: torch.nn.Module
    identity: dict[str, Any]
    resume_path: str | None
    resume_state: dict[str, Any] | None
    warnings: list[str]
    best_record: dict[str, Any] | None = None  # what best.pt records of itself (`best`), when it is readable


# --------------------------------------------------------------------------------------------- trainer
class Trainer:
    def __init__(self, args: argparse.Namespace, denv: D.DistEnv, device: torch.device):
        self.args = args
        self.denv = denv
        self.device = device
        self.task = get_task(args.task)
        self.run_dir = Path(args.out_dir) / args.run_id
        self.log = RunLog(denv.is_main, self.run_dir)
        self.stop = StopFlag()
        self.amp = engine.AMP_DTYPES[args.amp]
        self.channels_last = bool(args.channels_last) and self.task.image
        self.stop_check_s = stop_check_seconds(args.grace_period)
        self.threads, self.threads_why = T.choose_threads(os.environ, denv.local_world_size)
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        self.tel = telemetry.Telemetry.from_trainer(args, denv, device)
        self.pause_at = pause_steps(os.environ.get(PAUSE_ENV, ""))

    # ---- set-up: every precondition is checked on every rank, then agreed on (no rank left waiting)
    def _prepare(self) -> Prepared:
        args, main = self.args, self.denv.is_main
        warnings: list[str] = []
        if main:
            ckpt.check_writable(self.run_dir)
            removed = ckpt.remove_temp_files(self.run_dir)
            if removed:
                warnings.append(f"removed {len(removed)} leftover temporary file(s) of an interrupted write: "
                                + ", ".join(removed[:5]))
        if args.record_shards:
            ckpt.check_writable(self.run_dir / "shards")
        data = self.task.load(args)
        torch.manual_seed(args.seed)
        np.random.seed(args.seed)
        random.seed(args.seed)
        model = self.task.build_model(data)
        identity = {"task": self.task.name, "model": type(model).__name__, "params": model_signature(model),
                    "data": data.identity}
        path = state = None
        if main:
            path, state, found_warnings = ckpt.find_resume(self.run_dir)
            warnings += found_warnings
            if state is not None:
                ckpt.check_identity(state, identity, path)
            best_record, best_warnings = ckpt.read_best_record(self.run_dir, identity)
            warnings += best_warnings
        else:
            best_record = None
        return Prepared(data, model, identity, str(path) if path else None, state, warnings, best_record)

    def run(self) -> int:
        if self.task.run is not None:  # a task with a loop of its own (causal-lm)
            return self.task.run(self)
        args, denv, device = self.args, self.denv, self.device
        self.stop.install()
        prep = D.agree(self._prepare)
        for w in prep.warnings:
            self.log.warn(w)
        # The run folder may be local to rank 0's node: rank 0 read the checkpoint, the others get it from it.
        resume_path, state, best_record = D.broadcast_object(
            (prep.resume_path, prep.resume_state, prep.best_record) if denv.is_main else None)

        engine.configure_device(device)
        data = prep.data.to(device, self.channels_last)
        model = engine.prepare_model(prep.model, device, self.channels_last)
        optimizer = engine.make_optimizer(model, args.lr, device)
        progress = Progress()
        changed: list[str] = []
        if state is not None:
            model.load_state_dict(state["model"])
            # moments and step counts from the checkpoint; lr, betas, weight decay, fused/foreach from this run
            changed = engine.load_optimizer_state(optimizer, state["optimizer"])
            rngs = state.get("rng") or []
            if denv.rank < len(rngs):
                set_rng_state(rngs[denv.rank], device)
            progress = Progress(state["epoch"], state["epoch_step"], state["step"], dict(state.get("best") or {}),
                                state.get("epoch_partial"))
            # The data order belongs to the run: a resumed run shuffles with the checkpoint's seed, whatever
            # --seed says, so that the epoch in progress neither repeats nor skips samples.
            saved_seed = state.get("data_seed", (state.get("config") or {}).get("seed"))
            if saved_seed is not None and saved_seed != args.seed:
                self.log.warn(f"--seed {args.seed} ignored: this run shuffles its data with seed {saved_seed}, "
                              f"the seed of its checkpoint (a new seed would repeat some samples and skip others); "
                              f"use another --run-id for another seed")
                args.seed = int(saved_seed)
            if progress.epoch_step and (state.get("world_size"), state.get("batch_size")) != (denv.world_size, args.batch_size):
                self.log.warn(f"checkpoint was taken mid-epoch with world {state.get('world_size')} and batch size "
                              f"{state.get('batch_size')}; now {denv.world_size} x {args.batch_size}: "
                              f"epoch {progress.epoch + 1} starts again from its beginning")
                progress.epoch_step = 0
                progress.partial = None
        self._keep_best(progress, best_record, state is None)
        if state is not None and self._already_complete(progress, resume_path):
            return 0
        ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None) if D.active() else model

        self.log.emit("DDP", "start", world=denv.world_size, backend=denv.backend if D.active() else "none",
                      device=str(device), local_world=denv.local_world_size, host=socket.gethostname(),
                      restart=denv.restart_count, task=self.task.name, data=data.description,
                      model=type(model).__name__, amp=args.amp, channels_last=self.channels_last,
                      batch_per_rank=args.batch_size, lr=args.lr, epochs=args.epochs, threads=torch.get_num_threads(),
                      threads_from=self.threads_why, stop_check_s=self.stop_check_s, grace_s=args.grace_period,
                      pg_timeout_s=args.pg_timeout if D.active() else None, run_dir=str(self.run_dir))
        self.tel.start(vars(args), {"world_size": denv.world_size, "local_world_size": denv.local_world_size,
                                    "backend": denv.backend if D.active() else "none", "device": device.type,
                                    "restart": denv.restart_count}, args.epochs)
        if state is not None:
            self.log.emit("DDP", "resume", resumed_from=resume_path, epoch=progress.epoch,
                          epoch_step=progress.epoch_step, step=progress.step, data_seed=args.seed,
                          kept="model, AdamW moments and step counts, RNG, data order",
                          changed=", ".join(changed) or "nothing")

        self.model, self.ddp, self.optimizer, self.data, self.identity = model, ddp, optimizer, data, prep.identity
        self.val_idx = eval_indices(data.val_x.shape[0], denv.rank, denv.world_size).to(device)
        started = time.perf_counter()
        train_time = self._train(progress)
        self._done(progress, time.perf_counter() - started, train_time)
        return 0

    def _keep_best(self, progress: Progress, record: dict[str, Any] | None, fresh: bool) -> None:
        """Never let a restart replace a better best.pt with a worse model: when best.pt records a lower
        validation loss than the checkpoint this run resumes from (or it starts over because no checkpoint
        could be read), that record stays the one to beat."""
        if not record or (progress.best and not record["val_loss"] < progress.best["val_loss"]):
            return
        progress.best = dict(record)
        how = "starting over without a readable checkpoint" if fresh else "resuming from an older checkpoint"
        self.log.warn(f"{how}: keeping {self.run_dir / ckpt.BEST} (val_loss={record['val_loss']:.4f}, "
                      f"val_acc={record.get('val_acc', float('nan')):.4f}, epoch {record.get('epoch')}) until a "
                      f"model of this run has a lower validation loss; use another --run-id for a new lineage")

    def _already_complete(self, progress: Progress, resume_path: str | None) -> bool:
        """A finished run started again trains nothing: say so, and how to train more or start anew."""
        args = self.args
        if progress.epoch < args.epochs and not (args.max_steps and progress.step >= args.max_steps):
            return False
        limit = (f"reached --max-steps {args.max_steps}" if progress.epoch < args.epochs
                 else f"finished {progress.epoch} of {args.epochs} epochs")
        best = progress.best
        if best:
            limit += (f"; best val_acc={best.get('val_acc', float('nan')):.4f} at epoch {best.get('epoch')} in "
                      f"{self.run_dir / ckpt.BEST}")
        if self.denv.is_main:
            print(f"[DONE] run {self.run_dir} is already complete ({limit}): nothing to train. To train it "
                  f"further raise --epochs{' or --max-steps' if args.max_steps else ''}; to start a new run "
                  f"pass another --run-id (or --out-dir).", flush=True)
        self.log.event("done", already_complete=True, epochs=progress.epoch, steps=progress.step,
                       best_val_loss=best.get("val_loss"), best_val_acc=best.get("val_acc"),
                       best_epoch=best.get("epoch"), latest=resume_path)
        return True

    # ---- checkpoints
    def _save(self, progress: Progress, name: str | None, is_best: bool, metrics: dict[str, Any],
              partial: dict[str, Any] | None = None) -> str | None:
        """Collective: gather every rank's RNG (and, mid-epoch, its training figures so far), rank 0 writes,
        every rank learns whether it worked.

        `name` and `is_best` derive from all-reduced figures, so every rank takes the same branch.
        """
        if name is None and not is_best:
            return None
        gathered = D.all_gather_objects({"rng": rng_state(self.device), "partial": partial})
        partials = [g["partial"] for g in gathered if g["partial"] is not None]
        epoch_partial = None
        if partials:  # the epoch's figures over all ranks, so that a resumed epoch reports the whole epoch
            epoch_partial = {"loss_sum": sum(p["loss_sum"] for p in partials),
                             "samples": sum(p["samples"] for p in partials),
                             "train_s": max(p["train_s"] for p in partials)}
        state = {
            "format": ckpt.FORMAT, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "epoch": progress.epoch, "epoch_step": progress.epoch_step, "step": progress.step,
            "world_size": self.denv.world_size, "batch_size": self.args.batch_size,
            "rng": [g["rng"] for g in gathered], "data_seed": self.args.seed, "epoch_partial": epoch_partial,
            "identity": self.identity, "config": vars(self.args), "best": progress.best, "metrics": metrics,
        }

        def write() -> None:
            if self.denv.is_main:
                try:
                    ckpt.save(self.run_dir, state, name, is_best)
                except OSError as e:
                    raise TrainerError(f"cannot write checkpoint in {self.run_dir}: {e.strerror or e}") from None

        started = time.perf_counter()
        D.agree(write)
        if self.denv.is_main:
            self.tel.checkpoint(self.run_dir / (name or ckpt.BEST), time.perf_counter() - started)
        return name

    def _record_shard(self, epoch: int, shard: torch.Tensor, start_batch: int) -> None:
        record = {"epoch": epoch + 1, "rank": self.denv.rank, "world_size": self.denv.world_size,
                  "count": shard.numel(), "start_batch": start_batch, "sha256": digest(shard),
                  "indices": shard.tolist()}
        path = self.run_dir / "shards" / f"epoch-{epoch + 1:04d}.rank-{self.denv.rank}.json"
        ckpt.atomic_write(path, json.dumps(record).encode())

    # ---- the loop
    def _train(self, progress: Progress) -> float:
        args, denv, device, data = self.args, self.denv, self.device, self.data
        n = data.train_x.shape[0]
        train_time = 0.0
        # The stop vote runs on time, not on a step count: every rank measures its pace, the figures are
        # all-reduced at each vote, and all ranks derive the same next voting step from them. The first vote
        # comes after one step.
        next_vote = progress.step + 1
        for epoch in range(progress.epoch, args.epochs):
            if args.max_steps and progress.step >= args.max_steps:
                break
            shard_cpu = shard_indices(n, denv.rank, denv.world_size, epoch, args.seed)
            shard = shard_cpu.to(device)
            steps_per_epoch = math.ceil(shard.numel() / args.batch_size)
            start_batch = progress.epoch_step
            if args.record_shards:
                self._record_shard(epoch, shard_cpu, start_batch)
            self.ddp.train()
            epoch_loss = torch.zeros((), device=device)
            interval_loss = torch.zeros((), device=device)
            epoch_samples = interval_samples = 0
            offset_s = 0.0  # training time of this epoch before the checkpoint it resumed from
            if start_batch and progress.partial:
                if denv.is_main:  # global sums: added once, then all-reduced with the rest at the epoch's end
                    epoch_loss += float(progress.partial["loss_sum"])
                    epoch_samples = int(progress.partial["samples"])
                offset_s = float(progress.partial["train_s"])
            progress.partial = None
            t_epoch = t_interval = t_vote = time.perf_counter()
            cpu_epoch = time.process_time()  # this process's CPU time, all its threads (gloo's included)
            vote_step = interval_step = progress.step
            data_vote = data_interval = 0.0  # seconds spent fetching batches, for the metrics endpoint and ranks
            stop_at_epoch_end = False

            def partial_figures() -> dict[str, Any]:  # this rank's figures of the epoch so far (host sync)
                return {"loss_sum": float((epoch_loss + interval_loss).item()),
                        "samples": epoch_samples + interval_samples,
                        "train_s": offset_s + time.perf_counter() - t_epoch}

            for i, sl in engine.batch_slices(shard.numel(), args.batch_size, start_batch):
                t_data = time.perf_counter()
                idx = shard[sl]
                xb, yb = data.train_x[idx], data.train_y[idx]
                t_data = time.perf_counter() - t_data
                data_vote += t_data
                data_interval += t_data
                loss = engine.train_step(self.ddp, self.optimizer, xb, yb, self.amp, self.channels_last)
                b = idx.numel()
                interval_loss += loss * b
                interval_samples += b
                progress.step += 1
                progress.epoch_step = i + 1
                at_max = bool(args.max_steps) and progress.step >= args.max_steps
                log_due = progress.step % args.log_interval == 0
                if log_due or progress.step >= next_vote:
                    # The only host sync of the loop: the stop vote, the pace, and at a log interval the loss.
                    now = time.perf_counter()
                    stats = torch.tensor([float(self.stop.requested), now - t_vote], device=device,
                                         dtype=torch.float64)
                    if log_due:  # with each rank's own step and data time, for metrics.jsonl
                        steps = max(1, progress.step - interval_step)
                        stats = torch.cat([stats, torch.stack([interval_loss.double(), torch.tensor(
                            float(interval_samples), device=device, dtype=torch.float64)]),
                            telemetry.rank_slots(denv.world_size, denv.rank, [
                                (now - t_interval) / steps, data_interval / steps], device)])
                    reduced = D.all_reduce_sum(stats).tolist()
                    own = max(1, progress.step - vote_step)
                    self.tel.pace(progress.step, epoch + 1, (now - t_vote) / own, data_vote / own)
                    data_vote = 0.0
                    stop, seconds = reduced[0], reduced[1] / denv.world_size
                    next_vote = progress.step + steps_until_next_check(
                        seconds / max(1, progress.step - vote_step), self.stop_check_s)
                    t_vote, vote_step = now, progress.step
                    if log_due:
                        loss_sum, samples, per_rank = reduced[2], reduced[3], reduced[4:]
                        rate = samples / max(now - t_interval, 1e-9)
                        self.log.emit("TRAIN", "train", epoch=epoch + 1, step=progress.step,
                                      epoch_step=i + 1, epoch_steps=steps_per_epoch, loss=loss_sum / samples,
                                      samples_per_s=rate)
                        self.log.event("ranks", epoch=epoch + 1, step=progress.step,
                                       step_s=per_rank[:denv.world_size], data_s=per_rank[denv.world_size:])
                        self.tel.interval(progress.step, epoch + 1, args.epochs, i + 1, steps_per_epoch,
                                          loss_sum / samples, rate)
                        interval_step, data_interval = progress.step, 0.0
                        epoch_loss += interval_loss
                        epoch_samples += interval_samples
                        interval_loss.zero_()
                        interval_samples = 0
                        t_interval = now
                    if stop:
                        if progress.epoch_step == steps_per_epoch:
                            # the epoch's last step: finish the epoch (validation, epoch checkpoint), then stop
                            stop_at_epoch_end = True
                            break
                        self._preempt(progress, self.stop.reason, partial_figures())
                if progress.step in self.pause_at:
                    os.kill(os.getpid(), signal.SIGSTOP)
                if (args.checkpoint_steps and progress.step % args.checkpoint_steps == 0
                        and progress.epoch_step < steps_per_epoch and not at_max):
                    name = self._save(progress, ckpt.step_name(progress.step), False, {"reason": "interval"},
                                      partial_figures())
                    self.log.emit("CKPT", "checkpoint", file=name, epoch=epoch + 1, step=progress.step,
                                  reason="every-steps")
                if at_max:
                    break
            complete = progress.epoch_step == steps_per_epoch
            partial = None if complete else partial_figures()
            epoch_loss += interval_loss
            epoch_samples += interval_samples
            if device.type == "cuda":  # once per epoch, so that the epoch's time covers its GPU work
                torch.cuda.synchronize(device)
            train_seconds = max(offset_s + time.perf_counter() - t_epoch, 1e-9)
            cpu_seconds = time.process_time() - cpu_epoch
            self._end_epoch(progress, epoch, complete, epoch_loss, epoch_samples, train_seconds, partial,
                            stop_at_epoch_end, cpu_seconds)
            train_time += train_seconds - offset_s  # this process's own training time
            if not complete:
                break
        return train_time

    def _end_epoch(self, progress: Progress, epoch: int, complete: bool, epoch_loss: torch.Tensor,
                   epoch_samples: int, train_seconds: float, partial: dict[str, Any] | None = None,
                   stop_agreed: bool = False, cpu_seconds: float = 0.0) -> None:
        """Validation over all ranks, checkpoint, [EPOCH] line, and the stop vote at the epoch's end."""
        args, device = self.args, self.device
        val = engine.evaluate(self.model, self.data.val_x, self.data.val_y, self.val_idx, args.batch_size,
                              self.amp, self.channels_last)
        stats = torch.cat([torch.stack([epoch_loss.double(), torch.tensor(float(epoch_samples), device=device,
                                                                          dtype=torch.float64)]),
                           val, torch.tensor([float(self.stop.requested), cpu_seconds], device=device,
                                             dtype=torch.float64)])
        loss_sum, samples, val_loss_sum, correct, count, stop, cpu_sum = D.all_reduce_sum(stats).tolist()
        stop = stop or stop_agreed
        val_loss, val_acc = val_loss_sum / count, correct / count
        # An epoch resumed from a checkpoint that kept no training figures (written before they were saved)
        # has no train loss: it is left out rather than printed as 0.
        metrics = {"epoch": epoch + 1, "step": progress.step,
                   "train_loss": loss_sum / samples if samples else None,
                   "val_loss": val_loss, "val_acc": val_acc,
                   "samples_per_s": samples / train_seconds if samples else None,
                   "train_s": round(train_seconds, 3), "cpu_s": round(cpu_sum, 3)}
        is_best = not progress.best or val_loss < progress.best["val_loss"]
        if is_best:
            progress.best = {"val_loss": val_loss, "val_acc": val_acc, "epoch": epoch + 1, "step": progress.step}
        if complete:
            progress.epoch, progress.epoch_step = epoch + 1, 0
            due = (epoch + 1) % args.checkpoint_every == 0 or epoch + 1 == args.epochs or stop
            name = ckpt.epoch_name(epoch + 1) if due else None
        else:  # --max-steps ended the run inside this epoch
            name = ckpt.step_name(progress.step)
        saved = self._save(progress, name, is_best, metrics, partial)
        self.tel.epoch(metrics, args.epochs)
        self.log.emit("EPOCH", "epoch", epoch=epoch + 1, epochs=args.epochs, step=progress.step,
                      train_loss=metrics["train_loss"], val_loss=val_loss, val_acc=val_acc,
                      samples_per_s=metrics["samples_per_s"], train_s=metrics["train_s"], cpu_s=metrics["cpu_s"],
                      checkpoint=saved,
                      best=is_best)
        if stop:
            self.log.emit("CKPT", "checkpoint", file=saved, epoch=epoch + 1, step=progress.step, reason=self.stop.reason)
            raise Preempted(self._stopped_message(saved))

    def _preempt(self, progress: Progress, reason: str, partial: dict[str, Any]) -> None:
        name = self._save(progress, ckpt.step_name(progress.step), False, {"reason": reason}, partial)
        self.log.emit("CKPT", "checkpoint", file=name, epoch=progress.epoch + 1, step=progress.step, reason=reason)
        raise Preempted(self._stopped_message(name))

    def _stopped_message(self, saved: str | None) -> str:
        where = self.run_dir / saved if saved else self.run_dir / ckpt.LATEST
        return f"stopped by {self.stop.reason} after saving {where}: run the same command again to resume from it"

    def _done(self, progress: Progress, total_s: float, train_s: float) -> None:
        best = progress.best
        self.log.emit("DONE", "done", world=self.denv.world_size, epochs=progress.epoch, steps=progress.step,
                      best_val_loss=best.get("val_loss"), best_val_acc=best.get("val_acc"),
                      best_epoch=best.get("epoch"), model=str(self.run_dir / ckpt.BEST) if best else None,
                      latest=str(self.run_dir / ckpt.LATEST), data=self.data.description,
                      train_s=round(train_s, 3), total_s=round(total_s, 3))
        self.tel.done({"best": best, "steps": progress.step, "epochs": progress.epoch}, self.run_dir)


# --------------------------------------------------------------------------------------------- main
def _is_comm_failure(e: BaseException) -> bool:
    text = str(e)
    return isinstance(e, dist.DistError) or any(
        s in text for s in ("Connection reset", "Connection closed", "Broken pipe", "gloo", "NCCL", "TCPStore")
    )


def _hard_exit(code: int) -> None:
    """Exit now, skipping destructors: after a peer vanished the process group's destructor can abort the
    interpreter ("terminate called without an active exception")."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# The trainer (its DDP Reducer and, through it, the process group) outlives main(): `_hard_exit` must leave before
# their destructors run. Freed when main() returns, the Reducer destroys gloo's process group, whose destructor joins
# gloo's worker thread while holding the GIL, while that thread waits for the GIL to release the last collective's
# tensors: a deadlock after a run that finished (seen on the simulator's second pod, py-spy: ~ProcessGroupGloo in
# std::thread::join, the worker in gil_scoped_acquire under ~AsyncAllgatherWork).
_ALIVE: list[Any] = []


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    denv = None
    try:
        denv, device = D.init(args.backend, args.pg_timeout)
    except TrainerError as e:  # environment problem found before any collective: every rank says it
        print(f"[ERROR] {e}", file=sys.stderr, flush=True)
        write_error_file(str(e))
        return EXIT_USAGE
    trainer = Trainer(args, denv, device)
    _ALIVE.append(trainer)
    try:
        code = trainer.run()
    except TrainerError as e:  # agreed on by all ranks: rank 0 prints it, every rank exits non-zero
        if denv.is_main:
            print(f"[ERROR] {e}", file=sys.stderr, flush=True)
        write_error_file(str(e))
        code = EXIT_USAGE
    except Preempted as e:
        write_error_file(str(e))
        code = EXIT_PREEMPTED
    except Exception as e:
        if not (D.active() and (trainer.stop.requested or _is_comm_failure(e))):
            raise
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        if trainer.stop.requested:
            message = (f"rank {denv.rank}: stopped by {trainer.stop.reason} while a peer was gone ({first}); "
                       "resume from the last checkpoint")
            print(f"[ERROR] {message}", file=sys.stderr)
            write_error_file(message)
            _hard_exit(EXIT_PREEMPTED)
        message = (f"rank {denv.rank}: lost another worker ({first}); exiting so that torchrun can restart "
                   "the group from the last checkpoint")
        print(f"[ERROR] {message}", file=sys.stderr)
        write_error_file(message)
        _hard_exit(EXIT_PEER_LOST)
    if code == 0 and args.after_done == "wait":
        wait_after_done(denv)
    D.shutdown()
    return code


def wait_after_done(denv: D.DistEnv) -> None:
    """AFTER_DONE=wait: the run is complete, and a controller that restarts a container that exits (a StatefulSet,
    restartPolicy Always) would start it again. Every rank stays up doing nothing until SIGTERM or SIGINT (the
    workload scaled to 0 or deleted); each pod's first process says so once."""
    stopped = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda s, f: stopped.append(s))
    if denv.local_rank == 0:
        print(f"[IDLE] run complete on {socket.gethostname()}: waiting for SIGTERM (AFTER_DONE=wait: a controller "
              "that restarts exited containers would run it again; scale the workload to 0 or delete it to end)",
              flush=True)
    while not stopped:
        time.sleep(0.5)  # a signal's handler runs at once; the loop sees it within half a second


if __name__ == "__main__":
    # Leave without interpreter finalisation, whatever the code:
    # - gloo's worker thread may still be releasing the last collective's tensors (it needs the GIL to
    #   drop their Python objects) while the interpreter finalises, and a thread that takes the GIL then
    #   is cancelled mid-C++ frame: "terminate called without an active exception", SIGABRT, exit -6
    #   after a run that finished (seen about 1 run in 6 on 2 loaded cores);
    # - finalisation restores the default SIGTERM action, and torchrun SIGTERMs the ranks still on their
    #   way out once the first one has exited, which would turn their own exit code into -15.
    # Every file the trainer writes is closed by then (checkpoints and metrics.jsonl are written whole).
    _hard_exit(main())

