"""Faulted simulations, run for real: every kind-cpu overlay with a pod killed and a pod deleted mid-training ends as
docs/simulate.md's fault table says, its steps counted from the trainer's own metrics.jsonl; Ctrl-C during a fault
leaves no process behind. The controllers' decisions themselves are unit-tested in tests/test_faults.py."""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, reap, run_cpu_bounded
from policies.simulate.host import NSS_WRAPPER_CANDIDATES, installed
from policies.simulate.pods import POD_TOKEN

pytestmark = pytest.mark.skipif(installed(NSS_WRAPPER_CANDIDATES) is None,
                                reason="libnss_wrapper is not installed (make setup installs Debian's libnss-wrapper)")
sys.path.insert(0, str(REPO / "scripts"))
import fault_table  # noqa: E402


def documented_row(launcher: str, fault: str) -> list[str]:
    row = next(r for r in fault_table.documented() if fault_table.key(r) == (f"`kind-cpu/{launcher}`", f"`{fault}`"))
    return [c.strip() for c in row.strip("|").split("|")]


def test_the_documented_table_says_what_the_issue_asks():
    """A SIGTERM makes the trainer save and the re-created pod resume from that save (none done again); a killed pod
    of a restarting launcher loses no step (done again only since the last checkpoint)."""
    for launcher in ("statefulset", "pytorchjob"):
        # a term stops the run at the next step, where the ranks vote on the SIGTERM and save; a kill at its step
        assert documented_row(launcher, "term:1@step=6")[2:4] == ["finished",
                                                                  "12 of 12, stopped at step 7, none done again"]
        assert documented_row(launcher, "kill:1@step=6")[2:4] == [
            "finished", "12 of 12, stopped at step 6, done again only since the last checkpoint"]
    for launcher in ("indexed-job", "trainjob"):  # FailJob on any non-zero exit: the whole world fails, by design
        assert documented_row(launcher, "kill:1@step=6")[2] == "failed"


# CPU seconds the table's runs may use: what they used here (`python scripts/fault_table.py` prints it: 15 runs, 462 s
# of CPU in 457 s wall, 2026-11-26, 2 at a time on 2 shared cores), 5 times over. The bound is CPU time, not wall time:
# on a machine loaded 5 times its cores the runs take several times longer, not more CPU (conftest.py).
FAULT_TABLE_CPU = 462
FAULT_TABLE_CPU_BOUND = 5 * FAULT_TABLE_CPU
# Wall-clock backstop: 7 times the 244 s it takes here (2026-11-29), and within CI's 90 minutes with the rest of
# make test. A 4-hour backstop once let a slow or hung table run CI past its limit (2026-11-30), where a failure
# with the table's output would have said which run.
FAULT_TABLE_WALL = 1800


@pytest.mark.timeout(FAULT_TABLE_WALL + 300)
def test_every_kind_cpu_overlay_ends_a_fault_as_the_table_says():
    if shutil.which("etcd") is None or importlib.util.find_spec("etcd") is None:
        pytest.skip("etcd or python-etcd is not installed: the etcd variant cannot run (make setup installs both)")
    start = time.monotonic()
    proc, cpu = run_cpu_bounded([sys.executable, str(REPO / "scripts/fault_table.py"), "--check"],
                                FAULT_TABLE_CPU_BOUND, FAULT_TABLE_WALL, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert f"the fault table matches {len(fault_table.runs())} runs" in proc.stdout
    print(f"fault table: {time.monotonic() - start:.0f} s, {cpu:.0f} s of CPU")


def simulate(*args):
    return subprocess.run([sys.executable, "-m", "policies.simulate", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("fault, message", [
    ("explode:1@step=3", "unknown fault 'explode'"),
    ("kill:1@step=13", "the run ends at step 12 (epoch 3, 4 steps an epoch)"),
    ("term:0@epoch=3", "the run ends at step 12"),
    ("kill:ddp-train-run-001-7@step=3", "no training pod 'ddp-train-run-001-7' (the pods: 0 (ddp-train-run-001-0), "
                                        "1 (ddp-train-run-001-1))"),
])
def test_bad_fault_on_an_overlay_starts_nothing(fault, message, tmp_path):
    proc = simulate(str(REPO / "overlays/kind-cpu/statefulset"), "--fault", fault, "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr and proc.stdout == "", proc.stderr
    assert not list((tmp_path / "r").rglob("*.log"))  # no pod started


def pod_processes(sim_pid: int) -> list[int]:
    """The processes of the pods a simulator started (their env carries its pid in POD_TOKEN)."""
    needle = f"{POD_TOKEN}={sim_pid}-".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.timeout(300)
def test_ctrl_c_while_a_pod_is_stopped_leaves_no_process(tmp_path):
    """The hardest moment: pod 1's processes are stopped (SIGSTOP, the unreachable fault); they do not act on
    SIGTERM, and the simulator still leaves none of them."""
    proc = subprocess.Popen([sys.executable, "-m", "policies.simulate", str(REPO / "overlays/kind-cpu/statefulset"),
                             "--fault", "partition=120:1@step=2", "--deadline", "240", "--run-dir",
                             str(tmp_path / "run")], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    seen, left = "", []
    try:
        end = time.monotonic() + 200
        while "unreachable for 120 s" not in seen and time.monotonic() < end and proc.poll() is None:
            seen += proc.stdout.readline()  # type: ignore[union-attr]
        assert "unreachable for 120 s" in seen, seen[-3000:]
        assert pod_processes(proc.pid)
        proc.send_signal(signal.SIGINT)
        out = seen + proc.communicate(timeout=60)[0]
        left = pod_processes(proc.pid)
    finally:
        reap(proc)
        for pid in pod_processes(proc.pid):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130, out[-2000:]
    assert "stopped by SIGINT; every process of every pod stopped, none left" in out
    assert not left, f"processes left behind: {left}"


def test_a_term_fault_waits_until_the_container_has_forwarded_sigterm_to_its_paused_workers(tmp_path):
    """The CI failure of 2026-11-29: `term:1@step=6` on the StatefulSet stopped at step 8 instead of 7 on a loaded
    machine, the ranks continued before torchrun had forwarded SIGTERM to its paused workers. Here a parent that
    forwards SIGTERM only once told to (a file appears) and a stopped child: the wait ends only after the forward."""
    from policies.simulate.processes import pending, state_of, until_pending
    go = tmp_path / "go"
    parent = subprocess.Popen([sys.executable, "-c", f"""
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
def forward(signum, frame):
    while not os.path.exists({str(go)!r}):
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGTERM)
signal.signal(signal.SIGTERM, forward)  # before the pid is printed: the test's SIGTERM may follow at once
print(child.pid, flush=True)
child.wait()
"""], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())  # type: ignore[union-attr]
        os.kill(child, signal.SIGSTOP)
        end = time.monotonic() + 60
        while state_of(child) not in ("T", "t") and time.monotonic() < end:
            time.sleep(0.01)
        parent.send_signal(signal.SIGTERM)
        assert not until_pending(lambda: [child], signal.SIGTERM, 0.5)  # not forwarded yet: the wait gives up
        assert not pending(child, signal.SIGTERM)
        go.touch()
        assert until_pending(lambda: [child], signal.SIGTERM, 60)
        assert pending(child, signal.SIGTERM) and state_of(child) in ("T", "t")
        os.kill(child, signal.SIGCONT)
        assert parent.wait(timeout=60) == 0
    finally:
        reap(parent)


def test_a_rank_that_stops_after_the_others_were_continued_is_continued_too():
    """A rank of the repository's trainer stops itself after a pause step (PAUSE_AT_STEPS); the simulator continues
    every rank once the faults due there are in. A rank that stops only after that (slower than the simulator's
    waits, on a loaded machine) would hold the world until the deadline: it is continued as long as rank 0 is still
    at that step, and not once rank 0 reports a later one (a rank stopped then is the next pause's). Nor where every
    rank is stopped: that is the next pause, which rank 0's pump, reading behind the trainer, may not have reached
    (CI of 2026-11-30: the ranks stopped at a return fault's step were continued as late ones of the pause before)."""
    from types import SimpleNamespace

    from policies.simulate.fault_run import FaultRun
    from policies.simulate.processes import state_of

    said: list[str] = []
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    # the rank of another pod, continued: it waits for the late one in the next step's all-reduce
    waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        pod = SimpleNamespace(name="ddp-train-1", training=True)
        other = SimpleNamespace(name="ddp-train-0", training=True)
        run = FaultRun.__new__(FaultRun)  # its state only: the pods are these processes
        run.sim = SimpleNamespace(pods=[other, pod], say=said.append)
        run._partitioned, run._workers = set(), lambda sp: [rank.pid] if sp is pod else [waiting.pid]

        def stopped(proc: subprocess.Popen = rank) -> bool:
            end = time.monotonic() + 30
            while state_of(proc.pid) not in ("T", "t") and time.monotonic() < end:
                time.sleep(0.01)
            return state_of(proc.pid) in ("T", "t")

        os.kill(rank.pid, signal.SIGSTOP)
        assert stopped()
        run.step, run._watch = 7, (6, time.monotonic() + 60, 0.0)  # rank 0 is past the pause: not this pause's rank
        run._continue_late()
        assert stopped() and run._watch is None and not said
        run.step, run._watch = 6, (6, time.monotonic() + 60, 0.0)
        run._partitioned = {id(pod)}  # a partition fault's stop is not a pause's
        run._continue_late()
        assert stopped() and not said
        run._partitioned = set()
        os.kill(waiting.pid, signal.SIGSTOP)  # every rank stopped: the next pause, its line not read yet
        assert stopped(waiting)
        run._watch = (6, time.monotonic() + 60, 0.0)  # looked at again now (it looks once a second)
        run._continue_late()
        assert stopped() and stopped(waiting) and not said and run._watch is not None
        os.kill(waiting.pid, signal.SIGCONT)
        end = time.monotonic() + 30
        while state_of(waiting.pid) in ("T", "t") and time.monotonic() < end:
            time.sleep(0.01)
        run._watch = (6, time.monotonic() + 60, 0.0)
        run._continue_late()
        end = time.monotonic() + 30
        while state_of(rank.pid) in ("T", "t") and time.monotonic() < end:
            time.sleep(0.01)
        assert state_of(rank.pid) not in ("T", "t")
        assert said == [f"[sim] pod ddp-train-1: process {rank.pid} stopped at step 6 after the others were continued: "
                        "continued"]
    finally:
        reap(rank)
        reap(waiting)


def test_a_return_at_a_pause_step_holds_the_ranks_until_the_pod_is_back(monkeypatch):
    """CI of 2026-11-30: `kill:1@step=6 return:1@step=8` on the elastic PyTorchJob ended with the world of two
    finishing all 384 steps before the returning worker's torchrun had started (torch's import on a loaded machine),
    which then could not reach the finished world's store. The ranks stopped at the return's step now continue only
    once the pod is back: its container started again, its torchrun in the rendezvous, and (an elastic world) the
    torchruns that trained on without it have told their stopped workers to stop. Here the pod and the other pod's
    stopped rank are processes of this test, and a thread plays the kubelet and the torchruns, slowly."""
    import threading
    from types import SimpleNamespace

    from policies.launchers import Bundle
    from policies.model.topology import compute
    from policies.report import engine
    from policies.simulate import fault_run
    from policies.simulate.fault_run import FaultRun
    from policies.simulate.processes import pending, state_of

    def bundle(overlay: str) -> Bundle:
        return Bundle.of(engine.collect([f"overlays/kind-cpu/{overlay}"], REPO / "overlays")[0].manifests)

    def fault_run_of(b: Bundle, rank: int) -> tuple[FaultRun, SimpleNamespace, SimpleNamespace, list[str]]:
        workload = compute(b)[0][0].workload
        other = SimpleNamespace(name="worker-0", training=True, workload=workload)
        back = SimpleNamespace(name="worker-1", training=True, workload=workload, proc=gone, rendezvous=False)
        said: list[str] = []
        run = FaultRun.__new__(FaultRun)  # its state only: the pods are this test's processes
        run.sim = SimpleNamespace(pods=[other, back], say=said.append, bundle=b)
        run._partitioned, run._workers = set(), lambda sp: [rank] if sp is other else []
        return run, other, back, said

    gone = subprocess.Popen(["true"])  # the killed container
    gone.wait()
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # the world of two's rank
    started = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # the pod, started again
    try:
        os.kill(rank.pid, signal.SIGSTOP)  # stopped itself at the return's step
        end = time.monotonic() + 30
        while state_of(rank.pid) not in ("T", "t") and time.monotonic() < end:
            time.sleep(0.01)
        run, other, back, said = fault_run_of(bundle("pytorchjob-elastic"), rank.pid)
        done: list[str] = []

        def cluster() -> None:
            time.sleep(1)
            back.proc = started  # the kubelet starts the container after its back-off
            done.append("started")
            time.sleep(1)
            back.rendezvous = True  # its torchrun enters the rendezvous: the wait list of the world of two
            done.append("rendezvous")
            time.sleep(1)
            os.kill(rank.pid, signal.SIGTERM)  # the other torchrun saw it waiting: it stops its workers
            done.append("sigterm")
        threading.Thread(target=cluster, daemon=True).start()
        run._back(back, gone, 0.0)
        assert done == ["started", "rendezvous", "sigterm"] and pending(rank.pid, signal.SIGTERM)
        assert state_of(rank.pid) in ("T", "t")  # the pause's finally continues it, not the wait
        assert said == ["[sim] pod worker-1 is back in the rendezvous; the torchruns that trained on without it stop "
                        "their workers to take it in: the ranks continue"]

        # A world of a fixed size (the StatefulSet's 2:2): back once in its rendezvous, nothing trained on without it.
        run, other, back, said = fault_run_of(bundle("statefulset"), rank.pid)
        back.proc, back.rendezvous = started, True
        run._back(back, gone, 0.0)
        assert said == []

        # A pod that does not come back within the bound: the ranks continue, and the run says so.
        monkeypatch.setattr(fault_run, "RETURN_START_S", 0.5)
        run, other, back, said = fault_run_of(bundle("pytorchjob-elastic"), rank.pid)
        run._back(back, gone, 0.0)
        assert said == ["[sim] pod worker-1 was not back within 0.5 s of its return (its back-off 0 s, then its "
                        "torchrun in the rendezvous): the ranks continue without it"]
    finally:
        reap(rank)
        reap(started)
