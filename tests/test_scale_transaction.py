"""`make scale` and `make new-run` write an overlay's files as one transaction: a real run killed between two renames
is rolled forward by the next command (and `make validate` refuses the half-written overlay meanwhile), one killed
before its journal is rolled back, SIGINT waits for the renames, two concurrent runs both land, and no scratch
copy outlives its run. Also: DRY_RUN says nothing was written, and a run id bumped but not yet committed is a new
workload that may change."""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import REPO, stop, wait_for_hook

OVERLAY = "kind-cpu/indexed-job"
FOLDER = f"overlays/{OVERLAY}"


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "repo"
    for d in ("base", "components", "overlays"):
        shutil.copytree(REPO / d, root / d)
    return root


@pytest.fixture()
def tmpdir_env(tmp_path):
    """A TMPDIR of the test's own, so the scratch copies of these runs (and only these) can be counted."""
    t = tmp_path / "tmp"
    t.mkdir()
    return {**os.environ, "TMPDIR": str(t)}, t


def run(root, *args, env=None):
    return subprocess.run([sys.executable, "-m", "policies.edit.scale", *args, "--root", str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=180, env=env)


def start(root, *args, hook=None, env=None):
    env = dict(env or os.environ)
    if hook:
        env["DDP_SCALE_TEST_HOOK"] = hook
    return subprocess.Popen([sys.executable, "-m", "policies.edit.scale", *args, "--root", str(root)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def snapshot(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def validate(root, folder):
    return subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--schema", "none", str(root / folder)],
                          cwd=REPO, capture_output=True, text=True, timeout=180)


def expected_after(tmp_path, *args):
    """The overlay an uninterrupted run of `args` gives, from a fresh copy."""
    other = tmp_path / "clean"
    for d in ("base", "components", "overlays"):
        shutil.copytree(REPO / d, other / d)
    proc = run(other, *args)
    assert proc.returncode == 0, proc.stderr
    return snapshot(other / FOLDER)


SCALE = ("scale", OVERLAY, "--nodes", "3", "--procs-per-node", "1", "--new-run")


def test_killed_between_two_renames_is_refused_by_validate_and_rolled_forward(repo, tmp_path):
    folder = repo / FOLDER
    before = snapshot(folder)
    proc = start(repo, *SCALE, hook="renamed-1")
    wait_for_hook(proc, "renamed-1")
    stop(proc, signal.SIGKILL)
    half = snapshot(folder)
    # Half changed, as the issue found it: the topology patch is new, the run id is not.
    assert half["patches/set-topology.yaml"] != before["patches/set-topology.yaml"]
    assert half["patches/set-run-id.yaml"] == before["patches/set-run-id.yaml"]
    assert (folder / ".scale-journal").is_file()
    # make validate refuses it (one line naming the overlay and how to finish it), never says OK.
    check = validate(repo, FOLDER)
    assert check.returncode != 0
    assert "half written (.scale-journal)" in check.stdout + check.stderr
    assert "make recover OVERLAY=" in check.stdout + check.stderr
    dry = run(repo, *SCALE, "--dry-run")  # a dry run finishes nothing, and says why it cannot go on
    assert dry.returncode == 2 and "half written (.scale-journal)" in dry.stderr.splitlines()[-1], dry.stderr
    # The next command that touches the overlay finishes the change first.
    fix = run(repo, "recover", OVERLAY)
    assert fix.returncode == 0, fix.stderr
    assert "finished the change an interrupted run began" in fix.stderr
    assert snapshot(folder) == expected_after(tmp_path, *SCALE)
    assert "run-002" in (folder / "patches/set-run-id.yaml").read_text()
    assert validate(repo, FOLDER).returncode == 0


def test_a_new_run_rolls_forward_an_interrupted_one_before_its_own_change(repo):
    folder = repo / FOLDER
    proc = start(repo, "new-run", OVERLAY, hook="journal-written")
    wait_for_hook(proc, "journal-written")
    stop(proc, signal.SIGKILL)
    assert "run-001" in (folder / "patches/set-run-id.yaml").read_text()  # nothing renamed yet, but decided
    again = run(repo, "new-run", OVERLAY)
    assert again.returncode == 0, again.stderr
    assert "finished the change an interrupted run began" in again.stderr
    assert "run-002 -> run-003" in again.stderr  # the interrupted run's run-002 is kept, then bumped
    assert not list(folder.rglob(".*.scale-tmp")) and not (folder / ".scale-journal").exists()


def test_killed_before_the_journal_is_rolled_back(repo):
    folder = repo / FOLDER
    before = snapshot(folder)
    proc = start(repo, *SCALE, hook="temps-written")
    wait_for_hook(proc, "temps-written")
    stop(proc, signal.SIGKILL)
    strays = list(folder.rglob(".*.scale-tmp"))
    assert strays and not (folder / ".scale-journal").exists()
    assert {k: v for k, v in snapshot(folder).items() if not k.endswith(".scale-tmp") and "/." not in f"/{k}"} \
        == before
    assert validate(repo, FOLDER).returncode == 0  # the old overlay, whole
    dry = run(repo, "new-run", OVERLAY, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    fix = run(repo, "recover", OVERLAY)
    assert fix.returncode == 0, fix.stderr
    assert snapshot(folder) == before  # the strays are gone, nothing else changed


def test_sigint_between_renames_waits_until_every_file_is_written(repo, tmp_path):
    folder = repo / FOLDER
    proc = start(repo, *SCALE, hook="renamed-1:2")
    wait_for_hook(proc, "renamed-1")
    _, err = stop(proc, signal.SIGINT)
    assert proc.returncode == 130
    assert "interrupted: wrote overlays/kind-cpu/indexed-job/patches/set-topology.yaml" in err
    assert not (folder / ".scale-journal").exists()
    assert snapshot(folder) == expected_after(tmp_path, *SCALE)


def test_two_concurrent_scales_both_land(repo):
    folder = repo / FOLDER
    a = start(repo, "scale", OVERLAY, "--nodes", "3", "--new-run")
    b = start(repo, "scale", OVERLAY, "--nodes", "3", "--procs-per-node", "1", "--new-run")
    out_a, out_b = a.communicate(timeout=300), b.communicate(timeout=300)
    assert a.returncode == 0 and b.returncode == 0, (out_a, out_b)
    # Each bumped the run id once, one after the other: nothing was lost.
    assert {"run id run-001 -> run-002", "run id run-002 -> run-003"} <= {
        part.strip() for o in (out_a[1], out_b[1]) for line in o.splitlines() for part in line.split(";")}
    run_file = (folder / "patches/set-run-id.yaml").read_text()
    assert "run-003" in run_file and "run-002" not in run_file
    topology = (folder / "patches/set-topology.yaml").read_text()  # and the one with a process count landed too
    assert '- name: NPROC_PER_NODE\n              value: "1"' in topology and "completions: 3" in topology


def test_a_second_run_waits_for_the_lock_and_reads_what_the_first_wrote(repo):
    folder = repo / FOLDER
    a = start(repo, "new-run", OVERLAY, hook="temps-written:3")
    wait_for_hook(a, "temps-written")
    b = run(repo, "new-run", OVERLAY)
    a.communicate(timeout=120)
    assert a.returncode == 0 and b.returncode == 0, b.stderr
    assert "waiting for another make scale or make new-run on this overlay" in b.stderr
    assert "run-002 -> run-003" in b.stderr
    assert "run-003" in (folder / "patches/set-run-id.yaml").read_text()


def test_a_killed_run_leaves_no_scratch_copy_behind_the_next(repo, tmpdir_env):
    env, tmp = tmpdir_env
    proc = start(repo, *SCALE, hook="validating", env=env)
    wait_for_hook(proc, "validating")
    stop(proc, signal.SIGKILL)
    assert list(tmp.iterdir())  # SIGKILL gives no chance to clean up...
    again = run(repo, "scale", OVERLAY, "--nodes", "2", "--dry-run", env=env)
    assert again.returncode == 0, again.stderr
    assert list(tmp.iterdir()) == []  # ...so the next run deletes what the dead one left


def test_dry_run_says_nothing_was_written(repo):
    before = snapshot(repo / FOLDER)
    proc = run(repo, "scale", OVERLAY, "--nodes", "4", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "dry run: nothing was written" in proc.stderr
    proc = run(repo, "new-run", OVERLAY, "--dry-run")
    assert proc.returncode == 0 and "dry run: nothing was written" in proc.stderr, proc.stderr
    assert snapshot(repo / FOLDER) == before


def git(root, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=root,
                          capture_output=True, text=True, check=True, timeout=60)


def test_a_run_id_bumped_but_not_committed_may_change(repo):
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    proc = run(repo, "scale", OVERLAY, "--nodes", "3")  # the committed run: a change in place
    assert proc.returncode == 0, proc.stderr
    assert "cannot be changed in place" in proc.stderr
    assert run(repo, "new-run", OVERLAY).returncode == 0  # run-002, not committed
    proc = run(repo, "scale", OVERLAY, "--nodes", "4")
    assert proc.returncode == 0, proc.stderr
    assert "cannot be changed in place" not in proc.stderr
    assert "is a new run not committed to main yet (run-001 there, run-002 here)" in proc.stderr
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "new run")  # committed on main: what Argo CD runs now
    proc = run(repo, "scale", OVERLAY, "--nodes", "2")
    assert "cannot be changed in place" in proc.stderr


@pytest.mark.parametrize("form", [OVERLAY, OVERLAY + "/", FOLDER, FOLDER + "/"])
def test_every_overlay_form_is_accepted_by_scale_and_new_run(repo, form):
    proc = run(repo, "scale", form, "--nodes", "3", "--dry-run")
    assert proc.returncode == 0 and "+  completions: 3" in proc.stdout, proc.stderr
    proc = run(repo, "new-run", form, "--dry-run")
    assert proc.returncode == 0 and "run-001 -> run-002" in proc.stderr, proc.stderr


def test_make_recover_takes_an_explicit_overlay_or_the_repository():
    """OVERLAY given: that overlay's journal; not given (the Makefile's default OVERLAY is never taken): the
    repository's own (make init, make new-env, make remove-env, the image pinning)."""
    proc = subprocess.run(["make", "-s", "recover", "OVERLAY=kind-cpu/indexed-job/"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "overlays/kind-cpu/indexed-job: no change is pending" in proc.stderr, proc.stderr
    proc = subprocess.run(["make", "-s", "recover"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "the repository: no change is pending" in proc.stderr, proc.stderr
    assert "overlays/" not in proc.stderr


def test_a_file_edited_by_hand_after_the_interruption_is_never_overwritten(repo):
    folder = repo / FOLDER
    proc = start(repo, *SCALE, hook="journal-written")
    wait_for_hook(proc, "journal-written")
    stop(proc, signal.SIGKILL)
    topology = folder / "patches/set-topology.yaml"
    topology.write_text(topology.read_text() + "# edited by hand\n")
    fix = run(repo, "recover", OVERLAY)
    assert fix.returncode == 2
    (line,) = fix.stderr.strip().splitlines()
    assert line.startswith("error: ") and "set-topology.yaml: changed since an interrupted make scale" in line
    assert topology.read_text().endswith("# edited by hand\n") and (folder / ".scale-journal").exists()


def test_a_journal_that_points_outside_the_overlay_is_refused(repo, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    folder = repo / FOLDER
    (folder / ".evil.scale-tmp").write_text("gotcha\n")
    (folder / ".scale-journal").write_text(
        '{"version": 1, "files": [{"target": "../../../../victim.txt", "tmp": ".evil.scale-tmp", "old": "", '
        '"new": ""}]}')
    fix = run(repo, "recover", OVERLAY)
    assert fix.returncode == 2 and ".scale-journal: unreadable" in fix.stderr, fix.stderr
    assert victim.read_text() == "keep me\n"


def test_an_overlay_not_on_the_base_yet_may_change(repo):
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "base", "components")
    git(repo, "commit", "-q", "-m", "no overlays yet")
    proc = run(repo, "scale", OVERLAY, "--nodes", "3")
    assert proc.returncode == 0, proc.stderr
    assert "overlays/kind-cpu/indexed-job is not on main yet" in proc.stderr
    assert "cannot be changed in place" not in proc.stderr


def test_a_clone_of_another_branch_reads_the_run_at_origin_main(repo, tmp_path):
    """No local main in a clone of another branch: the run Argo CD runs is origin/main's, not HEAD's (a new run
    committed on the feature branch is still a new run)."""
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "checkout", "-q", "-b", "feature")
    git(clone, "branch", "-q", "-D", "main")
    assert run(clone, "new-run", OVERLAY).returncode == 0  # run-002, committed on feature only
    git(clone, "commit", "-q", "-am", "new run")
    proc = run(clone, "scale", OVERLAY, "--nodes", "4")
    assert proc.returncode == 0, proc.stderr
    assert "cannot be changed in place" not in proc.stderr
    assert "is a new run not committed to origin/main yet (run-001 there, run-002 here)" in proc.stderr
