"""The suite's own process helpers (conftest.py): a test's cleanup and its bounds end whatever a test started, so
that no test can hang make test (CI stops it at 90 minutes, and then says nothing of which test it was)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from conftest import MAX_TEST_SECONDS, REPO, process_tree, reap, run_bounded
from policies.simulate.processes import state_of

# A parent whose child runs in a session of its own (as torchrun starts its workers) and holds the parent's stdout:
# killing the parent alone leaves the pipe open, so `kill(); communicate()` would wait as long as the child lives.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    return state_of(pid) not in ("", "Z")


def cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def gone(pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    return not alive(pid)


def start_parent() -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())  # type: ignore[union-attr]
    assert process_tree(proc.pid) == [proc.pid, child]
    return proc, child


def test_reap_ends_the_child_that_holds_the_pipe():
    proc, child = start_parent()
    try:
        start = time.monotonic()
        reap(proc, seconds=20)
        assert time.monotonic() - start < 20
        assert proc.returncode is not None and gone(child)
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def test_reap_of_a_process_that_ended_returns_at_once():
    proc = subprocess.Popen([sys.executable, "-c", "print('done')"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out, _ = proc.communicate(timeout=60)
    assert out == "done\n"
    assert reap(proc) == ("done\n", "")  # communicate() again: what it wrote, no wait


def test_run_bounded_stops_the_whole_tree_on_its_timeout():
    marker = "import time; time.sleep(600)"
    cmd = [sys.executable, "-c", f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {marker!r}], "
           "start_new_session=True); print('started', flush=True); time.sleep(600)"]
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        run_bounded(cmd, 3)
    assert caught.value.output == "started\n"
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and alive(int(p.name)) and marker in cmdline(p)]


def test_run_bounded_returns_what_the_command_wrote():
    proc = run_bounded([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], 60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out\n", "err\n")


def test_a_test_that_asks_for_more_than_ci_leaves_is_refused(tmp_path):
    """Every test is bounded: pyproject.toml's default, and conftest refuses a @pytest.mark.timeout past what CI's 90
    minutes leave (MAX_TEST_SECONDS): the run stops at collection, naming the test."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert 0 < int(config["timeout"]) <= MAX_TEST_SECONDS
    for seconds, refused in ((MAX_TEST_SECONDS, False), (MAX_TEST_SECONDS + 1, True)):
        test = tmp_path / f"test_bound_{seconds}.py"
        test.write_text(f"import pytest\n\n@pytest.mark.timeout({seconds})\ndef test_asks():\n    pass\n")
        # this suite's conftest.py as a plugin, on a test outside the checkout
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                               "--collect-only", str(test)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": f"{REPO / 'tests'}:{REPO}"})
        said = proc.stdout + proc.stderr
        assert (proc.returncode != 0) == refused, said
        assert (f"test_asks ({seconds} s)" in said) == refused, said
