"""`make simulate` stopped from outside (SIGTERM from `timeout` or a cancelled CI job, SIGHUP from a closed terminal,
Ctrl-C) stops every process of every pod, as it does at the deadline, and says so."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from conftest import REPO
from policies.simulate.host import NSS_WRAPPER_CANDIDATES, installed

pytestmark = pytest.mark.skipif(installed(NSS_WRAPPER_CANDIDATES) is None,
                                reason="libnss_wrapper is not installed (make setup installs Debian's libnss-wrapper)")


def left_behind(marker: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout.split()


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
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in left_behind(marker):  # the pods of a simulator killed here (SIGKILL cannot be handled)
            os.kill(int(pid), signal.SIGKILL)
    assert proc.returncode == 128 + sig, out[-2000:]
    assert f"stopped by {sig.name}; every process of every pod stopped, none left" in out, out[-2000:]
    assert not left, f"processes left behind: {left}"
