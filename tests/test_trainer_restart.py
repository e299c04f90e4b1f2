"""A restart never loses the better model; Ctrl-C saves like SIGTERM; SIGTERM to torchrun saves, and the wrapper ends
on the workers' one-line reason; a failed launch ends on its one-line reason."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from conftest import reap
from trainer_helpers import PYTHON, ROOT, TRAIN_PY, clean_env, run, sigterm_on, tagged, torchrun_cmd

LAUNCH = [PYTHON, "-m", "trainer.launch"]


def plain(out: Path, run_id: str, epochs: int) -> list[str]:
    return [PYTHON, str(TRAIN_PY), "--samples", "512", "--features", "16", "--batch-size", "32", "--epochs", str(epochs),
            "--log-interval", "4", "--out-dir", str(out), "--run-id", run_id]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.timeout(90)
def test_starting_over_without_a_readable_checkpoint_keeps_the_better_best_pt(tmp_path):
    first = run(plain(tmp_path, "r", epochs=4), timeout=60)
    assert first.returncode == 0, first.output
    run_dir = tmp_path / "r"
    best_before, recorded = sha(run_dir / "best.pt"), tagged(first.stdout, "DONE")[0]
    for p in run_dir.glob("epoch-*.pt"):  # every epoch checkpoint damaged: the trainer has to start over
        p.write_bytes(p.read_bytes()[:1000])

    again = run(plain(tmp_path, "r", epochs=1), timeout=60)
    assert again.returncode == 0, again.output
    epoch = tagged(again.stdout, "EPOCH")[0]
    assert float(epoch["val_loss"]) > float(recorded["best_val_loss"]) and epoch["best"] == "False"
    assert sha(run_dir / "best.pt") == best_before, "the epoch-1 model replaced a better best.pt"
    assert (f"[WARN] starting over without a readable checkpoint: keeping {run_dir / 'best.pt'} "
            f"(val_loss={float(recorded['best_val_loss']):.4f}") in again.stderr
    done = tagged(again.stdout, "DONE")[0]
    assert (done["best_val_loss"], done["best_epoch"]) == (recorded["best_val_loss"], recorded["best_epoch"])


@pytest.mark.timeout(90)
def test_a_model_that_beats_the_kept_best_replaces_it(tmp_path):
    first = run(plain(tmp_path, "r", epochs=1), timeout=60)
    assert first.returncode == 0, first.output
    run_dir = tmp_path / "r"
    best_before = sha(run_dir / "best.pt")
    (run_dir / "epoch-0001.pt").write_bytes(b"garbage")
    again = run(plain(tmp_path, "r", epochs=3), timeout=60)
    assert again.returncode == 0, again.output
    assert tagged(again.stdout, "EPOCH")[0]["best"] == "False"  # the same epoch 1 again: not lower than the record
    assert any(d["best"] == "True" for d in tagged(again.stdout, "EPOCH")[1:])
    assert sha(run_dir / "best.pt") != best_before
    assert torch.load(run_dir / "best.pt", weights_only=True)["epoch"] == int(tagged(again.stdout, "DONE")[0]["best_epoch"])


@pytest.mark.timeout(150)
def test_ctrl_c_saves_a_checkpoint_like_sigterm(tmp_path):
    """Ctrl-C reaches torchrun (its workers run in their own sessions); torchrun forwards SIGINT to them."""
    cmd = LAUNCH + torchrun_cmd(["--task", "synthetic", "--samples", "8192", "--features", "32", "--epochs", "2",
                                 "--batch-size", "16", "--log-interval", "16", "--out-dir", str(tmp_path),
                                 "--run-id", "ctrl-c"], nproc=2)[1:]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(), cwd=ROOT)
    lines, deadline = [], time.monotonic() + 120
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[TRAIN] epoch=1 step=32 "):
                proc.send_signal(signal.SIGINT)
            assert time.monotonic() < deadline, "".join(lines[-40:])
        proc.wait(timeout=30)
    finally:
        reap(proc)
        proc.stdout.close()
    out = "".join(lines)
    assert proc.returncode == 128 + signal.SIGINT, out[-3000:]
    ckpts = [d for d in tagged(out, "CKPT") if d.get("reason") == "SIGINT"]
    assert len(ckpts) == 1, out[-3000:]
    pointer = json.loads((tmp_path / "ctrl-c" / "latest").read_text())
    assert pointer["file"] == ckpts[0]["file"] and pointer["step"] == int(ckpts[0]["step"])
    assert "Traceback" not in out
    assert lines[-1].startswith("[ERROR] torchrun stopped by SIGINT") and "run the same command again" in lines[-1]


@pytest.mark.timeout(250)
def test_sigterm_to_torchrun_saves_and_the_wrapper_ends_on_the_workers_reason(tmp_path):
    """SIGTERM to torchrun: its workers save. Plain torchrun (the pods' command) then ends with its own
    SignalException, a traceback and exit 1, whatever the workers did (torch 2.13: nothing a worker does changes
    that, see trainer/launch.py); `python -m trainer.launch` ends on one line, the workers' own reason (the
    checkpoint saved, how to resume), and exit 143."""
    args = ["--task", "synthetic", "--samples", "8192", "--features", "32", "--epochs", "2", "--batch-size", "16",
            "--log-interval", "16", "--out-dir", str(tmp_path)]
    for launcher, run_id in ((None, "plain"), (LAUNCH, "wrapped")):
        cmd = torchrun_cmd([*args, "--run-id", run_id], nproc=2)
        code, lines = sigterm_on(cmd if launcher is None else launcher + cmd[1:], clean_env(), "[TRAIN] ", timeout=120)
        out = "".join(lines)
        ckpts = [d for d in tagged(out, "CKPT") if d.get("reason") == "SIGTERM"]
        assert len(ckpts) == 1, out[-3000:]
        pointer = json.loads((tmp_path / run_id / "latest").read_text())
        assert pointer["file"] == ckpts[0]["file"], out[-3000:]
        saved = tmp_path / run_id / ckpts[0]["file"]
        if launcher is None:  # torch's behaviour, as docs/rules.md (RESTART001, RESTART002) describes it
            assert code == 1 and "SignalException: Process" in out and "Traceback" in out, out[-3000:]
            continue
        assert code == 128 + signal.SIGTERM, out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        assert lines[-1].strip() == (f"[ERROR] torchrun stopped by SIGTERM; rank 0: stopped by SIGTERM after saving "
                                     f"{saved}: run the same command again to resume from it"), lines[-3:]


@pytest.mark.timeout(60)
def test_ctrl_c_in_a_world_of_one_saves_too(tmp_path):
    cmd = [PYTHON, str(TRAIN_PY), "--samples", "65536", "--features", "32", "--batch-size", "16", "--epochs", "1",
           "--log-interval", "8", "--out-dir", str(tmp_path), "--run-id", "one"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(), cwd=ROOT)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[TRAIN] epoch=1 step=16 "):
                proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        reap(proc)
        proc.stdout.close()
    out = "".join(lines)
    assert proc.returncode == 143, out[-2000:]
    assert [d["reason"] for d in tagged(out, "CKPT")] == ["SIGINT"] and "KeyboardInterrupt" not in out
    assert (tmp_path / "one" / "latest").exists()


@pytest.mark.timeout(120)
def test_a_failed_launch_ends_on_the_workers_one_line_reason(tmp_path):
    args = ["--task", "mnist", "--data-root", str(tmp_path / "absent"), "--out-dir", str(tmp_path)]
    proc = subprocess.run(LAUNCH + torchrun_cmd(args, nproc=2)[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=clean_env(), cwd=ROOT, timeout=100)
    lines = proc.stdout.strip().splitlines()
    reason = f"[ERROR] data root {tmp_path / 'absent'} does not exist: mount the data volume there or pass --data-root"
    assert proc.returncode == 2, proc.stdout[-3000:]
    # both ranks refuse the same input at once: torchrun names whichever failed first (its error files' timestamps)
    assert lines[-1] == reason and lines[-2] in [
        f"[FAILED] torchrun: rank 0 exited 2; rank 1 exited 2 (root cause: rank {r})" for r in (0, 1)], lines[-2:]
    assert "Traceback" not in proc.stdout and "ChildFailedError" not in proc.stdout

    # Plain torchrun still prints its box, but with the worker's reason in place of a link to the docs.
    plain_run = run(torchrun_cmd(args, nproc=2), timeout=100)
    assert plain_run.returncode != 0
    assert f"traceback : {reason[len('[ERROR] '):]}" in plain_run.stderr
