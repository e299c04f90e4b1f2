"""The MLflow run's status (issue 35 item 5b): real 2-process torchrun runs with a local MLflow file store, read back
with MlflowClient. A complete run started again ([DONE] ... already complete, as a StatefulSet pod with
AFTER_DONE=wait is after every restart) leaves it FINISHED as it was; a refusal before training opens none."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.trainer_helpers import PYTHON, ROOT, TRAIN_PY, clean_env, run, torchrun_cmd


def mlflow_env(store: Path, **extra: str) -> dict[str, str]:
    return clean_env(MLFLOW_TRACKING_URI=f"file://{store}", MLFLOW_ALLOW_FILE_STORE="true", **extra)


def mlflow_runs(store: Path, monkeypatch, run_id: str) -> list:
    """Every MLflow run tagged with this --run-id (none when the store or the experiment does not exist)."""
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    if not store.exists():
        return []
    client = MlflowClient(tracking_uri=f"file://{store}")
    exp = client.get_experiment_by_name("ddp-train")
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`trainer.run_id` = '{run_id}'")


@pytest.mark.timeout(300)
def test_a_complete_run_started_again_leaves_its_finished_mlflow_run_alone(tmp_path, monkeypatch):
    """A pod of a StatefulSet (AFTER_DONE=wait) restarted after the end: [DONE] ... already complete, then [IDLE].
    While it waits, and after its SIGTERM, the MLflow run is the finished one, untouched (before, it was set back to
    RUNNING and stayed so)."""
    store, out = tmp_path / "mlruns", tmp_path / "out"
    env = mlflow_env(store)
    cmd = torchrun_cmd(["--task", "synthetic", "--samples", "512", "--features", "16", "--epochs", "2",
                        "--out-dir", str(out), "--run-id", "done"], nproc=2)
    res = run(cmd, timeout=200, env=env)
    assert res.returncode == 0, res.output[-3000:]
    runs = mlflow_runs(store, monkeypatch, "done")
    assert [r.info.status for r in runs] == ["FINISHED"]
    finished = runs[0]

    def unchanged() -> None:
        now = mlflow_runs(store, monkeypatch, "done")
        assert [(r.info.run_id, r.info.status, r.info.end_time) for r in now] == [
            (finished.info.run_id, "FINISHED", finished.info.end_time)]

    seen_idle = []
    proc = subprocess.Popen(cmd + ["--after-done", "wait"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=ROOT)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[IDLE]"):
                try:
                    unchanged()
                    seen_idle.append(True)
                finally:
                    proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    text = "".join(lines)
    assert "is already complete" in text and seen_idle, text[-3000:]
    unchanged()
    after = mlflow_runs(store, monkeypatch, "done")[0]
    assert after.data.params == finished.data.params and after.data.tags == finished.data.tags



def test_a_refusal_before_training_opens_no_mlflow_run(tmp_path, monkeypatch):
    """Refused at its data (exit 2) before a step: no MLflow run is created (before, one was left RUNNING)."""
    store = tmp_path / "mlruns"
    res = run([PYTHON, str(TRAIN_PY), "--task", "mnist", "--data-root", str(tmp_path / "absent"), "--out-dir",
               str(tmp_path / "out"), "--run-id", "nodata"], timeout=120, env=mlflow_env(store))
    assert res.returncode == 2 and "[ERROR] data root" in res.stderr, res.output[-3000:]
    assert mlflow_runs(store, monkeypatch, "nodata") == []
