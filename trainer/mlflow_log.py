"""MLflow tracking from rank 0 when MLFLOW_TRACKING_URI is set: parameters, topology, per-epoch metrics, and the
best model (best.pt, or the causal-LM task's best/ folder) as an artifact. The MLflow run is named and tagged with the trainer's --run-id, so a resumed
run (a torchrun restart, a new pod) carries on with the same MLflow run instead of starting another. The run ends
FINISHED, KILLED (stopped by SIGTERM or SIGINT after saving) or FAILED (a refusal or an error during training).

Stores (mlflow-skinny, pinned in trainer/requirements.txt): a tracking server URL (http://..., the cluster's
choice: the server may keep its runs in any database) or a plain folder `file:///out/mlruns` on a volume, which
MLflow 3.17 refuses unless MLFLOW_ALLOW_FILE_STORE=true (its file store is in maintenance mode). `sqlite://` needs
the full `mlflow` package, which the image does not carry. See docs/trainer.md "MLflow".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trainer.config import RunConfig
from trainer.metrics import warn

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
DEFAULT_EXPERIMENT = "ddp-train"
RUN_ID_TAG = "trainer.run_id"
# Bounded waits for an unreachable server (MLflow's own defaults retry for minutes); the user's values win.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
EPOCH_METRICS = ("train_loss", "val_loss", "val_acc", "val_ppl", "samples_per_s", "tokens_per_s", "train_s")


class MlflowRun:
    """Rank 0's MLflow run. Constructed at start-up, it only reads (the experiment, a run tagged with this --run-id):
    the run is created, or an earlier attempt's reopened (RUNNING), when this attempt starts training (`start`), so
    a refusal before training and a complete run started again (`[DONE] ... already complete`) leave MLflow as it
    was. `end` closes what `start` opened with MLflow's own status for the outcome (RunStatus: FINISHED, KILLED,
    FAILED)."""

    def __init__(self, uri: str, run_id: str, experiment: str):
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        self.uri, self.name, self.experiment = uri, run_id, experiment
        found = self.client.get_experiment_by_name(experiment)
        self.exp_id = found.experiment_id if found else None
        runs = (self.client.search_runs([self.exp_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'",
                                        max_results=1) if self.exp_id else [])
        self.earlier: str | None = runs[0].info.run_id if runs else None  # an earlier attempt's MLflow run
        self.run_id: str | None = None  # set once this attempt has started (or reopened) it
        self.resumed = False

    def start(self, params: dict[str, Any], topology: dict[str, Any]) -> None:
        from mlflow.entities import Param, RunStatus, RunTag

        if self.earlier is not None:
            self.run_id, self.resumed = self.earlier, True
            self.client.update_run(self.run_id, status=RunStatus.to_string(RunStatus.RUNNING))
        else:
            exp_id = self.exp_id or self.client.create_experiment(self.experiment)
            self.run_id = self.client.create_run(exp_id, run_name=self.name, tags={RUN_ID_TAG: self.name}).info.run_id
        tags = [RunTag(f"topology.{k}", str(v)) for k, v in topology.items()]
        tags.append(RunTag("topology.launcher", os.environ.get("LAUNCHER", "torchrun")))
        tags.append(RunTag("topology.overlay", os.environ.get("OVERLAY", "unknown")))
        # A resumed run keeps the parameters it started with (MLflow refuses to change a logged param);
        # what this attempt ran with is in its tags and in the [DDP] line.
        logged = set() if not self.resumed else set(self.client.get_run(self.run_id).data.params)
        fresh = [Param(k, str(v)[:6000]) for k, v in sorted(params.items()) if k not in logged]
        self.client.log_batch(self.run_id, params=fresh, tags=tags)

    def interval(self, step: int, done: float, metrics: dict[str, float]) -> None:
        pass  # per-epoch figures only: the log interval is the Prometheus endpoint's

    def epoch(self, metrics: dict[str, Any], done: float) -> None:
        import time

        from mlflow.entities import Metric

        assert self.run_id is not None  # start() set it
        ts = int(time.time() * 1000)
        rows = [Metric(k, float(metrics[k]), ts, int(metrics["step"])) for k in EPOCH_METRICS
                if metrics.get(k) is not None]
        rows.append(Metric("epoch", float(metrics["epoch"]), ts, int(metrics["step"])))
        self.client.log_batch(self.run_id, metrics=rows)

    def done(self, summary: dict[str, Any], run_dir: Path) -> None:
        assert self.run_id is not None  # start() set it
        best = summary.get("best") or {}
        model = Path(summary["model"]) if summary.get("model") else None
        if model is not None and model.is_file():  # best.pt
            self.client.log_artifact(self.run_id, str(model), artifact_path="best-model")
        elif model is not None and model.is_dir():  # the causal-LM task's best/, a save_pretrained folder
            self.client.log_artifacts(self.run_id, str(model), artifact_path="best-model")
        if model is not None and model.exists():
            self.client.log_dict(self.run_id, {"run_id": self.name, **best}, "best-model/best.json")
        metrics_file = run_dir / "metrics.jsonl"
        if metrics_file.exists():
            self.client.log_artifact(self.run_id, str(metrics_file))

    def end(self, outcome: str) -> None:
        """The MLflow run's end, with MLflow's status for the trainer's outcome; nothing when this attempt never
        started training (it opened no run)."""
        from mlflow.entities import RunStatus

        if self.run_id is None:
            return
        status = {"done": RunStatus.FINISHED, "stopped": RunStatus.KILLED}.get(outcome, RunStatus.FAILED)
        self.client.set_terminated(self.run_id, RunStatus.to_string(status))


def from_env(args: RunConfig, denv: Any) -> MlflowRun | None:
    uri = (os.environ.get(TRACKING_URI_ENV) or "").strip()
    if not uri:
        return None
    if uri.startswith(("file:", "/", ".")) and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() != "true":
        warn(denv.rank, f"{TRACKING_URI_ENV}={uri} is a file store, which MLflow 3.17 refuses unless "
                        "MLFLOW_ALLOW_FILE_STORE=true: set it, or use a tracking server URL; training goes on "
                        "without MLflow")
        return None
    for k, v in HTTP_DEFAULTS.items():
        os.environ.setdefault(k, v)
    try:
        return MlflowRun(uri, args.run_id, os.environ.get(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT)
    except Exception as e:  # unreachable server, refused credentials, no mlflow installed: never fatal
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        warn(denv.rank, f"MLflow at {uri} not used ({type(e).__name__}: {first}); training goes on without it")
        return None
