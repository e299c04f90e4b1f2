"""Real torchrun on CPU: the SIGTERM vote on time within a short grace period, --pg-timeout against a hung
peer, and the CPU thread count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest
import torch

from conftest import reap
from test_trainer_resume import worker_pids
from trainer_helpers import PYTHON, ROOT, TRAIN_PY, clean_env, run, tagged, torchrun_cmd

pytestmark = pytest.mark.timeout(180)


def _pump(proc: subprocess.Popen, lines: list[tuple[float, str]]) -> threading.Thread:
    def read():
        for line in proc.stdout:
            lines.append((time.monotonic(), line))
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def _reap(proc: subprocess.Popen, pump: threading.Thread) -> None:
    """Leave nothing running: kill the launcher if it is still up, then drain its output."""
    reap(proc, drain=False)
    pump.join(5)
    proc.stdout.close()


def _wait_for(lines, prefix: str, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for t, line in list(lines):
            if line.startswith(prefix):
                return t
        time.sleep(0.02)
    raise AssertionError(f"no {prefix!r} within {timeout}s:\n" + "".join(l for _, l in lines[-40:]))


def test_sigterm_is_acted_on_within_a_grace_period_shorter_than_a_log_interval(tmp_path):
    """Grace period 6 s (TERMINATION_GRACE_PERIOD_SECONDS, as a manifest sets it), a log interval that is never
    reached and epochs of several hundred steps: the ranks still agree to stop within about a second."""
    grace = 6
    args = ["--task", "synthetic", "--samples", "131072", "--features", "32", "--batch-size", "16", "--epochs", "1",
            "--log-interval", "100000", "--out-dir", str(tmp_path), "--run-id", "grace"]
    env = clean_env(TERMINATION_GRACE_PERIOD_SECONDS=str(grace))
    proc = subprocess.Popen(torchrun_cmd(args, nproc=2), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=ROOT)
    lines: list[tuple[float, str]] = []
    pump = _pump(proc, lines)
    try:
        _wait_for(lines, "[DDP] world=", 60)
        time.sleep(2.0)  # training is under way
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        saved_at = _wait_for(lines, "[CKPT]", 60)
        code = proc.wait(timeout=60)
    finally:
        _reap(proc, pump)
    out = "".join(line for _, line in lines)
    assert code != 0, out[-3000:]
    assert saved_at - sent < grace - 1, f"checkpoint {saved_at - sent:.1f}s after SIGTERM (grace {grace}s)"
    start = [d for d in tagged(out, "DDP") if "world" in d][0]
    assert (start["grace_s"], start["stop_check_s"]) == ("6.0000", "1.0000"), start
    ckpts = [d for d in tagged(out, "CKPT") if d.get("reason") == "SIGTERM"]
    assert len(ckpts) == 1 and ckpts[0]["file"].startswith("step-"), out[-3000:]
    state = torch.load(tmp_path / "grace" / ckpts[0]["file"], weights_only=True)
    assert 0 < state["epoch_step"] < 4096 and state["epoch"] == 0
    assert json.loads((tmp_path / "grace" / "latest").read_text())["file"] == ckpts[0]["file"]


def test_pg_timeout_ends_a_rank_blocked_by_a_hung_peer(tmp_path):
    """Rank 1 is stopped (SIGSTOP: alive, holding its sockets, never answering). With --pg-timeout 3 rank 0's
    next collective fails after about 3 s and it exits 1 so that torchrun can restart the group; without it
    rank 0 would wait 30 minutes (gloo's default)."""
    args = ["--task", "synthetic", "--samples", "65536", "--features", "32", "--batch-size", "16", "--epochs", "1",
            "--log-interval", "50", "--pg-timeout", "3", "--out-dir", str(tmp_path), "--run-id", "hung"]
    proc = subprocess.Popen(torchrun_cmd(args, nproc=2), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=clean_env(), cwd=ROOT)
    lines: list[tuple[float, str]] = []
    pump = _pump(proc, lines)
    stopped = None
    try:
        _wait_for(lines, "[TRAIN] epoch=1 ", 60)
        stopped = worker_pids(proc.pid)[1]
        os.kill(stopped, signal.SIGSTOP)
        t_stop = time.monotonic()
        failed_at = _wait_for(lines, "[ERROR] rank 0: lost another worker", 60)
        assert failed_at - t_stop < 20, f"rank 0 gave up {failed_at - t_stop:.1f}s after its peer hung"
    finally:
        if stopped:
            for sig in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.kill(stopped, sig)
                except ProcessLookupError:
                    pass
        try:
            proc.wait(timeout=60)
        finally:
            _reap(proc, pump)
    out = "".join(line for _, line in lines)
    assert [d for d in tagged(out, "DDP") if "world" in d][0]["pg_timeout_s"] == "3.0000"
    assert proc.returncode != 0


def test_cpu_threads_follow_the_cpu_limit_unless_omp_num_threads_is_set(tmp_path):
    from trainer.threads import choose_threads

    cmd = [PYTHON, str(TRAIN_PY), "--samples", "64", "--features", "8", "--batch-size", "32", "--epochs", "1",
           "--out-dir", str(tmp_path)]
    env = clean_env()
    env.pop("OMP_NUM_THREADS")
    free = run(cmd + ["--run-id", "free"], timeout=60, env=env)
    assert free.returncode == 0, free.output
    start = [d for d in tagged(free.stdout, "DDP") if "world" in d][0]
    expected, why = choose_threads({}, 1)
    assert start["threads"] == str(expected) and start["threads_from"] == why, start
    pinned = run(cmd + ["--run-id", "pinned"], timeout=60, env=clean_env(OMP_NUM_THREADS="1"))
    assert pinned.returncode == 0, pinned.output
    start = [d for d in tagged(pinned.stdout, "DDP") if "world" in d][0]
    assert (start["threads"], start["threads_from"]) == ("1", "OMP_NUM_THREADS=1")
