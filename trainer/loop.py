"""The one training loop, whatever the task: a task (trainer/tasks/) builds its model, data and step; the trainer owns
the rest, the same for every task: the run folder's checks, DDP or FSDP2 (trainer/fsdp.py), the optimiser, resume
through the one checkpoint API (trainer/checkpoint/), the loop over epochs and steps with the stop vote
(trainer/stop.py), validation with the same vote, checkpoints and the task's exports, logs (trainer/metrics.py) and
telemetry (trainer/telemetry.py).

Every check that one rank may fail alone runs through `distributed.agree`, so all ranks exit together. The only host
syncs of the loop are the stop votes, which carry the log interval's figures when one is due.

What a stop must fit in the grace period: the step in progress, one voting interval (`stop_check_seconds`) and one
checkpoint write (the sharded format writes every rank's shards in parallel). A validation pass is done before the
stop only when the last one took at most half the grace period (`stop.fits`); otherwise, or when the stop comes during
validation, the checkpoint is taken at the epoch's last step and the resumed run validates. The task's exports (the
causal-LM task's `best/` and `epoch-NNNN/`, which gather the whole model on rank 0) never run after a stop: the
checkpoint lists them and the resumed run writes them from the same weights before it trains.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import signal
import socket
import time
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch

from trainer import checkpoint
from trainer import cli
from trainer import distributed as D
from trainer import engine
from trainer import fsdp
from trainer import telemetry
from trainer.phases import Watchdog
from trainer import threads as T
from trainer.config import RunConfig
from trainer.errors import Preempted, TrainerError
from trainer.metrics import RunLog
from trainer.sharding import digest, eval_indices, shard_indices
from trainer.stop import PAUSE_ENV, StopFlag, VoteClock, fits, pause_steps, stop_check_seconds
from trainer.tasks import Context, TaskRun, get as get_task
from trainer.tracker import Meter, Progress, merge_partials


# Tests stop a real run at a point of its own: TRAINER_TEST_HOOK=<point> (last-step: after an epoch's last step,
# validation: after the first validation batch, export: before the first export) prints `hook: <point>` on standard
# error, then waits until this process is sent SIGTERM or SIGINT (60 s at most).
HOOK = "TRAINER_TEST_HOOK"


def model_signature(model: torch.nn.Module) -> str:
    text = ";".join(f"{k}:{tuple(v.shape)}" for k, v in model.state_dict().items())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Built:
    """What `Trainer.run` builds before it resumes: the task's run, its model on the device, that model wrapped (DDP or
    FSDP2) and its optimiser."""

    task_run: TaskRun
    model: torch.nn.Module
    wrapped: torch.nn.Module
    optimizer: torch.optim.Optimizer


class Trainer:
    """One run of the training loop on this rank. Every attribute is set here; what `run` builds (the model and its
    optimiser) is None until then, read through the properties below."""

    def __init__(self, config: RunConfig, denv: D.DistEnv, device: torch.device,
                 watchdog: Watchdog | None = None):
        # the run's flags; `_resume` replaces it once, with the checkpoint's data seed
        self.config = config
        # --phase-timeout (trainer/phases.py): each phase of the run names itself here
        self.watchdog = watchdog or Watchdog(None)
        self.phase = self.watchdog.enter
        self.denv = denv
        self.device = device
        self.task = get_task(config.task)
        self.run_dir = Path(config.out_dir) / config.run_id
        self.log = RunLog(denv.is_main, self.run_dir)
        self.stop = StopFlag()
        self.channels_last = bool(config.channels_last) and self.task.image
        self.stop_check_s = stop_check_seconds(config.grace_period)
        self.store = checkpoint.open_store(self.task.checkpoint, self.run_dir)
        self.threads, self.threads_why = T.choose_threads(os.environ, denv.local_world_size)
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        self.tel = telemetry.Telemetry.from_trainer(config, denv, device)
        self.pause_at = pause_steps(os.environ.get(PAUSE_ENV, ""))
        self.val_seconds: float | None = None  # the last validation pass of this process
        self.log_every = config.log_interval or cli.DEFAULT_LOG_INTERVAL  # `run` sets it from the run's steps
        # set by `run`, once the model is built
        self.built: Built | None = None
        self.compiled: str | None = None  # --compile: what was compiled
        self.identity: dict[str, Any] = {}  # task, model, params and data of this run (the checkpoints' identity)
        self.steps_per_epoch = 0
        self.val_idx = torch.empty(0, dtype=torch.long)  # this rank's validation rows
        self.interval_step = 0  # the step of the last log interval (set as training starts)

    def _ready(self) -> Built:
        if self.built is None:
            raise RuntimeError("the trainer's model is built by run()")
        return self.built

    @property
    def task_run(self) -> TaskRun:
        return self._ready().task_run

    @property
    def model(self) -> torch.nn.Module:
        return self._ready().model

    @property
    def wrapped(self) -> torch.nn.Module:
        return self._ready().wrapped

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self._ready().optimizer

    def _hook(self, point: str) -> None:
        if os.environ.get(HOOK) != point:
            return
        os.write(2, f"hook: {point}\n".encode())
        deadline = time.monotonic() + 60
        while not self.stop.requested and time.monotonic() < deadline:
            time.sleep(0.02)

    # ---- set-up: every precondition is checked on every rank, then agreed on (no rank left waiting)
    def _prepare_folder(self) -> list[str]:
        warnings = self.store.prepare() if self.denv.is_main else []
        if self.config.record_shards:
            checkpoint.check_writable(self.run_dir / "shards")
        return warnings

    def _find(self, identity: dict[str, Any], rejected: set[str]) -> tuple[Any, list[str], dict[str, Any] | None]:
        """Rank 0 looks for the resume point and reads the best model's record; every rank gets them (the run folder
        of the single-file format may be local to rank 0's node)."""

        def find():
            if not self.denv.is_main:
                return None
            found, warnings = self.store.find(rejected)
            if found is not None:
                checkpoint.check_identities(found.train.identity, identity, found.path)
            record, more = self.store.best_record(identity)
            return found, warnings + more, record

        return D.broadcast_object(D.agree(find))

    def run(self) -> int:
        cfg, denv, device = self.config, self.denv, self.device
        self.stop.install()
        for w in D.agree(self._prepare_folder):
            self.log.warn(w)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        random.seed(cfg.seed)
        self.phase("model load")
        run = self.task.build(Context(cfg, denv, device, self.run_dir))  # each stage agreed on inside
        for w in run.warnings:
            self.log.warn(w)
        identity = {"task": self.task.name, "model": run.model_name, "params": model_signature(run.model),
                    "data": run.data_identity}
        rejected: set[str] = set()
        found, warnings, best_record = self._find(identity, rejected)
        for w in warnings:
            self.log.warn(w)

        engine.configure_device(device)
        run.to(device, self.channels_last)
        model = engine.prepare_model(run.model, device, self.channels_last)
        # in place, before the FSDP2 units (named by class) are made: compiles at the first step
        self.compiled = engine.compile_model(model) if cfg.compile else None
        wrapped, units = fsdp.wrap(model, run.strategy, device)
        optimizer = engine.make_optimizer(wrapped, cfg.lr, device, run.weight_decay)
        self.built = Built(run, model, wrapped, optimizer)
        self.identity = identity

        changed: list[str] = []
        failed: tuple[str, Path] | None = None  # the last checkpoint that failed to load, and why
        self.phase("resume")
        while found is not None:
            try:
                changed = self.store.load(found, model, wrapped, optimizer)
                break
            except TrainerError as e:  # the same on every rank (sharded: DCP gathers every rank's outcome)
                self.log.warn(f"{e}: looking for the checkpoint before it")
                failed = (str(e), found.path)
                rejected.add(found.name)
                found, warnings, best_record = self._find(identity, rejected)
                for w in warnings:
                    self.log.warn(w)
        if found is None and failed is not None:
            # the model and optimiser may hold part of the checkpoint that failed: never train on from there
            raise TrainerError(f"{failed[0]}, and no other checkpoint of {self.run_dir} loads: remove {failed[1]} "
                               "or pass another --run-id")
        progress = self._resume(found, changed) if found is not None else Progress()
        cfg = self.config  # with the checkpoint's data seed
        self._keep_best(progress, best_record, found is None)
        if found is not None:
            self._pending_exports(found)
            if self._already_complete(progress, found):
                return 0

        per_step = cfg.batch_size * run.accumulation
        self.steps_per_epoch = math.ceil(math.ceil(run.train_size / denv.world_size) / per_step)
        total = self.steps_per_epoch * cfg.epochs
        if cfg.max_steps:
            total = min(total, cfg.max_steps)
        self.log_every = cli.log_interval(cfg.log_interval, total)
        fields: dict[str, Any] = {
            "world": denv.world_size, "backend": denv.backend if D.active() else "none", "device": str(device),
            "local_world": denv.local_world_size, "host": socket.gethostname(), "restart": denv.restart_count,
            "task": self.task.name, "data": run.description, "model": run.model_name}
        fields.update(run.start(total))
        if run.strategy == "fsdp":
            fields["fsdp_units"] = units
        if self.compiled:  # --compile: what was compiled
            fields["compile"] = self.compiled
        fields.update({"amp": cfg.amp, "channels_last": self.channels_last if self.task.image else None,
                       "batch_per_rank": cfg.batch_size, "lr": cfg.lr, "epochs": cfg.epochs,
                       "steps_per_epoch": self.steps_per_epoch, "log_interval": self.log_every,
                       "threads": torch.get_num_threads(), "threads_from": self.threads_why,
                       "stop_check_s": self.stop_check_s, "grace_s": cfg.grace_period,
                       "pg_timeout_s": cfg.pg_timeout if D.active() else None, "run_dir": str(self.run_dir)})
        self.log.emit("DDP", "start", **fields)
        self.tel.start(cfg.to_dict(), {"world_size": denv.world_size, "local_world_size": denv.local_world_size,
                                    "backend": denv.backend if D.active() else "none", "device": device.type,
                                    "restart": denv.restart_count}, cfg.epochs)
        if found is not None:
            self.log.emit("DDP", "resume", resumed_from=str(found.path), epoch=progress.epoch,
                          epoch_step=progress.epoch_step, step=progress.step, saved_world=found.train.world_size,
                          data_seed=cfg.seed, kept=self.store.kept, changed=", ".join(changed) or "nothing")

        self.val_idx = eval_indices(run.val_size, denv.rank, denv.world_size).to(run.index_device)
        started = time.perf_counter()
        train_time = self._train(progress)
        self._done(progress, time.perf_counter() - started, train_time)
        return 0

    def _resume(self, found: checkpoint.Found, changed: list[str]) -> Progress:
        """The position, RNG and data seed of the checkpoint; `changed` gains what this run's flags change."""
        cfg, denv, train = self.config, self.denv, found.train
        if getattr(self.task_run, "schedules_lr", False):  # the saved lr is the schedule's at that step, not a flag
            changed[:] = [c for c in changed if not c.startswith("lr ")]
            old = train.config.get("lr")
            if isinstance(old, float) and old != cfg.lr:
                changed.insert(0, f"lr {engine._show(old)}->{engine._show(cfg.lr)}")
        self.store.set_rng(train.rng, denv.rank, train.world_size == denv.world_size, self.device)
        progress = Progress(train.epoch, train.epoch_step, train.step, dict(train.best), train.epoch_partial)
        # The data order belongs to the run: a resumed run shuffles with the checkpoint's seed, whatever --seed says,
        # so that the epoch in progress neither repeats nor skips samples.
        saved_seed = train.data_seed
        if saved_seed is not None and saved_seed != cfg.seed:
            self.log.warn(f"--seed {cfg.seed} ignored: this run shuffles its data with seed {saved_seed}, "
                          f"the seed of its checkpoint (a new seed would repeat some samples and skip others); "
                          f"use another --run-id for another seed")
            self.config = dataclasses.replace(cfg, seed=saved_seed)
        saved = (train.world_size, train.batch_size, train.grad_accum)
        now = (denv.world_size, cfg.batch_size, self.task_run.accumulation)
        if progress.epoch_step and saved != now:
            self.log.warn(f"checkpoint was taken mid-epoch with world x batch x accumulation "
                          f"{' x '.join(map(str, saved))}; now {' x '.join(map(str, now))}: epoch {progress.epoch + 1} "
                          f"starts again from its beginning")
            progress.epoch_step = 0
            progress.partial = None
        return progress

    def _keep_best(self, progress: Progress, record: dict[str, Any] | None, fresh: bool) -> None:
        """Never let a restart replace a better best model with a worse one: when the best model records a lower
        validation loss than the checkpoint this run resumes from (or it starts over because no checkpoint could be
        read), that record stays the one to beat."""
        if not record or (progress.best and not record["val_loss"] < progress.best["val_loss"]):
            return
        progress.best = dict(record)
        how = "starting over without a readable checkpoint" if fresh else "resuming from an older checkpoint"
        figures = ", ".join(f"{k}={record[k]:.4f}" for k in ("val_loss", "val_acc", "val_ppl")
                            if isinstance(record.get(k), (int, float)))
        self.log.warn(f"{how}: keeping {self.store.best_path} ({figures}, epoch {record.get('epoch')}) until a "
                      f"model of this run has a lower validation loss; use another --run-id for a new lineage")

    def _already_complete(self, progress: Progress, found: checkpoint.Found) -> bool:
        """A finished run started again trains nothing: say so, and how to train more or start anew."""
        cfg = self.config
        if progress.epoch < cfg.epochs and not (cfg.max_steps and progress.step >= cfg.max_steps):
            return False
        limit = (f"reached --max-steps {cfg.max_steps}" if progress.epoch < cfg.epochs
                 else f"finished {progress.epoch} of {cfg.epochs} epochs")
        best, key = progress.best, self.task.headline
        if best:
            limit += f"; best {key}={best.get(key, float('nan')):.4f} at epoch {best.get('epoch')} in {self.store.best_path}"
        if self.denv.is_main:
            print(f"[DONE] run {self.run_dir} is already complete ({limit}): nothing to train. To train it "
                  f"further raise --epochs{' or --max-steps' if cfg.max_steps else ''}; to start a new run "
                  f"pass another --run-id (or --out-dir).", flush=True)
        self.log.event("done", already_complete=True, epochs=progress.epoch, steps=progress.step,
                       best_val_loss=best.get("val_loss"), **{f"best_{key}": best.get(key)},
                       best_epoch=best.get("epoch"), latest=str(found.path))
        return True

    # ---- checkpoints and exports
    def _save(self, progress: Progress, name: str | None, is_best: bool, metrics: dict[str, Any],
              partial: dict[str, Any] | None = None, exports: list[str] | None = None) -> str | None:
        """Collective: gather every rank's RNG (and, mid-epoch, its training figures so far), then the store writes;
        every rank learns whether it worked. `name` and `is_best` derive from all-reduced figures, so every rank
        takes the same branch. Returns what the logs call the checkpoint (None when only the best model was kept)."""
        if name is None and not is_best:
            return None
        self.phase("checkpoint save")
        gathered = D.all_gather_objects({"rng": self.store.rng_state(self.device), "partial": partial})
        train = checkpoint.TrainState(
            epoch=progress.epoch, epoch_step=progress.epoch_step, step=progress.step, world_size=self.denv.world_size,
            batch_size=self.config.batch_size, grad_accum=self.task_run.accumulation,
            rng=[g["rng"] for g in gathered], data_seed=self.config.seed,
            epoch_partial=merge_partials([g["partial"] for g in gathered if g["partial"] is not None]),
            identity=self.identity, config=self.config.scalars(), best=progress.best, metrics=metrics,
            exports=exports or [])
        started = time.perf_counter()
        nbytes = self.store.save(name, self.model, self.wrapped, self.optimizer, train, is_best)
        if self.denv.is_main:
            self.tel.checkpoint(nbytes, time.perf_counter() - started)
        return self.store.display(name) if name else None

    def _checkpoint_line(self, saved: str | None, progress: Progress, reason: str) -> None:
        self.log.emit("CKPT", "checkpoint", **{self.store.key: saved}, epoch=progress.epoch + 1, step=progress.step,
                      reason=reason)

    def _preempt(self, progress: Progress, partial: dict[str, Any], note: str = "") -> NoReturn:
        reason = self.stop.reason
        name = self._save(progress, checkpoint.step_name(progress.step), False, {"reason": reason}, partial)
        self._checkpoint_line(name, progress, reason)
        raise Preempted(self._stopped_message(name, note))

    def _stopped_message(self, saved: str | None, note: str = "") -> str:
        where = self.run_dir / saved if saved else self.run_dir / checkpoint.LATEST
        return f"stopped by {self.stop.reason} after saving {where}{note}: run the same command again to resume from it"

    def _export(self, name: str, metrics: dict[str, Any]) -> None:
        self.phase("export")
        self.task_run.export(self.run_dir, name, self.wrapped, {**metrics, "identity": self.identity})

    def _pending_exports(self, found: checkpoint.Found) -> None:
        """Exports the checkpoint's run did not finish (stopped, or killed, after the checkpoint): written now from the
        same weights."""
        train = found.train
        for name in train.exports:
            held = self.task_run.exported_step(self.run_dir, name)
            if held is None or held < train.step:  # a later step's export is a later run's: left alone
                self.log.warn(f"writing {self.run_dir / name} of step {train.step}, which the run that saved "
                              f"{found.path} did not finish")
                self._export(name, train.metrics)

    # ---- the loop
    def _vote(self, progress: Progress, epoch: int, epoch_step: int, clock: VoteClock, meter: Meter,
              log_due: bool) -> bool:
        """The stop vote: the flag and the pace of every rank, and at a log interval the interval's figures, in one
        all-reduce. True when any rank wants to stop."""
        denv, device = self.denv, self.device
        now = time.perf_counter()
        stats = torch.tensor([float(self.stop.requested), now - clock.since], device=device, dtype=torch.float64)
        steps = max(1, progress.step - clock.last)
        if log_due:  # with each rank's own step and data time, for metrics.jsonl
            interval_steps = max(1, progress.step - self.interval_step)
            stats = torch.cat([stats, torch.stack([meter.i_loss, torch.tensor(
                meter.i_count, device=device, dtype=torch.float64), torch.tensor(
                float(meter.i_samples), device=device, dtype=torch.float64)]),
                telemetry.rank_slots(denv.world_size, denv.rank, [
                    (now - meter.i_started) / interval_steps, meter.i_data / interval_steps], device)])
        reduced = D.all_reduce_sum(stats).tolist()
        self.tel.pace(progress.step, epoch + 1, (now - clock.since) / steps, meter.vote_data / steps)
        meter.vote_data = 0.0
        clock.voted(progress.step, reduced[1] / denv.world_size, now)
        if log_due:
            loss_sum, count, samples, per_rank = reduced[2], reduced[3], reduced[4], reduced[5:]
            seconds = max(now - meter.i_started, 1e-9)
            loss = loss_sum / max(count, 1e-9)
            unit = self.task_run.unit
            self.log.emit("TRAIN", "train", epoch=epoch + 1, step=progress.step, epoch_step=epoch_step,
                          epoch_steps=self.steps_per_epoch, loss=loss,
                          **self.task_run.train_fields(loss, progress.step),
                          **{f"{unit}_per_s": count / seconds})
            self.log.event("ranks", epoch=epoch + 1, step=progress.step, step_s=per_rank[:denv.world_size],
                           data_s=per_rank[denv.world_size:])
            self.tel.interval(progress.step, epoch + 1, self.config.epochs, epoch_step, self.steps_per_epoch, loss,
                              samples / seconds, count / seconds if unit == "tokens" else None)
            self.interval_step = progress.step
            meter.close_interval(now)
        return bool(reduced[0])

    def _train(self, progress: Progress) -> float:
        cfg, denv, run = self.config, self.denv, self.task_run
        per_step = cfg.batch_size * run.accumulation
        train_time = 0.0
        first_step = True  # of this process
        clock = VoteClock(self.stop_check_s, progress.step)  # the first vote after one step
        self.interval_step = progress.step
        for epoch in range(progress.epoch, cfg.epochs):
            if cfg.max_steps and progress.step >= cfg.max_steps:
                break
            shard_cpu = shard_indices(run.train_size, denv.rank, denv.world_size, epoch, cfg.seed)
            shard = shard_cpu.to(run.index_device)
            start_batch = progress.epoch_step
            if cfg.record_shards:
                self._record_shard(epoch, shard_cpu, start_batch)
            self.wrapped.train()
            meter = Meter(self.device, progress.partial if start_batch else None, denv.is_main)
            clock.restart(progress.step)  # the pace of training: validation and checkpoints left out
            self.interval_step = progress.step
            progress.partial = None
            stop_at_epoch_end = False
            for i, sl in engine.batch_slices(shard.numel(), per_step, start_batch):
                # the clock only (no host sync): which step, for --phase-timeout
                if first_step:
                    self.phase("compile and first step" if self.compiled else "first step")
                    first_step = False
                else:
                    self.phase(f"step {progress.step + 1}")
                t_data = time.perf_counter()
                batch = run.fetch(shard[sl])
                t_data = time.perf_counter() - t_data
                loss_sum, count, samples = run.train_step(self.wrapped, self.optimizer, batch, progress.step)
                meter.add(loss_sum, count, samples, t_data)
                progress.step += 1
                progress.epoch_step = i + 1
                if progress.epoch_step == self.steps_per_epoch:
                    self._hook("last-step")
                at_max = cfg.max_steps is not None and progress.step >= cfg.max_steps
                log_due = progress.step % self.log_every == 0
                if (log_due or clock.due(progress.step)) and self._vote(progress, epoch, i + 1, clock, meter, log_due):
                    if progress.epoch_step == self.steps_per_epoch:
                        # the epoch's last step: finish the epoch if its validation fits the grace period, then stop
                        stop_at_epoch_end = True
                        break
                    self._preempt(progress, meter.partial())
                if progress.step in self.pause_at:
                    os.kill(os.getpid(), signal.SIGSTOP)
                if (cfg.checkpoint_steps and progress.step % cfg.checkpoint_steps == 0
                        and progress.epoch_step < self.steps_per_epoch and not at_max):
                    name = self._save(progress, checkpoint.step_name(progress.step), False, {"reason": "interval"},
                                      meter.partial())
                    self._checkpoint_line(name, progress, "every-steps")
                if at_max:
                    break
            complete = progress.epoch_step == self.steps_per_epoch
            if self.device.type == "cuda":  # once per epoch, so that the epoch's time covers its GPU work
                torch.cuda.synchronize(self.device)
            meter.finish()
            self._end_epoch(progress, epoch, complete, meter, stop_at_epoch_end)
            train_time += meter.train_seconds() - meter.offset_s  # this process's own training time (about)
            if not complete:
                break
        return train_time

    @torch.no_grad()
    def _validate(self, vote: bool) -> torch.Tensor | None:
        """This rank's validation sums [loss, correct, count]; every rank runs as many batches. With `vote`, the ranks
        vote on stopping on the training clock between batches: None when they agree to stop."""
        cfg, denv, run = self.config, self.denv, self.task_run
        batches = math.ceil(math.ceil(run.val_size / denv.world_size) / cfg.batch_size)
        self.phase("validation")
        self.wrapped.eval()
        sums = torch.zeros(3, device=self.device, dtype=torch.float64)
        clock = VoteClock(self.stop_check_s)
        started = time.perf_counter()
        try:
            for b in range(batches):
                sums += run.val_step(self.model, self.val_idx[b * cfg.batch_size:(b + 1) * cfg.batch_size])
                if b == 0:
                    self._hook("validation")
                if vote and clock.due(b + 1) and b + 1 < batches:
                    now = time.perf_counter()
                    reduced = D.all_reduce_sum(torch.tensor([float(self.stop.requested), now - clock.since],
                                                            device=self.device, dtype=torch.float64)).tolist()
                    if reduced[0]:
                        return None
                    clock.voted(b + 1, reduced[1] / denv.world_size, now)
        finally:
            self.wrapped.train()
        self.val_seconds = time.perf_counter() - started
        return sums

    def _end_epoch(self, progress: Progress, epoch: int, complete: bool, meter: Meter, stop_agreed: bool) -> None:
        """Validation over all ranks, checkpoint, [EPOCH] line, the stop vote at the epoch's end, the task's exports."""
        cfg, device = self.config, self.device
        meter.close_interval()
        if stop_agreed and not fits(self.val_seconds, cfg.grace_period):
            self._preempt(progress, meter.partial(), note=" (the resumed run validates this epoch)")
        val = self._validate(vote=not stop_agreed)
        if val is None:
            self._preempt(progress, meter.partial(), note=" (stopped during validation: the resumed run validates "
                                                          "this epoch)")
        train_seconds = max(meter.train_seconds(), 1e-9)
        stats = torch.cat([meter.epoch_sums(), val, torch.tensor([float(self.stop.requested), meter.cpu_seconds()],
                                                                 device=device, dtype=torch.float64)])
        loss_sum, count, samples, val_loss_sum, correct, val_count, stop, cpu_sum = D.all_reduce_sum(stats).tolist()
        stop = bool(stop) or stop_agreed
        val_loss, val_acc = val_loss_sum / val_count, correct / val_count
        unit = self.task_run.unit
        # An epoch resumed from a checkpoint that kept no training figures (written before they were saved)
        # has no train loss: it is left out rather than printed as 0.
        metrics = {"epoch": epoch + 1, "step": progress.step, "train_loss": loss_sum / count if count else None,
                   "val_loss": val_loss, **self.task_run.val_fields(val_loss), "val_acc": val_acc,
                   f"{unit}_per_s": count / train_seconds if count else None,
                   "train_s": round(train_seconds, 3), "cpu_s": round(cpu_sum, 3)}
        if unit != "samples":
            metrics["samples_per_s"] = samples / train_seconds if samples else None
        is_best = not progress.best or val_loss < progress.best["val_loss"]
        if is_best:
            progress.best = {"val_loss": val_loss, **self.task_run.val_fields(val_loss), "val_acc": val_acc,
                             "epoch": epoch + 1, "step": progress.step}
        if complete:
            progress.epoch, progress.epoch_step = epoch + 1, 0
            due = (epoch + 1) % cfg.checkpoint_every == 0 or epoch + 1 == cfg.epochs or stop
            name = checkpoint.epoch_name(epoch + 1) if due else None
        else:  # --max-steps ended the run inside this epoch
            name = checkpoint.step_name(progress.step)
        exports = self.task_run.exports(epoch + 1, complete and name is not None, is_best)
        saved = self._save(progress, name, is_best, metrics, meter.partial() if not complete else None,
                           exports if name is not None else [])
        self.tel.epoch(metrics, cfg.epochs)
        self.log.emit("EPOCH", "epoch", epoch=epoch + 1, epochs=cfg.epochs, step=progress.step,
                      **{k: v for k, v in metrics.items() if k not in ("epoch", "step", "samples_per_s")
                         or (k == "samples_per_s" and unit == "samples")},
                      checkpoint=saved, best=is_best)
        for i, export in enumerate(exports):
            if i == 0:
                self._hook("export")
            if not stop:  # a vote before each export: one gathers the whole model on rank 0
                stop = bool(D.all_reduce_sum(torch.tensor([float(self.stop.requested)], device=device)).item())
            if stop:
                if name is None:  # nothing records the export: it is lost, as a kill would lose it
                    self.log.warn(f"{self.run_dir / export} not written: stopped by {self.stop.reason}")
                    continue
                note = f" ({', '.join(exports[i:])} written when the run resumes)"
                self._checkpoint_line(saved, progress, self.stop.reason)
                raise Preempted(self._stopped_message(saved, note))
            self._export(export, metrics)
        if stop:
            self._checkpoint_line(saved, progress, self.stop.reason)
            raise Preempted(self._stopped_message(saved))

    def _record_shard(self, epoch: int, shard: torch.Tensor, start_batch: int) -> None:
        record = {"epoch": epoch + 1, "rank": self.denv.rank, "world_size": self.denv.world_size,
                  "count": shard.numel(), "start_batch": start_batch, "sha256": digest(shard),
                  "indices": shard.tolist()}
        path = self.run_dir / "shards" / f"epoch-{epoch + 1:04d}.rank-{self.denv.rank}.json"
        checkpoint.atomic_write(path, json.dumps(record).encode())

    def _done(self, progress: Progress, total_s: float, train_s: float) -> None:
        best = progress.best
        figures = {f"best_{k}": best.get(k) for k in ("val_loss", self.task.headline)}
        model = str(self.store.best_path) if best and self.store.best_path.exists() else None
        self.log.emit("DONE", "done", world=self.denv.world_size, epochs=progress.epoch, steps=progress.step,
                      **figures, best_epoch=best.get("epoch"), model=model,
                      latest=str(self.run_dir / checkpoint.LATEST), data=self.task_run.description,
                      train_s=round(train_s, 3), total_s=round(total_s, 3))
        self.tel.done({"best": best, "steps": progress.step, "epochs": progress.epoch, "model": model}, self.run_dir)
