"""A real 2-process torchrun run watched from outside: its Prometheus endpoints scraped while it trains, its MLflow
run read back from a local store with MlflowClient, its TrainJob progress received by a local HTTPS server that
checks every request against Kubeflow Trainer's format; and a run whose every observer is unreachable trains on."""

from __future__ import annotations

import json
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.trainer_helpers import ROOT, clean_env, metrics, torchrun_cmd

from conftest import reap

STATUS_PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/ddp-train/status"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.test-token.sig"


def free_port_pair() -> int:
    """A port p with p+1 also free (METRICS_PORT for two local ranks)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p < 65535:
            try:
                with socket.socket() as a, socket.socket() as b:
                    a.bind(("0.0.0.0", p))
                    b.bind(("0.0.0.0", p + 1))
                return p
            except OSError:
                continue
    raise RuntimeError("no two consecutive free ports")


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
        text = r.read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(trainer_\w+)\{[^}]*\} (\S+)$", text, re.M)}


def self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "tls.crt", folder / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def check_request(handler: BaseHTTPRequestHandler, body: bytes) -> list[str]:
    """What Trainer's status server (v2.3.0 pkg/statusserver/server.go) and the TrainerStatus CRD validation
    (pkg/apis/trainer/v1alpha1/trainjob_types.go) would refuse."""
    errors = []
    if handler.path != STATUS_PATH:
        errors.append(f"path {handler.path}")
    if handler.headers.get("Authorization") != f"Bearer {TOKEN}":
        errors.append("no bearer token")
    if len(body) > 1 << 16:
        errors.append("body over 64 kB")
    try:
        doc = json.loads(body)
    except ValueError:
        return errors + ["not JSON"]
    if set(doc) != {"trainerStatus"}:
        return errors + [f"keys {sorted(doc)}"]
    st = doc["trainerStatus"]
    allowed = {"progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime"}
    if set(st) - allowed:
        errors.append(f"unknown fields {sorted(set(st) - allowed)}")
    if "lastUpdatedTime" not in st:
        errors.append("lastUpdatedTime is required when trainerStatus is present")
    else:
        datetime.strptime(st["lastUpdatedTime"], "%Y-%m-%dT%H:%M:%SZ")
    p = st.get("progressPercentage")
    if p is not None and not (isinstance(p, int) and 0 <= p <= 100):
        errors.append(f"progressPercentage {p!r}")
    e = st.get("estimatedRemainingSeconds")
    if e is not None and not (isinstance(e, int) and 0 <= e < 2**31):
        errors.append(f"estimatedRemainingSeconds {e!r}")
    ms = st.get("metrics", [])
    if not isinstance(ms, list) or len(ms) > 256:
        errors.append("metrics not a list of at most 256")
    for m in ms:
        if set(m) != {"name", "value"} or not all(isinstance(m[k], str) and 1 <= len(m[k]) <= 64 for k in m):
            errors.append(f"metric {m!r}")
    return errors


@pytest.fixture
def status_server(tmp_path):
    cert, key = self_signed(tmp_path)
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            errors = check_request(self, body)
            received.append({"errors": errors, "body": json.loads(body) if not errors else body.decode()})
            self.send_response(422 if errors else 200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if not errors else b'{"status": "Failure"}')

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    yield {"url": f"https://127.0.0.1:{server.server_address[1]}{STATUS_PATH}", "ca": str(cert),
           "token": str(token), "received": received}
    server.shutdown()
    server.server_close()


def test_a_watched_run_serves_metrics_logs_to_mlflow_and_reports_progress(tmp_path, status_server, monkeypatch):
    port = free_port_pair()
    store = tmp_path / "mlruns"
    env = clean_env(METRICS_PORT=str(port), MLFLOW_TRACKING_URI=f"file://{store}", MLFLOW_ALLOW_FILE_STORE="true",
                    KUBEFLOW_TRAINER_SERVER_URL=status_server["url"],
                    KUBEFLOW_TRAINER_SERVER_CA_CERT=status_server["ca"],
                    KUBEFLOW_TRAINER_SERVER_TOKEN=status_server["token"], LAUNCHER="indexed-job",
                    OVERLAY="kind-cpu/indexed-job")
    epochs = 40
    cmd = torchrun_cmd(["--task", "synthetic", "--epochs", str(epochs), "--samples", "4096", "--batch-size", "128",
                        "--log-interval", "4", "--out-dir", str(tmp_path / "out"), "--run-id", "run-042"], nproc=2)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    seen0: dict[str, float] = {}
    seen1: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            for p, seen in ((port, seen0), (port + 1, seen1)):
                try:
                    seen.update(scrape(p))
                except OSError:
                    pass
            if "trainer_val_loss" in seen0 and "trainer_step_seconds" in seen1 and "trainer_checkpoint_bytes" in seen0:
                break
            time.sleep(0.2)
        out, err = proc.communicate(timeout=240)
    finally:
        reap(proc)
    assert proc.returncode == 0, err[-3000:]
    assert "[WARN]" not in err, err
    # Prometheus: rank 0 the job's view, rank 1 its own pace only
    for name in ("trainer_step", "trainer_epoch", "trainer_train_loss", "trainer_val_loss", "trainer_val_accuracy",
                 "trainer_samples_per_second", "trainer_checkpoint_save_seconds", "trainer_checkpoint_bytes",
                 "trainer_restarts", "trainer_world_size", "trainer_step_seconds", "trainer_data_seconds"):
        assert name in seen0, (name, seen0)
    assert seen0["trainer_world_size"] == 2 and seen0["trainer_checkpoint_bytes"] > 1000
    assert seen1["trainer_step_seconds"] > 0 and "trainer_val_loss" not in seen1
    assert "trainer_tokens_per_second" not in seen0  # a task that counts samples only (causal-lm: test_trainer_lm)
    # metrics.jsonl: each log interval has every rank's step and data time
    run_dir = tmp_path / "out" / "run-042"
    ranks = [e for e in metrics(run_dir) if e["event"] == "ranks"]
    assert ranks and all(len(e["step_s"]) == 2 and len(e["data_s"]) == 2 and min(e["step_s"]) > 0 for e in ranks)

    # MLflow, read back
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=f"file://{store}")
    exp = client.get_experiment_by_name("ddp-train")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`trainer.run_id` = 'run-042'")
    assert len(runs) == 1
    run = runs[0]
    assert run.info.run_name == "run-042" and run.info.status == "FINISHED"
    assert run.data.params["task"] == "synthetic" and run.data.params["epochs"] == str(epochs)
    assert run.data.tags["topology.world_size"] == "2" and run.data.tags["topology.launcher"] == "indexed-job"
    assert run.data.tags["topology.overlay"] == "kind-cpu/indexed-job"
    history = client.get_metric_history(run.info.run_id, "val_loss")
    epoch_lines = [e for e in metrics(run_dir) if e["event"] == "epoch"]
    assert [m.value for m in history] == pytest.approx([e["val_loss"] for e in epoch_lines])
    assert [m.step for m in history] == [e["step"] for e in epoch_lines]
    arts = {a.path for a in client.list_artifacts(run.info.run_id, "best-model")}
    assert arts == {"best-model/best.pt", "best-model/best.json"}
    local = Path(client.download_artifacts(run.info.run_id, "best-model/best.pt", str(tmp_path / "dl")))
    assert local.read_bytes() == (run_dir / "best.pt").read_bytes()

    # TrainJob progress: every request valid, the last one 100 %
    received = status_server["received"]
    assert received and all(not r["errors"] for r in received), received
    pct = [r["body"]["trainerStatus"]["progressPercentage"] for r in received]
    assert pct[0] == 0 and pct[-1] == 100 and pct == sorted(pct)
    names = {m["name"] for m in received[-1]["body"]["trainerStatus"].get("metrics", [])}
    assert {"val_loss", "train_loss"} <= names


def test_unreachable_observers_and_a_taken_port_are_one_line_each(tmp_path):
    port = free_port_pair()
    closed = free_port_pair()
    token = tmp_path / "token"
    token.write_text(TOKEN)
    ca, _ = self_signed(tmp_path)
    env = clean_env(METRICS_PORT=str(port), MLFLOW_TRACKING_URI=f"http://127.0.0.1:{closed}",
                    KUBEFLOW_TRAINER_SERVER_URL=f"https://127.0.0.1:{closed + 1}{STATUS_PATH}",
                    KUBEFLOW_TRAINER_SERVER_CA_CERT=str(ca), KUBEFLOW_TRAINER_SERVER_TOKEN=str(token))
    cmd = torchrun_cmd(["--task", "synthetic", "--epochs", "2", "--samples", "1024", "--out-dir",
                        str(tmp_path / "out"), "--run-id", "r"], nproc=2)
    with socket.socket() as taken:  # rank 1's port
        taken.bind(("0.0.0.0", port + 1))
        taken.listen()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[DONE]" in proc.stdout
    warns = [line for line in proc.stderr.splitlines() if line.startswith("[WARN]")]
    assert len(warns) == 3, warns
    assert any(w.startswith("[WARN] rank 1: metrics endpoint on port") for w in warns)
    assert any("MLflow at http://127.0.0.1" in w for w in warns)
    assert any("TrainerProgress stopped" in w for w in warns)
    assert "Traceback" not in proc.stderr
