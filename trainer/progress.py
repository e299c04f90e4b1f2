"""Kubeflow Trainer's TrainJob progress from rank 0: progress percentage, ETA and metrics POSTed to the status
server the controller names in KUBEFLOW_TRAINER_SERVER_URL, so `kubectl get trainjob -o
jsonpath='{.status.trainerStatus}'` shows them.

The format is Trainer's (kubeflow/trainer v2.3.0): the body is an UpdateTrainJobStatusRequest
(pkg/apis/trainer/v1alpha1/trainjob_types.go, lines 561-612): {"trainerStatus": {"progressPercentage": int 0-100,
"estimatedRemainingSeconds": int >= 0, "metrics": [{"name": str 1-64, "value": str 1-64}] (256 at most),
"lastUpdatedTime": RFC 3339}}; the controller injects KUBEFLOW_TRAINER_SERVER_URL, KUBEFLOW_TRAINER_SERVER_CA_CERT
(a file) and KUBEFLOW_TRAINER_SERVER_TOKEN (a file: a projected service-account token that rotates, so it is read
again for every request) when its TrainJobStatus feature gate is on
(pkg/runtime/framework/plugins/trainjobstatus/trainjobstatus.go, lines 43-45); docs/user-guides/trainjob-progress.md
asks clients to post at most once every 5 seconds and never to let a failure break training.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trainer.config import RunConfig
from trainer.metrics import warn

URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
CA_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MIN_INTERVAL_S = 5.0  # the upstream guide's client-side rate limit
TIMEOUT_S = 5.0
MAX_METRICS, MAX_TEXT = 256, 64


def _value(v: Any) -> str:
    return (f"{v:.6g}" if isinstance(v, float) else str(v))[:MAX_TEXT]


def status_body(done: float, eta_s: float | None, metrics: dict[str, Any], when: datetime) -> dict[str, Any]:
    """The request body Trainer's status server decodes (UpdateTrainJobStatusRequest)."""
    status: dict[str, Any] = {"progressPercentage": max(0, min(100, int(done * 100)))}
    if eta_s is not None:
        status["estimatedRemainingSeconds"] = max(0, min(2**31 - 1, int(round(eta_s))))
    items = [{"name": k[:MAX_TEXT], "value": _value(v)} for k, v in metrics.items() if v is not None and k]
    if items:
        status["metrics"] = items[:MAX_METRICS]
    status["lastUpdatedTime"] = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"trainerStatus": status}


class TrainerProgress:
    def __init__(self, url: str, ca_file: str, token_file: str):
        self.url, self.token_file = url, Path(token_file)
        self.context = ssl.create_default_context(cafile=ca_file)
        self.started = time.monotonic()
        self.done_at_start: float | None = None
        self.last_post = float("-inf")
        self.metrics: dict[str, Any] = {}

    def post(self, done: float, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_post < MIN_INTERVAL_S:
            return
        if self.done_at_start is None:
            self.done_at_start = done
        eta = None
        gained = done - self.done_at_start
        if gained > 0:  # this attempt's pace (a resumed run's earlier work took no time here)
            eta = (now - self.started) / gained * (1 - done)
        body = json.dumps(status_body(done, eta, self.metrics, datetime.now(timezone.utc))).encode()
        token = self.token_file.read_text().strip()
        req = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        self.last_post = now
        with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=self.context) as resp:
            resp.read()

    def start(self, params: dict[str, Any], topology: dict[str, Any]) -> None:
        self.post(0.0, force=True)

    def interval(self, step: int, done: float, metrics: dict[str, float]) -> None:
        self.metrics.update(metrics, step=step)
        self.post(done)

    def epoch(self, metrics: dict[str, Any], done: float) -> None:
        self.metrics.update({k: metrics.get(k) for k in ("epoch", "step", "train_loss", "val_loss", "val_acc", "val_ppl")
                             if metrics.get(k) is not None})
        self.post(done)

    def done(self, summary: dict[str, Any], run_dir: Path) -> None:
        self.post(1.0, force=True)

    def end(self, outcome: str) -> None:
        pass  # the TrainJob's own status says how its pods ended


def from_env(args: RunConfig) -> TrainerProgress | None:
    url = (os.environ.get(URL_ENV) or "").strip()
    if not url:
        return None
    ca, token = os.environ.get(CA_ENV, ""), os.environ.get(TOKEN_ENV, "")
    missing = [n for n, v in ((CA_ENV, ca), (TOKEN_ENV, token)) if not v]
    if missing:
        warn(0, f"{URL_ENV} is set but {' and '.join(missing)} not: no TrainJob progress reports")
        return None
    try:
        return TrainerProgress(url, ca, token)
    except (OSError, ssl.SSLError) as e:
        warn(0, f"TrainJob progress not reported: CA file {ca}: {getattr(e, 'strerror', None) or e}")
        return None
