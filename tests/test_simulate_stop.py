"""`make simulate` stopped from outside (SIGTERM from `timeout` or a cancelled CI job, SIGHUP from a closed terminal,
Ctrl-C) stops every process of every pod, as it does at the deadline, and says so."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, reap
from policies.simulate.host import NSS_WRAPPER_CANDIDATES, installed

pytestmark = pytest.mark.skipif(installed(NSS_WRAPPER_CANDIDATES) is None,
                                reason="libnss_wrapper is not installed (make setup installs Debian's libnss-wrapper)")


def left_behind(marker: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", f"^sleep {marker}$"], capture_output=True, text=True).stdout.split()


def sleeper_job(tmp_path, marker: str):
    """Two pods, each a shell with a sleep in a session of its own (as torchrun starts its workers)."""
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "sleepers"},
        "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c"],
                            "args": [f"setsid sh -c 'exec sleep {marker}' & echo started; exec sleep {marker}"]}]}}},
    }
    path = tmp_path / "sleepers.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_stopped_simulation_leaves_no_process(sig, tmp_path):
    marker = {signal.SIGTERM: "411.15", signal.SIGHUP: "411.01", signal.SIGINT: "411.02"}[sig]
    proc = subprocess.Popen([sys.executable, "-m", "policies.simulate", str(sleeper_job(tmp_path, marker)),
                             "--deadline", "90", "--run-dir", str(tmp_path / "run")], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = ""
        end = time.monotonic() + 60
        while seen.count("started") < 2 and time.monotonic() < end:
            seen += proc.stdout.readline()  # type: ignore[union-attr]
        assert seen.count("started") == 2, seen
        end = time.monotonic() + 20  # two pods, two sleeps each, half of them in sessions of their own
        while len(left_behind(marker)) < 4 and time.monotonic() < end:
            time.sleep(0.1)
        assert len(left_behind(marker)) == 4
        proc.send_signal(sig)
        out = seen + proc.communicate(timeout=60)[0]
        left = left_behind(marker)
    finally:
        reap(proc)
        for pid in left_behind(marker):  # the pods of a simulator killed here (SIGKILL cannot be handled)
            os.kill(int(pid), signal.SIGKILL)
    assert proc.returncode == 128 + sig, out[-2000:]
    assert f"stopped by {sig.name}; every process of every pod stopped, none left" in out, out[-2000:]
    assert not left, f"processes left behind: {left}"


def processes_of_run(simulator_pid: int) -> list[int]:
    """Every process that carries a pod marker of the simulator `simulator_pid` (policies/simulate/pods.py POD_TOKEN),
    wherever it was reparented."""
    from policies.simulate.pods import POD_TOKEN
    from policies.simulate.processes import processes_with_prefix
    return processes_with_prefix(POD_TOKEN, f"{simulator_pid}-")


def kill_run(simulator_pid: int) -> None:
    for pid in processes_of_run(simulator_pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def none_left(simulator_pid: int, seconds: float = 20.0) -> list[int]:
    end = time.monotonic() + seconds
    while (left := processes_of_run(simulator_pid)) and time.monotonic() < end:
        time.sleep(0.2)
    return left


@pytest.mark.timeout(180)
def test_sigkill_to_the_simulator_leaves_no_process_of_a_sleeper_job(tmp_path):
    """SIGKILL cannot be handled: the pods die with the simulator (a PID namespace per pod, PR_SET_PDEATHSIG), the
    sleeps started in sessions of their own included."""
    marker = "411.09"
    proc = subprocess.Popen([sys.executable, "-m", "policies.simulate", str(sleeper_job(tmp_path, marker)),
                             "--deadline", "90", "--run-dir", str(tmp_path / "run")], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = ""
        end = time.monotonic() + 60
        while seen.count("started") < 2 and time.monotonic() < end:
            seen += proc.stdout.readline()  # type: ignore[union-attr]
        assert seen.count("started") == 2, seen
        assert "a PID namespace per pod" in seen, seen  # this machine allows one (root): the test needs it
        end = time.monotonic() + 20
        while len(left_behind(marker)) < 4 and time.monotonic() < end:
            time.sleep(0.1)
        assert len(left_behind(marker)) == 4
        proc.kill()
        proc.communicate(timeout=30)
        left = none_left(proc.pid)
        sleeps = left_behind(marker)
    finally:
        kill_run(proc.pid)
        for pid in left_behind(marker):
            os.kill(int(pid), signal.SIGKILL)
    assert not left and not sleeps, f"processes left behind: {left} {sleeps}"


def long_epoch(objs) -> None:
    """The trainer's flags for one epoch that lasts (batch size 1, 60,000 samples) and prints nothing while it runs:
    a world killed mid-epoch gets no SIGPIPE from the simulator's closed pipes until the epoch ends."""
    for obj in objs:
        for c in (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []:
            if "--epochs=3" in (c.get("args") or []):
                c["args"] += ["--epochs=1", "--samples=60000", "--batch-size=1", "--log-interval=1000000"]
                return
    raise AssertionError("no container with --epochs=3")


def training_processes(simulator_pid: int) -> list[bytes]:
    out = []
    for pid in processes_of_run(simulator_pid):
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" "))
        except OSError:
            continue
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigkill_to_a_real_simulation_leaves_no_torchrun_or_trainer(tmp_path):
    """The report: SIGKILL to `make simulate` left torchrun and its trainers running. A real overlay, killed while
    its torchrun world trains (rendered, with one long quiet epoch)."""
    from policies.report.engine import collect
    (unit,) = collect([str(REPO / "overlays/kind-cpu/indexed-job")], REPO / "overlays")
    objs = [m.obj for m in unit.manifests]
    long_epoch(objs)
    job = tmp_path / "long.yaml"
    job.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    proc = subprocess.Popen([sys.executable, "-m", "policies.simulate", str(job), "--deadline", "200", "--run-dir",
                             str(tmp_path / "run")], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 150
        # Two torchruns, four trainers (train.py without torchrun in its command line).
        while time.monotonic() < end and proc.poll() is None:
            running = training_processes(proc.pid)
            if sum(b"torchrun" in c for c in running) >= 2 and sum(
                    b"train.py" in c and b"torchrun" not in c and b"confine.py" not in c for c in running) >= 4:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the world did not start: {training_processes(proc.pid)}")
        time.sleep(3)  # mid-epoch
        proc.kill()
        proc.wait(timeout=30)
        left = none_left(proc.pid, seconds=10)
    finally:
        kill_run(proc.pid)
    assert not left, f"processes of the killed simulation left: {left}"
