"""`make simulate PVC="claim=folder"`: a claim name that is not a PersistentVolumeClaim name (`..` copied outside the
run folder), a FIFO in the source (an internal error), a source that holds the run folder (`outputs-pvc=.sim` copied
the run into itself; `x=/` would copy the filesystem), a source inside the run folder, a link out of the source, or
more than the bound: each is one line, exit 2, and nothing is written (the run folder is not even emptied)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO
from policies.simulate import pvc
from policies.simulate.host import SimulationError
from policies.simulate.result import RUN_MARKER

OVERLAY = "overlays/kind-cpu/indexed-job"


def simulate(*args: str):
    return subprocess.run([sys.executable, "-m", "policies.simulate", OVERLAY, "--deadline", "5", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def snapshot(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_mtime_ns) for p in folder.rglob("*"))


@pytest.fixture
def run_dir(tmp_path):
    """A run folder of an earlier run: a refused PVC must not empty it."""
    run = tmp_path / "runs" / "run"
    (run / "logs").mkdir(parents=True)
    (run / RUN_MARKER).write_text("")
    (run / "logs" / "earlier.log").write_text("kept")
    return run


def data(tmp_path):
    src = tmp_path / "data"
    src.mkdir()
    (src / "train.txt").write_text("tokens")
    return src


def refused(run_dir, item: str, why: str):
    before = snapshot(run_dir.parent.parent)
    proc = simulate("--run-dir", str(run_dir), f"--pvc={item}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and why in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(run_dir.parent.parent) == before  # nothing written, nothing emptied


@pytest.mark.parametrize("claim", ["..", "../outside", "a/b", "Models", "-x", "x" * 254, ""])
def test_a_claim_that_is_not_a_claim_name(claim, run_dir, tmp_path):
    data(tmp_path)
    why = "expected CLAIM=FOLDER" if not claim else "is not a PersistentVolumeClaim name"
    refused(run_dir, f"{claim}={tmp_path / 'data'}", why)
    assert not (run_dir.parent / "outside").exists()


def test_a_fifo_in_the_source(run_dir, tmp_path):
    src = data(tmp_path)
    (src / "sub").mkdir()
    os.mkfifo(src / "sub" / "pipe")
    refused(run_dir, f"datasets-pvc={src}", f"{src / 'sub' / 'pipe'} is a FIFO, not a file")


def test_a_source_that_holds_the_run_folder(run_dir, tmp_path):
    refused(run_dir, f"outputs-pvc={tmp_path}", "holds the run folder")
    refused(run_dir, "x=/", "holds the run folder")


def test_dot_sim_holds_the_default_run_folder():
    """The report's own case: PVC=outputs-pvc=.sim with the default run folder (.sim/kind-cpu_indexed-job)."""
    sim = REPO / ".sim"
    existed = sim.exists()
    before = snapshot(sim) if existed else None
    proc = subprocess.run([sys.executable, "-m", "policies.simulate", OVERLAY, "--pvc", "outputs-pvc=.sim"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "holds the run folder" in proc.stderr, proc.stderr
    assert (snapshot(sim) if existed else sim.exists()) == (before if existed else False)


def test_a_source_inside_the_run_folder(run_dir):
    refused(run_dir, f"outputs-pvc={run_dir / 'logs'}", "is inside the run folder")


def test_a_link_out_of_the_source(run_dir, tmp_path):
    src = data(tmp_path)
    (src / "passwd").symlink_to("/etc/passwd")
    refused(run_dir, f"datasets-pvc={src}", "is a link to /etc/passwd, outside the folder")


def test_the_bound(tmp_path, monkeypatch):
    src = data(tmp_path)
    for i in range(5):
        (src / f"f{i}").write_bytes(b"x" * 100)
    monkeypatch.setattr(pvc, "SEED_ENTRIES", 4)
    with pytest.raises(SimulationError, match="more than the bound"):
        pvc.check([f"a={src}"], tmp_path / "run")
    monkeypatch.setattr(pvc, "SEED_ENTRIES", 100)
    monkeypatch.setattr(pvc, "SEED_BYTES", 300)
    with pytest.raises(SimulationError, match="more than the bound"):
        pvc.check([f"a={src}"], tmp_path / "run")
    monkeypatch.setattr(pvc, "SEED_BYTES", 10_000)  # both claims count against one bound
    assert len(pvc.check([f"a={src}"], tmp_path / "run")) == 1
    monkeypatch.setattr(pvc, "SEED_BYTES", 1000)
    with pytest.raises(SimulationError, match="all claims together"):
        pvc.check([f"a={src}", f"b={src}"], tmp_path / "run")


def test_a_good_source_is_copied_with_its_inner_links(tmp_path):
    src = data(tmp_path)
    (src / "latest").symlink_to("train.txt")
    run = tmp_path / "run"
    assert pvc.copy(run, pvc.check([f"datasets.v1={src}"], run)) == [f"datasets.v1 <- {src}"]
    copied = run / "pvc" / "datasets.v1"
    assert (copied / "train.txt").read_text() == "tokens" and os.readlink(copied / "latest") == "train.txt"
    assert (src / "train.txt").read_text() == "tokens"  # the source is only read


def test_make_simulate_pvc_is_checked_the_same_way(run_dir, tmp_path):
    """Through make: each word of PVC reaches --pvc as data (a claim starting with '-' is not an option)."""
    src = data(tmp_path)
    for item, why in ((f"-x={src}", "is not a PersistentVolumeClaim name"), ("x=/", "holds the run folder")):
        proc = subprocess.run(["make", "-s", "simulate", f"OVERLAY={OVERLAY}", f"PVC={item}", "DEADLINE=5"],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and why in proc.stderr.splitlines()[0], proc.stderr
