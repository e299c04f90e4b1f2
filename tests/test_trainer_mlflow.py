"""The MLflow run's status, however the trainer ends (issue 35 item 5a, 5b): real 2-process torchrun runs with a local
MLflow file store, read back with MlflowClient. A SIGTERM stop ends the run KILLED, the resumed run carries on in it
and ends it FINISHED, a complete run started again ([DONE] ... already complete, as a StatefulSet pod with
AFTER_DONE=wait is after every restart) leaves it FINISHED as it was; a refusal during training (exit 2) and an error
end it FAILED; a refusal before training opens none."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from conftest import reap
from trainer_helpers import PYTHON, ROOT, TRAIN_PY, clean_env, run, sigterm_on, tagged, torchrun_cmd


def mlflow_env(store: Path, **extra: str) -> dict[str, str]:
    return clean_env(MLFLOW_TRACKING_URI=f"file://{store}", MLFLOW_ALLOW_FILE_STORE="true", **extra)


def mlflow_runs(store: Path, monkeypatch, run_id: str) -> list:
    """Every MLflow run tagged with this --run-id (none when the store or the experiment does not exist)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    if not store.exists():
        return []
    client = mlflow_client(store)
    exp = client.get_experiment_by_name("ddp-train")
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`trainer.run_id` = '{run_id}'")


def mlflow_client(store: Path):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"file://{store}")


TRAIN = ["--task", "synthetic", "--samples", "8192", "--features", "32", "--epochs", "2", "--batch-size", "16",
         "--log-interval", "16", "--max-steps", "96"]


@pytest.mark.timeout(300)
def test_a_stop_kills_the_mlflow_run_and_the_resume_finishes_it(tmp_path, monkeypatch):
    store, out = tmp_path / "mlruns", tmp_path / "out"
    env = mlflow_env(store)
    cmd = torchrun_cmd([*TRAIN, "--out-dir", str(out), "--run-id", "stop"], nproc=2)

    # SIGTERM to torchrun (as the kubelet sends it to the pod's torchrun): the ranks save, MLflow says KILLED
    _, lines = sigterm_on(cmd, env, "[TRAIN] epoch=1 step=32 ")
    text = "".join(lines)
    assert [d["reason"] for d in tagged(text, "CKPT")] == ["SIGTERM"], text[-3000:]
    runs = mlflow_runs(store, monkeypatch, "stop")
    assert [r.info.status for r in runs] == ["KILLED"], text[-3000:]
    killed_at = runs[0].info.end_time
    assert killed_at is not None

    # the same command again: it resumes in the same MLflow run and ends it FINISHED
    res = run(cmd, timeout=200, env=env)
    assert res.returncode == 0, res.output[-3000:]
    assert tagged(res.stdout, "DONE") and tagged(res.stdout, "DDP")[1]["resumed_from"], res.stdout[-3000:]
    runs = mlflow_runs(store, monkeypatch, "stop")
    assert [r.info.status for r in runs] == ["FINISHED"]
    finished = runs[0]
    assert finished.info.end_time >= killed_at
    assert [m.step for m in mlflow_client(store).get_metric_history(finished.info.run_id, "val_loss")] == [96]


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
        reap(proc)
        proc.stdout.close()
    text = "".join(lines)
    assert "is already complete" in text and seen_idle, text[-3000:]
    unchanged()
    after = mlflow_runs(store, monkeypatch, "done")[0]
    assert after.data.params == finished.data.params and after.data.tags == finished.data.tags



@pytest.mark.timeout(300)
def test_a_refusal_or_an_error_during_training_fails_the_mlflow_run(tmp_path, monkeypatch):
    store, out = tmp_path / "mlruns", tmp_path / "out"
    env = mlflow_env(store)

    # refused during training (exit 2 on every rank): epoch 1's checkpoint cannot be written
    (out / "refused" / "epoch-0001.pt").mkdir(parents=True)
    res = run(torchrun_cmd(["--task", "synthetic", "--samples", "512", "--features", "16", "--epochs", "2",
                            "--out-dir", str(out), "--run-id", "refused"], nproc=2), timeout=200, env=env)
    assert res.returncode != 0 and "[ERROR] cannot write checkpoint in" in res.stderr, res.output[-3000:]
    assert tagged(res.stdout, "TRAIN"), res.output[-3000:]
    assert [r.info.status for r in mlflow_runs(store, monkeypatch, "refused")] == ["FAILED"]

    # an error that is no refusal (rank 0's metrics.jsonl gone with its folder): a traceback, and FAILED
    run_dir = out / "error"
    cmd = torchrun_cmd([*TRAIN, "--out-dir", str(out), "--run-id", "error"], nproc=2)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[TRAIN] epoch=1 step=16 "):
                run_dir.rename(out / "error-moved")
                run_dir.write_text("not a folder")
        proc.wait(timeout=120)
    finally:
        reap(proc)
        proc.stdout.close()
    text = "".join(lines)
    # torchrun names whichever rank failed first as the root cause: rank 0's NotADirectoryError, or rank 1 leaving
    # because its peer crashed (seen in a full make test run); either way the run failed, and so does its MLflow run.
    assert proc.returncode != 0 and ("NotADirectoryError" in text or "remote worker crashing" in text), text[-3000:]
    assert [r.info.status for r in mlflow_runs(store, monkeypatch, "error")] == ["FAILED"], text[-3000:]


def test_a_refusal_before_training_opens_no_mlflow_run(tmp_path, monkeypatch):
    """Refused at its data (exit 2) before a step: no MLflow run is created (before, one was left RUNNING)."""
    store = tmp_path / "mlruns"
    res = run([PYTHON, str(TRAIN_PY), "--task", "mnist", "--data-root", str(tmp_path / "absent"), "--out-dir",
               str(tmp_path / "out"), "--run-id", "nodata"], timeout=120, env=mlflow_env(store))
    assert res.returncode == 2 and "[ERROR] data root" in res.stderr, res.output[-3000:]
    assert mlflow_runs(store, monkeypatch, "nodata") == []
