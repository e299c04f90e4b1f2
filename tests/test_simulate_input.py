"""`python -m policies.simulate`'s input, refused before any pod starts, in one line: a run folder it did not make
(it empties its run folder), a deadline or pod count that is not a positive number. And what of a pod's output stays
in its log: torch's store retries while pod 0 is not up yet."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from conftest import REPO
from policies.simulate.diagnose import noise as _noise
from policies.simulate.result import RUN_MARKER

OVERLAY = REPO / "overlays/kind-cpu/indexed-job"



def refused_output(stdout: str) -> list[str]:
    """What a refused run printed besides the provenance warning (which comes first, before any input is read, and
    depends on whether the checkout is the default branch's): nothing, for a run refused before it started."""
    return [line for line in stdout.splitlines() if not line.startswith("simulate: WARNING: the pods run")]

def simulate(*args: str, cwd=REPO, env=None):
    return subprocess.run([sys.executable, "-m", "policies.simulate", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def test_a_folder_the_simulator_did_not_make_is_refused_and_kept(tmp_path):
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    proc = simulate(str(OVERLAY), "--run-dir", str(keep), "--deadline", "1")
    assert proc.returncode == 2 and not refused_output(proc.stdout), proc.stdout
    assert proc.stderr.count("\n") == 1 and "was not made by the simulator" in proc.stderr, proc.stderr
    assert (keep / "notes.txt").read_text() == "mine"


def test_a_folder_with_a_git_is_refused_even_with_the_marker(tmp_path):
    keep = tmp_path / "checkout"
    (keep / ".git").mkdir(parents=True)
    (keep / RUN_MARKER).write_text("")
    proc = simulate(str(OVERLAY), "--run-dir", str(keep), "--deadline", "1")
    assert proc.returncode == 2 and "holds a .git" in proc.stderr, proc.stderr
    assert (keep / ".git").is_dir()


def test_dot_dot_from_an_overlays_patches_does_not_touch_the_checkout(tmp_path):
    """The report: from an overlay's patches/, `..` as the overlay and `..` as the run folder emptied the checkout."""
    patches = OVERLAY / "patches"
    for run_dir in ("../../../..", "../.."):  # the repository itself, and a folder holding files of the user's
        proc = simulate("..", "--run-dir", run_dir, "--deadline", "1", cwd=patches)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "holds this repository" in proc.stderr or "was not made by the simulator" in proc.stderr
    assert (REPO / ".git").exists() and (OVERLAY / "kustomization.yaml").exists()


def test_the_default_run_folder_of_dot_dot_is_under_dot_sim():
    from policies.simulate.result import default_run_dir
    assert default_run_dir(str(OVERLAY / "patches" / "..")) == REPO / ".sim" / "kind-cpu_indexed-job"
    assert default_run_dir("/") == REPO / ".sim" / "run"


def test_a_marked_folder_is_emptied_and_reused(tmp_path):
    from policies.simulate.result import prepare_run_dir
    run = tmp_path / "run"
    prepare_run_dir(run)
    (run / "logs").mkdir()
    (run / "logs" / "old.log").write_text("x")
    prepare_run_dir(run)
    assert sorted(p.name for p in run.iterdir()) == [RUN_MARKER]


@pytest.mark.parametrize("value", ["abc", "-5", "0", "nan", "inf"])
def test_a_bad_deadline_is_one_line_and_starts_nothing(value, tmp_path):
    proc = simulate(str(OVERLAY), "--run-dir", str(tmp_path / "run"), env={"DEADLINE": value})
    assert proc.returncode == 2 and not refused_output(proc.stdout), proc.stdout
    assert proc.stderr == f"error: DEADLINE must be a positive number of seconds (at most a week), got {value!r}\n"
    assert not (tmp_path / "run").exists()  # nothing started


def test_a_bad_scale_to_is_one_line(tmp_path):
    proc = simulate(str(REPO / "overlays/gke-t4/indexed-job"), "--scale-to", "two", "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 2 and proc.stderr == "error: SCALE_TO must be a positive number of pods, got 'two'\n"


# What torch's TCPStore client printed while pod 0's store was not up yet (torch 2.13, from the pod log of pod 1 in
# `make simulate OVERLAY=overlays/kind-cpu/statefulset`; the frames' long signatures cut).
STORE_RETRY = [
    "[W1124 00:08:31.626309781 socket.cpp:764] [c10d] The client socket has failed to connect to "
    "[ddp-train-run-001-0.ddp-train]:29500 (errno: 113 - No route to host).",
    "[E1124 00:08:31.626951148 socket.cpp:818] [c10d] The client socket has failed to connect to any network address "
    "of (ddp-train-run-001-0.ddp-train, 29500).",
    "[W1124 00:08:31.636781018 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to host "
    "ddp-train-run-001-0.ddp-train:29500 - retrying (try=0, timeout=60000ms, delay=343ms): The client socket has "
    "failed to connect to any network address of (ddp-train-run-001-0.ddp-train, 29500).",
    "Exception raised from run at /__w/pytorch/pytorch/torch/csrc/distributed/c10d/socket.cpp:820 (most recent call "
    "first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char> >) + 0x9d (0x7fc5229b1b8d in "
    "/work/wt/sim/.venv/lib/python3.11/site-packages/torch/lib/libc10.so)",
    "<omitting python frames>",
    "frame #33: _start + 0x21 (0x5622df6f7081 in /work/wt/sim/.venv/bin/python)",
    "W1124 00:09:04.561000 6584 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1298] The node "
    "'ddp-train-run-001-1.ddp-train.default.svc.cluster.local_6584_0' has failed to shutdown the rendezvous 'run-001' "
    "due to an error of type RendezvousConnectionError.",
]


def test_store_retries_stay_in_the_pod_log():
    assert all(_noise(line) for line in STORE_RETRY)
    # what a failing pod says in the end still reaches the terminal
    assert not _noise("torch.distributed.DistNetworkError: The client socket has failed to connect to any network "
                      "address of (ddp-train-run-001-0.ddp-train, 29500). No route to host")
    assert not _noise("[ERROR] rank 1: a peer was lost")


def test_a_refused_fault_keeps_the_last_runs_results(tmp_path):
    """Every input is checked before the run folder is emptied: a fault naming a pod that does not exist leaves the
    last run's logs and volumes where they were."""
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / RUN_MARKER).write_text("")
    (run / "logs" / "pod-0.log").write_text("the last run")
    for fault in ("kill:7@step=3", "kill:1@t=500"):
        proc = simulate(str(REPO / "overlays/kind-cpu/statefulset"), "--run-dir", str(run), "--fault", fault,
                        "--deadline", "120")
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert (run / "logs" / "pod-0.log").read_text() == "the last run", fault


def test_a_fault_after_the_deadline_is_refused(tmp_path):
    proc = simulate(str(REPO / "overlays/kind-cpu/statefulset"), "--run-dir", str(tmp_path / "r"), "--fault",
                    "kill:1@t=200", "--deadline", "180")
    assert proc.returncode == 2 and "deadline, 180 s after the start: a fault 200 s after it would never fire" in \
        proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists()


def test_the_last_step_is_a_step_a_fault_may_name(tmp_path):
    """The trainer reports its last step ([TRAIN] step=12 of 12): a fault there is accepted; one step later is not."""
    from policies.report.engine import collect
    from policies.simulate import faults as F
    from policies.simulate.fault_run import FaultRun
    from policies.simulate.simulation import Simulation

    (unit,) = collect([str(REPO / "overlays/kind-cpu/statefulset")], REPO / "overlays")
    for spec, ok in (("kill:1@step=12", True), ("kill:1@step=13", False)):
        sim = Simulation(unit.manifests, tmp_path / "r", 180, io.StringIO())
        run = FaultRun(sim, F.parse(spec))
        sim.plan()
        if ok:
            run.check()
            assert sim.layout.extra_env == {"LOG_INTERVAL": "1", "PAUSE_AT_STEPS": "12"}
        else:
            with pytest.raises(F.FaultError, match="the run ends at step 12"):
                run.check()
    assert not (tmp_path / "r").exists()  # planning and checking write nothing


def test_the_trainers_start_line_reaches_the_terminal():
    """The [DDP] line names OMP_NUM_THREADS (threads_from=); torchrun's banner about setting it stays in the log."""
    ddp = ("[DDP] world=4 backend=gloo device=cpu local_world=2 host=ddp-train-run-001-0 restart=0 task=synthetic "
           "threads=1 threads_from=OMP_NUM_THREADS=1 stop_check_s=5.0000")
    assert not _noise(ddp)
    assert _noise("W1126 19:53:18.039000 13283 torch/distributed/run.py:803] Setting OMP_NUM_THREADS environment "
                  "variable for each process to be 1 in default, to avoid your system being overloaded, please further "
                  "tune the variable for optimal performance in your application as needed.")


# torchrun 2.13 SIGTERMed (a term fault, the kubelet, the simulator's stop): its agent's traceback, as printed.
SIGNAL_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/app/.venv/bin/torchrun", line 6, in <module>',
    "    sys.exit(main())",
    "             ^^^^^^",
    '  File "/app/.venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 86, in '
    "_terminate_process_handler",
    '    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)',
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 13283 got signal: 15",
]


def test_torchruns_signal_traceback_is_one_line_and_others_stay_whole(tmp_path):
    from policies.simulate.diagnose import flush, for_terminal
    from policies.simulate.pods import SimPod

    sp = SimPod(pod=SimpleNamespace(name="p-0"), workload=None, training=True, ip="", argv=[], env={},  # type: ignore
                cwd=tmp_path, log=tmp_path / "p.log")
    shown = [t for line in SIGNAL_TRACEBACK for t in for_terminal(sp, line, str)]
    assert len(shown) == 1 and "torchrun stopped by signal 15 (SignalException" in shown[0], shown
    other = SIGNAL_TRACEBACK[:-1] + ["ValueError: something else"]
    shown = [t for line in other for t in for_terminal(sp, line, str)]
    assert len(shown) == len(other) and shown[-1].endswith("ValueError: something else"), shown
    # a traceback cut short by the pod's end still reaches the terminal
    for line in SIGNAL_TRACEBACK[:3]:
        assert for_terminal(sp, line, str) == []
    assert len(flush(sp)) == 3


def test_a_long_line_is_cut_after_a_whole_word():
    from policies.simulate.diagnose import clip

    line = ("torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
            "(ddp-train-run-001-1.ddp-train, 29500). The client socket has failed to connect to ddp-train-run-001-1.d")
    cut = clip(line, 120)
    assert len(cut) <= 120 and cut.endswith(" ...") and line.startswith(cut[:-4].rstrip()), cut
    assert line[len(cut[:-4].rstrip())] == " "  # the cut falls between words
    assert clip("short", 120) == "short"
