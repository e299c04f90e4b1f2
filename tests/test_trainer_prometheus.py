"""The committed Grafana dashboard against a real Prometheus: Debian's `prometheus` (make setup installs it where
it can) scrapes a real 2-process torchrun run on loopback, and every PromQL expression of
components/monitoring/ddp-train-dashboard.json must return data for that run through Prometheus's HTTP API."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from tests.test_trainer_telemetry import free_port_pair
from tests.trainer_helpers import ROOT, clean_env, free_port, torchrun_cmd

DASHBOARD = ROOT / "components" / "monitoring" / "ddp-train-dashboard.json"
PROMETHEUS = shutil.which("prometheus") or ("/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)
# A CPU run has no GPU: these series exist only on CUDA devices (trainer/telemetry.py); named, so nothing else skips.
GPU_ONLY = ("trainer_gpu_memory_allocated_bytes", "trainer_gpu_memory_peak_bytes")


def dashboard_queries(run_id: str) -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"].replace("$run_id", run_id)))
    return out


def query(base: str, expr: str) -> list:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def test_dashboard_queries_have_data_from_a_scraped_run(tmp_path):
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (make setup installs Debian's `prometheus` where apt-get can run)")
    port = free_port_pair()
    web = free_port()
    run_id = "prom-run"
    (tmp_path / "prometheus.yml").write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "ddp-train", "static_configs": [
            {"targets": [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]}]}]}))
    with open(tmp_path / "prometheus.log", "w") as log:
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}"],
                                stdout=subprocess.DEVNULL, stderr=log)
    cmd = torchrun_cmd(["--task", "synthetic", "--epochs", "400", "--samples", "4096", "--batch-size", "128",
                        "--log-interval", "4", "--out-dir", str(tmp_path / "out"), "--run-id", run_id], nproc=2)
    trainer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env=clean_env(METRICS_PORT=str(port)), start_new_session=True)
    base = f"http://127.0.0.1:{web}"
    queries = dashboard_queries(run_id)
    missing: dict[str, str] = {title + ": " + expr: expr for title, expr in queries
                               if not any(g in expr for g in GPU_ONLY)}
    try:
        deadline = time.monotonic() + 180
        while missing and time.monotonic() < deadline and trainer.poll() is None:
            time.sleep(1)
            for key, expr in list(missing.items()):
                try:
                    if query(base, expr):
                        del missing[key]
                except OSError:
                    break  # Prometheus not ready yet
        running = trainer.poll() is None
        up = query(base, 'up{job="ddp-train"}')
    finally:
        if trainer.poll() is None:
            os.killpg(trainer.pid, signal.SIGTERM)
        out, err = trainer.communicate(timeout=120)
        prom.terminate()
        prom.wait(timeout=30)
    assert running, f"the run ended before every query had data:\n{err[-2000:]}"
    assert not missing, f"dashboard queries without data: {sorted(missing)}"
    assert sorted(s["value"][1] for s in up) == ["1", "1"]  # both ranks' endpoints scraped
    skipped = [expr for _, expr in queries if any(g in expr for g in GPU_ONLY)]
    assert len(skipped) == len(GPU_ONLY)  # only the GPU panels went unchecked, and they are said to
    print(f"checked {len(queries) - len(skipped)} dashboard queries; not checked on CPU: {skipped}")
