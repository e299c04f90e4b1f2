"""What a run tells the world while it trains: a Prometheus endpoint on every rank (METRICS_PORT), MLflow tracking
on rank 0 (MLFLOW_TRACKING_URI) and Kubeflow Trainer's TrainJob progress on rank 0 (KUBEFLOW_TRAINER_SERVER_URL).

The training loop (trainer/loop.py) calls one `Telemetry` object at a handful of points (start, each stop vote, each log interval, each
epoch, each checkpoint, the end); each observer is off unless its variable is set, and none can stop training:
a port in use, an unreachable server or a refused request is one warning line, then the run goes on without it.

Ports: local rank r serves on METRICS_PORT + r (a pod with 8 processes uses METRICS_PORT..METRICS_PORT+7; the
bases declare the container ports, the monitoring component's PodMonitor scrapes them). Rank 0 serves the job's
view (step, epoch, loss, validation, samples/s and for causal-lm tokens/s, checkpoints, restarts, world size); every rank serves its own step
time, data-loading time and, on a GPU, memory. See docs/trainer.md "Watching a run".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import torch

from trainer.config import RunConfig
from trainer.metrics import warn

METRICS_PORT_ENV = "METRICS_PORT"
PREFIX = "trainer_"
LABELS = ("run_id", "task", "rank")

# name -> (help, served by: "job" = rank 0 only, "rank" = every rank)
GAUGES: dict[str, tuple[str, str]] = {
    "step": ("optimiser steps done in total", "job"),
    "epoch": ("epoch in progress (1-based)", "job"),
    "epochs": ("epochs this run trains in total", "job"),
    "train_loss": ("mean training loss over the last log interval, all ranks", "job"),
    "val_loss": ("validation loss of the last completed epoch", "job"),
    "val_accuracy": ("validation accuracy of the last completed epoch", "job"),
    "samples_per_second": ("training samples per second over the last log interval, all ranks (causal-lm: blocks "
                           "of --seq-len tokens)", "job"),
    "tokens_per_second": ("causal-lm: training tokens per second over the last log interval, all ranks (the [TRAIN] "
                          "line's tokens/s)", "job"),
    "checkpoint_save_seconds": ("seconds the last checkpoint took (gather, serialise, write, fsync)", "job"),
    "checkpoint_bytes": ("size of the last checkpoint written", "job"),
    "restarts": ("torchrun restarts of this worker group (TORCHELASTIC_RESTART_COUNT)", "job"),
    "world_size": ("processes in the job", "job"),
    "step_seconds": ("this rank's mean wall time per step since the previous stop vote", "rank"),
    "data_seconds": ("this rank's mean time per step spent fetching its batch", "rank"),
    "gpu_memory_allocated_bytes": ("this rank's GPU memory allocated by tensors (torch.cuda.memory_allocated)", "rank"),
    "gpu_memory_peak_bytes": ("this rank's peak GPU memory allocated (torch.cuda.max_memory_allocated)", "rank"),
}


def metrics_port(env: Mapping[str, str], local_rank: int) -> tuple[int | None, str | None]:
    """(port, None) for this local rank, (None, None) when METRICS_PORT is unset or empty, (None, why) when
    it is not a usable port."""
    raw = (env.get(METRICS_PORT_ENV) or "").strip()
    if not raw:
        return None, None
    try:
        base = int(raw)
    except ValueError:
        return None, f"{METRICS_PORT_ENV}={raw!r} is not a port number: no metrics endpoint"
    port = base + local_rank
    if not 1 <= base or not port <= 65535:
        return None, (f"{METRICS_PORT_ENV}={raw} + local rank {local_rank} = {port} is not a port in 1-65535: "
                      "no metrics endpoint")
    return port, None


class Endpoint:
    """This process's Prometheus metrics and their HTTP server (a daemon thread of prometheus_client).

    A series appears on its first value: no validation loss of 0 before the first validation."""

    def __init__(self, port: int, labels: dict[str, str], job_view: bool, gpu: bool):
        from prometheus_client import CollectorRegistry, Gauge, start_http_server

        self.registry = CollectorRegistry(auto_describe=True)
        self.labels = labels
        self.gauges: dict[str, Any] = {}
        self.children: dict[str, Any] = {}
        for name, (help_text, scope) in GAUGES.items():
            if (scope == "job" and not job_view) or (name.startswith("gpu_") and not gpu):
                continue
            self.gauges[name] = Gauge(PREFIX + name, help_text, list(LABELS), registry=self.registry)
        self.server, self.thread = start_http_server(port, registry=self.registry)
        self.port = port

    def set(self, name: str, value: float | None) -> None:
        if value is None:
            return
        child = self.children.get(name)
        if child is None:
            gauge = self.gauges.get(name)
            if gauge is None:
                return
            child = self.children[name] = gauge.labels(**self.labels)
        child.set(value)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Telemetry:
    """The hooks train.py calls; every method is cheap when its observers are off."""

    def __init__(self, run_id: str, task: str, rank: int, local_rank: int, world_size: int, restarts: int,
                 device: torch.device, env: Mapping[str, str] | None = None):
        env = os.environ if env is None else env
        self.rank, self.device = rank, device
        self.endpoint: Endpoint | None = None
        self.observers: list[Any] = []  # rank 0's MLflow and Trainer-progress reporters
        self.gpu = device.type == "cuda"
        port, problem = metrics_port(env, local_rank)
        if problem:
            warn(rank, problem)
        elif port is not None:
            try:
                self.endpoint = Endpoint(port, {"run_id": run_id, "task": task, "rank": str(rank)}, rank == 0,
                                         self.gpu)
            except OSError as e:
                warn(rank, f"metrics endpoint on port {port} not started ({e.strerror or e}); training goes on "
                           "without it")
            except ImportError as e:
                warn(rank, f"metrics endpoint not started: {e}; training goes on without it")
        if self.endpoint is not None:
            self.endpoint.set("world_size", world_size)
            self.endpoint.set("restarts", restarts)

    @classmethod
    def from_trainer(cls, args: RunConfig, denv: Any, device: torch.device) -> "Telemetry":
        tel = cls(args.run_id, args.task, denv.rank, denv.local_rank, denv.world_size, denv.restart_count, device)
        if denv.is_main:
            from trainer import mlflow_log, progress

            tel.observers = [o for o in (mlflow_log.from_env(args, denv), progress.from_env(args)) if o is not None]
        return tel

    @property
    def on(self) -> bool:
        return self.endpoint is not None or bool(self.observers)

    def _notify(self, method: str, *a: Any) -> None:
        for observer in list(self.observers):
            try:
                getattr(observer, method)(*a)
            except Exception as e:  # an observer never stops training: one line, then it is dropped
                warn(self.rank, f"{type(observer).__name__} stopped after an error ({type(e).__name__}: "
                                f"{str(e).splitlines()[0][:200] if str(e) else ''}); training goes on without it")
                self.observers.remove(observer)

    # ---- hooks
    def start(self, params: dict[str, Any], topology: dict[str, Any], epochs: int) -> None:
        if self.endpoint is not None:
            self.endpoint.set("epochs", epochs)
        self._notify("start", params, topology)

    def pace(self, step: int, epoch: int, step_seconds: float, data_seconds: float) -> None:
        """At each stop vote, on every rank: this rank's own mean step and data time since the previous vote."""
        ep = self.endpoint
        if ep is None:
            return
        ep.set("step", step)
        ep.set("epoch", epoch)
        ep.set("step_seconds", step_seconds)
        ep.set("data_seconds", data_seconds)
        if self.gpu:
            ep.set("gpu_memory_allocated_bytes", torch.cuda.memory_allocated(self.device))
            ep.set("gpu_memory_peak_bytes", torch.cuda.max_memory_allocated(self.device))

    def interval(self, step: int, epoch: int, epochs: int, epoch_step: int, epoch_steps: int, loss: float,
                 samples_per_s: float, tokens_per_s: float | None = None) -> None:
        """At each log interval, rank 0's all-reduced figures; `tokens_per_s` for a task that counts tokens
        (causal-lm: the [TRAIN] line's tokens/s), None for the others."""
        if self.endpoint is not None:
            self.endpoint.set("train_loss", loss)
            self.endpoint.set("samples_per_second", samples_per_s)
            self.endpoint.set("tokens_per_second", tokens_per_s)
        if self.observers:
            done = (epoch - 1 + epoch_step / max(1, epoch_steps)) / max(1, epochs)
            figures = {"train_loss": loss, "samples_per_s": samples_per_s}
            if tokens_per_s is not None:
                figures["tokens_per_s"] = tokens_per_s
            self._notify("interval", step, done, figures)

    def epoch(self, metrics: dict[str, Any], epochs: int) -> None:
        if self.endpoint is not None:
            self.endpoint.set("val_loss", metrics.get("val_loss"))
            self.endpoint.set("val_accuracy", metrics.get("val_acc"))
        if self.observers:
            self._notify("epoch", metrics, metrics["epoch"] / max(1, epochs))

    def checkpoint(self, nbytes: int | None, seconds: float) -> None:
        if self.endpoint is None or nbytes is None:
            return
        self.endpoint.set("checkpoint_save_seconds", seconds)
        self.endpoint.set("checkpoint_bytes", nbytes)

    def done(self, summary: dict[str, Any], run_dir: Path) -> None:
        self._notify("done", summary, run_dir)

    def end(self, outcome: str) -> None:
        """However the run ends (trainer/train.py): "done", "stopped" (SIGTERM or SIGINT, after saving) or "failed"
        (a refusal, a lost peer, any other error). An observer that recorded nothing of this attempt leaves it."""
        self._notify("end", outcome)

    def close(self) -> None:
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None


def rank_slots(world_size: int, rank: int, values: list[float], device: torch.device) -> torch.Tensor:
    """A tensor of len(values) x world_size zeros with this rank's values in its column: summed over the ranks
    (the log interval's all-reduce), it holds every rank's figures, e.g. step time per rank for metrics.jsonl."""
    slots = torch.zeros(len(values), world_size, device=device, dtype=torch.float64)
    slots[:, rank] = torch.tensor(values, dtype=torch.float64)
    return slots.flatten()

