"""Unit level: the metrics endpoint's port and series, the TrainJob progress body, the run report, MLflow's
refusals; the trainer runs that use them are in tests/test_trainer_telemetry.py."""

from __future__ import annotations

import json
import socket
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from trainer import mlflow_log, progress, report, telemetry


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


@pytest.mark.parametrize("raw, local_rank, expect", [
    (None, 0, (None, None)), ("", 3, (None, None)), ("9400", 0, (9400, None)), ("9400", 7, (9407, None)),
])
def test_metrics_port_is_the_base_plus_the_local_rank(raw, local_rank, expect):
    env = {} if raw is None else {"METRICS_PORT": raw}
    assert telemetry.metrics_port(env, local_rank) == expect


@pytest.mark.parametrize("raw, local_rank", [("nine", 0), ("0", 0), ("65535", 1), ("-5", 0)])
def test_a_bad_metrics_port_is_one_reason_not_an_error(raw, local_rank):
    port, why = telemetry.metrics_port({"METRICS_PORT": raw}, local_rank)
    assert port is None and "METRICS_PORT" in why and "\n" not in why


def test_rank_0_serves_the_job_view_and_every_rank_its_own_step_time():
    p0, p1 = _free_port(), _free_port()
    cpu = torch.device("cpu")
    t0 = telemetry.Telemetry("run-7", "digits", 0, 0, 2, 1, cpu, {"METRICS_PORT": str(p0)})
    t1 = telemetry.Telemetry("run-7", "digits", 1, 0, 2, 1, cpu, {"METRICS_PORT": str(p1)})
    try:
        assert "trainer_val_loss" not in _scrape(p0).replace("# HELP trainer_val_loss", "").replace(
            "# TYPE trainer_val_loss", "")  # no value before the first validation
        for t in (t0, t1):
            t.pace(step=40, epoch=2, step_seconds=0.25, data_seconds=0.01)
        t0.interval(40, 2, 3, 10, 20, loss=0.5, samples_per_s=1234.0)
        t0.epoch({"epoch": 2, "step": 40, "val_loss": 0.75, "val_acc": 0.875}, 3)
        text0, text1 = _scrape(p0), _scrape(p1)
    finally:
        t0.close()
        t1.close()
    labels = 'rank="0",run_id="run-7",task="digits"'
    for line in (f"trainer_step{{{labels}}} 40.0", f"trainer_val_loss{{{labels}}} 0.75",
                 f"trainer_samples_per_second{{{labels}}} 1234.0", f"trainer_step_seconds{{{labels}}} 0.25",
                 f"trainer_world_size{{{labels}}} 2.0", f"trainer_restarts{{{labels}}} 1.0"):
        assert line in text0
    assert 'trainer_step_seconds{rank="1",run_id="run-7",task="digits"} 0.25' in text1
    assert "trainer_val_loss" not in text1 and "trainer_samples_per_second" not in text1
    assert "gpu_memory" not in text0  # no GPU series on a CPU run


def test_a_port_in_use_is_one_warning_and_no_endpoint(capsys):
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        t = telemetry.Telemetry("r", "synthetic", 0, 0, 1, 0, torch.device("cpu"), {"METRICS_PORT": str(port)})
    err = capsys.readouterr().err.strip().splitlines()
    assert t.endpoint is None
    assert len(err) == 1 and f"port {port}" in err[0] and "training goes on" in err[0]
    t.pace(1, 1, 0.1, 0.0)  # hooks are no-ops without an endpoint
    t.checkpoint(Path("/nonexistent"), 0.1)


def test_rank_slots_sum_to_every_ranks_figures():
    parts = [telemetry.rank_slots(3, r, [r + 1.0, 10.0 * r], torch.device("cpu")) for r in range(3)]
    total = sum(parts).tolist()
    assert total == [1.0, 2.0, 3.0, 0.0, 10.0, 20.0]


def test_an_observer_that_fails_is_dropped_with_one_line(capsys):
    class Broken:
        def epoch(self, metrics, done):
            raise ConnectionError("connection refused\nsecond line")

    t = telemetry.Telemetry("r", "synthetic", 0, 0, 1, 0, torch.device("cpu"), {})
    t.observers = [Broken()]
    t.epoch({"epoch": 1, "step": 1}, 2)
    t.epoch({"epoch": 2, "step": 2}, 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Broken stopped" in err[0] and "connection refused" in err[0]
    assert t.observers == []


# ------------------------------------------------------------------------------------------ TrainJob progress
def test_progress_body_follows_trainers_update_request():
    when = datetime(2026, 6, 12, 3, 0, 0, tzinfo=timezone.utc)
    body = progress.status_body(0.456, 3600.4, {"loss": 0.2347, "epoch": 2, "empty": None, "x" * 80: "y" * 80}, when)
    st = body["trainerStatus"]
    assert set(body) == {"trainerStatus"}
    assert st["progressPercentage"] == 45 and st["estimatedRemainingSeconds"] == 3600
    assert st["lastUpdatedTime"] == "2026-06-12T03:00:00Z"
    assert {"name": "loss", "value": "0.2347"} in st["metrics"] and {"name": "epoch", "value": "2"} in st["metrics"]
    assert all(1 <= len(m["name"]) <= 64 and 1 <= len(m["value"]) <= 64 for m in st["metrics"])
    assert all(isinstance(m["value"], str) for m in st["metrics"])
    assert progress.status_body(1.7, None, {}, when)["trainerStatus"] == {
        "progressPercentage": 100, "lastUpdatedTime": "2026-06-12T03:00:00Z"}


def test_progress_needs_its_token_and_ca(monkeypatch, capsys):
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_URL", "https://127.0.0.1:1/x")
    monkeypatch.delenv("KUBEFLOW_TRAINER_SERVER_CA_CERT", raising=False)
    monkeypatch.delenv("KUBEFLOW_TRAINER_SERVER_TOKEN", raising=False)
    assert progress.from_env(SimpleNamespace()) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "KUBEFLOW_TRAINER_SERVER_CA_CERT and KUBEFLOW_TRAINER_SERVER_TOKEN" in err[0]


# ------------------------------------------------------------------------------------------ MLflow refusals
def test_a_file_store_without_the_opt_in_is_one_warning(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file://{tmp_path}/mlruns")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    assert mlflow_log.from_env(SimpleNamespace(run_id="r"), SimpleNamespace(rank=0)) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MLFLOW_ALLOW_FILE_STORE=true" in err[0]
    assert not (tmp_path / "mlruns").exists()


def test_an_unreachable_tracking_server_is_one_warning(monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{_free_port()}")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    assert mlflow_log.from_env(SimpleNamespace(run_id="r"), SimpleNamespace(rank=0)) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MLflow at http://127.0.0.1:" in err[0] and "training goes on" in err[0]


# ------------------------------------------------------------------------------------------ report
def _metrics(folder: Path, world: int = 2, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"event": "start", "world": world, "task": "synthetic"}]
    for step in range(10, 101, 10):
        rows.append({"event": "train", "step": step, "loss": 1.0 / step, "samples_per_s": 1000.0 + step})
        rows.append({"event": "ranks", "step": step, "step_s": [0.01 * (r + 1) for r in range(world)],
                     "data_s": [0.001] * world})
        if step % 50 == 0:
            rows.append({"event": "epoch", "epoch": step // 50, "step": step, "train_loss": 1.0 / step,
                         "val_loss": 2.0 / step, "val_acc": 0.5 + step / 400, "samples_per_s": 1050.0})
    rows.append({"event": "done", "epochs": 2, "steps": 100, "best_val_loss": 0.02})
    path = folder / "metrics.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n" + extra)
    return path


def test_report_writes_html_and_pngs(tmp_path):
    _metrics(tmp_path / "run-1", extra='{"event": "train", "ste')  # a line cut short by a kill
    out, warnings = report.report(tmp_path / "run-1")
    assert out == tmp_path / "run-1" / "report.html"
    page = out.read_text()
    for png in ("loss.png", "throughput.png", "step-time.png"):
        data = (tmp_path / "run-1" / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000
        assert f'src="{png}"' in page
    assert not (tmp_path / "run-1" / "perplexity.png").exists() and "perplexity" not in page  # a classifier's run
    assert warnings == [f"{tmp_path / 'run-1' / 'metrics.jsonl'}:25: not a JSON line, skipped"]


def test_a_chart_with_nothing_to_show_is_not_drawn(tmp_path):
    """12 steps against a log interval of 50 (what an old trainer logged for a short run): no interval lines, no
    per-rank figures, one epoch: only the loss chart has a curve (train and validation loss have one point each:
    not drawn either), so no picture at all, and a picture of an earlier report goes."""
    folder = tmp_path / "short"
    folder.mkdir()
    (folder / "step-time.png").write_bytes(b"stale")
    rows = [{"event": "start", "world": 2}, {"event": "epoch", "epoch": 1, "step": 12, "train_loss": 0.9,
                                             "val_loss": 0.8, "val_acc": 0.7, "samples_per_s": 900.0},
            {"event": "done", "epochs": 1, "steps": 12, "best_val_loss": 0.8, "best_val_acc": 0.7}]
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out, _ = report.report(folder)
    assert not list(folder.glob("*.png")) and "<img" not in out.read_text()
    rows.insert(1, {"event": "epoch", "epoch": 0, "step": 6, "train_loss": 1.2, "val_loss": 1.0, "val_acc": 0.5,
                    "samples_per_s": 950.0})  # two epochs: two points of each epoch curve
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report.report(folder)
    assert sorted(p.name for p in folder.glob("*.png")) == ["loss.png", "throughput.png"]


def test_report_with_many_ranks_shows_their_spread(tmp_path):
    _metrics(tmp_path / "big", world=64)
    report.report(tmp_path / "big")
    assert (tmp_path / "big" / "step-time.png").stat().st_size > 5000


@pytest.mark.parametrize("content, message", [
    (None, "no such file"), ('{"event": "start"}\n', "no training figures"), ("garbage\n", "no training figures"),
])
def test_report_bad_input_is_one_line(tmp_path, capsys, content, message):
    if content is not None:
        (tmp_path / "metrics.jsonl").write_text(content)
    assert report.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: ") and message in err[0] and str(tmp_path) in err[0]
    assert not (tmp_path / "report.html").exists()


def test_for_folder_reports_every_run_below(tmp_path):
    _metrics(tmp_path / "pvc" / "outputs-pvc" / "run-001")
    (tmp_path / "pvc" / "other" / "run-x").mkdir(parents=True)
    (tmp_path / "pvc" / "other" / "run-x" / "metrics.jsonl").write_text("")
    lines = report.for_folder(tmp_path)
    assert lines[1] == f"report: {tmp_path / 'pvc' / 'outputs-pvc' / 'run-001' / 'report.html'}"
    assert lines[0].startswith("report: not written for") and "no training figures" in lines[0]


def test_report_of_a_causal_lm_run_draws_tokens_per_s_and_perplexity(tmp_path):
    # The causal-lm task logs tokens_per_s and val_ppl, not samples_per_s and val_acc: the throughput picture and
    # the epoch table show those, and matplotlib has no empty legend to warn about (warnings are errors here).
    folder = tmp_path / "lm"
    folder.mkdir()
    rows = [{"event": "start", "world": 2, "task": "causal-lm"}]
    for step in range(10, 61, 10):
        rows.append({"event": "train", "step": step, "loss": 6.0 - step / 100, "ppl": 400.0, "tokens_per_s": 9000.0})
        if step % 30 == 0:
            rows.append({"event": "epoch", "epoch": step // 30, "step": step, "train_loss": 6.0, "val_loss": 5.9,
                         "val_ppl": 365.0, "tokens_per_s": 9100.0})
    rows.append({"event": "done", "epochs": 2, "steps": 60, "best_val_loss": 5.9, "best_val_ppl": 365.0})
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out, warnings = report.report(folder)
    page = out.read_text()
    assert warnings == [] and (folder / "throughput.png").stat().st_size > 5000
    assert "<th>tokens_per_s</th>" in page and "<th>val_ppl</th>" in page and "<th>best_val_ppl</th>" in page
    assert "samples_per_s" not in page and "val_acc" not in page
    # the perplexity curve: per log interval and per epoch
    assert (folder / "perplexity.png").stat().st_size > 5000 and 'src="perplexity.png"' in page


def test_a_short_run_logs_often_enough_for_its_report(tmp_path, capsys):
    """12 steps without --log-interval (the kind-cpu simulation's run: the default of 50 gave it no interval line and
    an empty step-time chart): it logs every step, and its report draws every curve a classifier has."""
    from trainer import cli, train

    assert [cli.log_interval(None, n) for n in (12, 69, 999, 1000, 5000)] == [1, 3, 49, 50, 50]
    assert cli.log_interval(7, 12) == 7  # a given interval is kept
    assert train.main(["--samples", "384", "--features", "8", "--batch-size", "32", "--epochs", "1",
                       "--out-dir", str(tmp_path), "--run-id", "short"]) == 0
    events = [json.loads(line) for line in (tmp_path / "short" / "metrics.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "ranks"] == list(range(1, 13))
    report.report(tmp_path / "short")
    assert sorted(p.name for p in (tmp_path / "short").glob("*.png")) == ["loss.png", "step-time.png",
                                                                          "throughput.png"]
