"""What the trainer does for a controller around it: after a complete run, under AFTER_DONE=wait, it stays up doing
nothing until SIGTERM and then exits 0 (a StatefulSet restarts a container that exits, restartPolicy Always, and
would run a finished run again); under PAUSE_AT_STEPS (make simulate's step faults) every rank stops itself after
those steps until it is continued. Real processes of the trainer, a world of one."""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import reap
from trainer_helpers import PYTHON, ROOT, TRAIN_PY, clean_env

SMALL = ["--samples", "512", "--features", "16", "--batch-size", "64", "--epochs", "1", "--log-interval", "1"]


def start(tmp_path: Path, **env: str) -> subprocess.Popen[str]:
    cmd = [PYTHON, str(TRAIN_PY), *SMALL, "--out-dir", str(tmp_path), "--run-id", "r"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(**env),
                            cwd=ROOT)


def read_until(proc: subprocess.Popen[str], prefix: str) -> list[str]:
    lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line)
        if line.startswith(prefix):
            return lines
    raise AssertionError("".join(lines)[-3000:])


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.timeout(180)
def test_after_a_complete_run_it_waits_for_sigterm_then_exits_0(tmp_path):
    for attempt in ("trains", "finds the run complete"):
        proc = start(tmp_path, AFTER_DONE="wait")
        try:
            lines = read_until(proc, "[IDLE] run complete")
            time.sleep(1)
            assert proc.poll() is None, "".join(lines)  # still up: the controller sees a running container
            proc.send_signal(signal.SIGTERM)
            out = "".join(lines) + proc.communicate(timeout=60)[0]
        finally:
            reap(proc)
        assert proc.returncode == 0, (attempt, out[-2000:])
        assert ("already complete" in out) == (attempt == "finds the run complete"), out[-2000:]
    # the default still exits at once
    proc = start(tmp_path)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0 and "already complete" in out and "[IDLE]" not in out, out[-2000:]


@pytest.mark.timeout(180)
def test_pause_at_steps_stops_every_rank_after_that_step(tmp_path):
    proc = start(tmp_path, PAUSE_AT_STEPS="3")
    try:
        lines = read_until(proc, "[TRAIN] epoch=1 step=3 ")
        end = time.monotonic() + 30
        while state(proc.pid) != "T" and time.monotonic() < end:
            time.sleep(0.05)
        assert state(proc.pid) == "T"
        time.sleep(0.5)
        progress = [ln for ln in lines if ln.startswith("[TRAIN]")]
        assert progress[-1].startswith("[TRAIN] epoch=1 step=3 ")
        proc.send_signal(signal.SIGCONT)
        out = "".join(lines) + proc.communicate(timeout=120)[0]
    finally:
        reap(proc)
    assert proc.returncode == 0 and "[TRAIN] epoch=1 step=4 " in out and "[DONE]" in out, out[-2000:]
