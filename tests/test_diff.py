"""`make diff` on two commits of a temporary repository: the objects and the topology that change, the Argo CD
Application that syncs them, a warning for immutable fields changed in place, and a clear error for a bad ref."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO, copy_repository

# every overlay and argocd/
FOLDERS = len(list((REPO / "overlays").glob("*/*/kustomization.yaml"))) + 1


def sh(root, *args):
    return subprocess.run(list(args), cwd=root, capture_output=True, text=True, check=True, timeout=180)


@pytest.fixture()
def repo(tmp_path):
    root = copy_repository(tmp_path / "repo")
    sh(root, "git", "init", "-q", "-b", "main")
    sh(root, "git", "add", "-A")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base")
    return root


def commit(root, message):
    sh(root, "git", "add", "-A")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", message)


def diff(root, *args):
    return subprocess.run([sys.executable, "-m", "policies.diff", "--root", str(root), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def scale(root, *args):
    proc = subprocess.run([sys.executable, "-m", "policies.edit.scale", *args, "--root", str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr


def test_two_commits_show_the_topology_change(repo):
    scale(repo, "scale", "kind-cpu/trainjob", "--nodes", "3", "--new-run")
    commit(repo, "scale kind-cpu to 3 nodes")
    proc = diff(repo, "--base", "HEAD~1", "--head", "HEAD")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "kind-cpu/trainjob: world size 4 -> 6, pods 2 -> 3" in out
    assert "overlays/kind-cpu/trainjob (changed)  [Argo CD Application ddp-kind-cpu]" in out
    assert "  + TrainJob/ddp-train-run-002\n" in out and "  - TrainJob/ddp-train-run-001\n" in out
    assert "new run: TrainJob/ddp-train-run-001 -> ddp-train-run-002" in out
    assert f"1 of {FOLDERS} rendered folders differ: 1 object added, 1 removed, 1 changed" in out  # + the NetworkPolicy


def test_working_tree_against_a_ref_and_the_immutable_warning(repo):
    scale(repo, "scale", "64x8-h100/pytorchjob", "--nodes", "32")  # no new run: changed in place
    proc = diff(repo, "--base", "main")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("make diff: main (") and "-> working tree" in out.splitlines()[0]
    assert "64x8-h100/pytorchjob: world size 512 -> 256, GPUs 512 -> 256, pods 64 -> 32" in out
    assert "~ PyTorchJob/ddp-train-run-001" in out
    assert "spec.pytorchReplicaSpecs.Worker.replicas: 63 -> 31" in out
    assert "spec.runPolicy.backoffLimit: 65 -> 33" in out  # the restart budget follows the pod count (make scale)
    assert "warning: PyTorchJob/ddp-train-run-001 changes spec.pytorchReplicaSpecs.Worker.replicas, " \
           "spec.runPolicy.backoffLimit under the same name" in out
    assert "make new-run OVERLAY=64x8-h100/pytorchjob" in out


def test_a_crd_transition_rule_refuses_a_change_in_place(repo):
    """TrainJob's CRD makes spec.trainer immutable (`self == oldSelf`, kubeflow/trainer v2.3.0): changing the node
    count without a new run is refused by the API server, as the CRD's own rule says (policies/schema/cel.py)."""
    scale(repo, "scale", "kind-cpu/trainjob", "--nodes", "3")  # no new run: changed in place
    proc = diff(repo, "--base", "main")
    assert proc.returncode == 0, proc.stderr
    assert "warning: TrainJob/ddp-train-run-001 spec.trainer: field is immutable (its CRD's transition rule): the " \
           "API server refuses this change to the existing object; start a new run: make new-run " \
           "OVERLAY=kind-cpu/trainjob" in proc.stdout, proc.stdout


def test_markdown_for_the_pull_request_comment(repo):
    app = repo / "argocd/applicationset.yaml"
    app.write_text(app.read_text().replace("launcher: indexed-job", "launcher: statefulset"))
    commit(repo, "gke-t4 runs the StatefulSet")
    proc = diff(repo, "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("<!-- ddp-gitops-diff -->\n### Rendered difference: `HEAD~1 (")
    assert "| `argocd` |" in out and "Application/argocd/ddp-gke-t4" in out
    assert "-        path: overlays/gke-t4/indexed-job" in out or "-    path: overlays/gke-t4/indexed-job" in out
    data = json.loads(diff(repo, "--base", "HEAD~1", "--head", "HEAD", "--format", "json").stdout)
    (argo,) = [o for o in data["overlays"] if o["path"] == "argocd"]
    changed = argo["changed"]["Application/argocd/ddp-gke-t4"]
    assert ["spec.source.path", "overlays/gke-t4/indexed-job", "overlays/gke-t4/statefulset"] in changed


def test_a_long_value_shows_where_it_changed(repo):
    # An argument dropped from the middle of a long list: both sides cut at 60 characters used to show the same
    # start ("["--nnodes=$(NNODES)","--nproc-per-node=... -> ["--nnodes=$(NNODES)","--nproc-per-node=..."): the
    # line now starts shortly before the first difference.
    sts = repo / "base/statefulset/statefulset.yaml"
    sts.write_text(sts.read_text().replace("            - --task=synthetic\n", "", 1))
    proc = diff(repo, "--base", "HEAD", "--overlay", "kind-cpu/statefulset")
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ".args: " in ln]
    old, new = line.split(".args: ", 1)[1].split(" -> ")
    assert '--task=synthetic' in old and '--task=synthetic' not in new, line
    assert old.startswith("...") and new.startswith("...") and len(old) <= 63 and len(new) <= 63, line


def test_no_change_says_so(repo):
    proc = diff(repo, "--base", "HEAD")
    assert proc.returncode == 0, proc.stderr
    assert f"0 of {FOLDERS} rendered folders differ" in proc.stdout and "Topology" not in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["--base", "no-such-branch"], "BASE=no-such-branch is not a commit in this repository"),
    (["--base", "HEAD", "--head", "v9.9.9"], "HEAD=v9.9.9 is not a commit in this repository"),
    (["--base", ""], "BASE is empty"),
])
def test_a_ref_that_does_not_exist_is_one_line(repo, args, message):
    proc = diff(repo, *args)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: make diff: ") and message in line


def test_a_clone_on_another_branch_compares_with_origin_main(repo, tmp_path):
    # `git clone -b feature` (or a clone of a worktree) has origin/main but no local main: the default BASE=main
    # takes origin/main, as `git checkout main` would, and says so.
    sh(repo, "git", "branch", "feature")
    clone = tmp_path / "clone"
    sh(tmp_path, "git", "clone", "-q", "-b", "feature", str(repo), str(clone))
    proc = diff(clone, "--base", "main")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("make diff: origin/main (") and f"0 of {FOLDERS} rendered folders differ" in proc.stdout
    assert proc.stderr == ""


def test_not_a_repository(tmp_path):
    proc = diff(tmp_path, "--base", "main")
    assert proc.returncode == 2 and "is not a git repository" in proc.stderr


def test_a_side_whose_gitops_yaml_is_broken_says_so_in_one_line(repo):
    """A side whose gitops.yaml cannot be read is rendered without build options: the diff says so in one line naming
    the file and the ref (every form), rather than showing what the missing options change as the change's own."""
    config = repo / "gitops.yaml"
    good = config.read_text()
    config.write_text(good.replace("buildOptions: []", "buildOptions: --enable-helm"))
    commit(repo, "a broken gitops.yaml")
    config.write_text(good)
    sha = sh(repo, "git", "rev-parse", "--short=7", "HEAD").stdout.strip()
    proc = diff(repo, "--base", "HEAD")
    assert proc.returncode == 0, proc.stderr
    line = (f"warning: gitops.yaml at HEAD ({sha}) cannot be read (kustomize.buildOptions must be a list of strings "
            "(one per argument)): this side was rendered without kustomize build options")
    assert proc.stdout.splitlines()[1] == line, proc.stdout
    assert [x for x in proc.stdout.splitlines() if "gitops.yaml" in x] == [line]
    data = json.loads(diff(repo, "--base", "HEAD", "--format", "json").stdout)
    assert data["warnings"] == [line.removeprefix("warning: ")]
    assert f"- :warning: {line.removeprefix('warning: ')}" in diff(repo, "--base", "HEAD", "--format", "markdown").stdout
    # Both sides readable: nothing said.
    assert "warning" not in diff(repo, "--base", "HEAD~1", "--head", "HEAD~1").stdout


def test_build_options_name_the_file_and_the_ref(tmp_path):
    from policies.diff.trees import build_options

    assert build_options(tmp_path, "main (abc1234)") == (
        [], "gitops.yaml at main (abc1234) does not exist: this side was rendered without kustomize build options")
    (tmp_path / "gitops.yaml").write_text("kustomize: [\n")
    options, warning = build_options(tmp_path, "main (abc1234)")
    assert options == [] and warning is not None and warning.startswith("gitops.yaml at main (abc1234) cannot be read (")
    assert "\n" not in warning and str(tmp_path) not in warning
    (tmp_path / "gitops.yaml").write_text((REPO / "gitops.yaml").read_text())
    assert build_options(tmp_path, "main (abc1234)") == ([], None)


def test_a_head_that_does_not_render_fails(repo):
    (repo / "overlays/gke-t4/indexed-job/patches/set-topology.yaml").unlink()
    proc = diff(repo, "--base", "HEAD")
    assert proc.returncode == 1
    assert "overlays/gke-t4/indexed-job (error)" in proc.stdout and "does not render at working tree" in proc.stdout


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="the checkout is not a git repository")
def test_make_diff_bad_ref():
    proc = subprocess.run(["make", "-s", "diff", "BASE=refs/heads/does-not-exist"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert "error: make diff: BASE=refs/heads/does-not-exist is not a commit in this repository" in proc.stderr


def test_a_new_run_shows_what_else_changed_against_the_run_it_replaces(repo):
    """The new run's workload is paired with its predecessor: a CPU, image or env change in the same commit shows,
    the run id's own renaming does not."""
    scale(repo, "scale", "kind-cpu/indexed-job", "--nodes", "3", "--procs-per-node", "1", "--new-run")
    topo = repo / "overlays/kind-cpu/indexed-job/patches/set-topology.yaml"
    topo.write_text(topo.read_text().replace('              value: "1"\n',
                                             '              value: "1"\n            - name: EPOCHS\n'
                                             '              value: "7"\n', 1))
    commit(repo, "kind-cpu: 3 pods x 1 process, 7 epochs, as a new run")
    proc = diff(repo, "--base", "HEAD~1", "--head", "HEAD")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "  + Job/ddp-train-run-002\n  - Job/ddp-train-run-001\n" in out
    assert "  ~ Job/ddp-train-run-002 against ddp-train-run-001 (besides the run id):\n" in out
    block = out.split("against ddp-train-run-001 (besides the run id):\n")[1].split("\n\n")[0]
    assert "spec.completions: 2 -> 3" in block and "spec.parallelism: 2 -> 3" in block
    assert "spec.template.spec.containers[trainer].env[NPROC_PER_NODE].value: 2 -> 1" in block
    assert "spec.template.spec.containers[trainer].env[EPOCHS]: (none) -> " in block
    assert "spec.template.spec.containers[trainer].resources.limits.cpu: 2 -> 1" in block
    assert "run-001" not in block  # the rename itself (name, RUN_ID, pod 0's address) is not a difference
    data = json.loads(diff(repo, "--base", "HEAD~1", "--head", "HEAD", "--format", "json").stdout)
    (ov,) = [o for o in data["overlays"] if o["path"] == "overlays/kind-cpu/indexed-job"]
    new_run = ov["new_runs"]["Job/ddp-train-run-002"]
    assert new_run["replaces"] == "Job/ddp-train-run-001"
    assert ["spec.completions", 2, 3] in new_run["changed"]
    md = diff(repo, "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown").stdout
    assert "new run <code>Job/ddp-train-run-002</code> against <code>ddp-train-run-001</code>" in md
    assert "--- a/Job/ddp-train-run-001\n+++ b/Job/ddp-train-run-002\n" in md
    assert "-  completions: 2\n-  parallelism: 2\n+  completions: 3\n+  parallelism: 3\n" in md


def test_a_new_run_alone_says_nothing_else_changed(repo):
    scale(repo, "new-run", "kind-cpu/indexed-job")
    proc = diff(repo, "--base", "HEAD")
    assert proc.returncode == 0, proc.stderr
    assert "  = Job/ddp-train-run-002: the same as ddp-train-run-001 besides the run id\n" in proc.stdout


@pytest.mark.parametrize("form", ["kind-cpu/indexed-job", "kind-cpu/indexed-job/", "overlays/kind-cpu/indexed-job/"])
def test_one_overlay_in_either_form(repo, form):
    scale(repo, "new-run", "kind-cpu/indexed-job")
    scale(repo, "new-run", "gke-t4/indexed-job")
    proc = diff(repo, "--base", "HEAD", "--overlay", form)
    assert proc.returncode == 0, proc.stderr
    assert "overlays/kind-cpu/indexed-job (changed)" in proc.stdout and "gke-t4" not in proc.stdout
    assert "1 of 1 rendered folders differ" in proc.stdout


def test_a_killed_diff_leaves_no_copy_behind_the_next(repo, tmp_path):
    import os
    import signal

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "DDP_SCALE_TEST_HOOK": "exported"}
    proc = subprocess.Popen([sys.executable, "-m", "policies.diff", "--root", str(repo), "--base", "HEAD"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr.readline().strip() == "hook: exported"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert list(tmp.iterdir())  # the base tree SIGKILL left behind
    env.pop("DDP_SCALE_TEST_HOOK")
    again = subprocess.run([sys.executable, "-m", "policies.diff", "--root", str(repo), "--base", "HEAD",
                            "--overlay", "kind-cpu/indexed-job"], cwd=REPO, capture_output=True, text=True,
                           timeout=300, env=env)
    assert again.returncode == 0, again.stderr
    assert list(tmp.iterdir()) == []


def test_the_topology_of_a_katib_experiment_counts_its_trials_at_once():
    """A Katib Experiment starts no pods itself: its trial job does, parallelTrialCount at a time (launchers/katib.py,
    as make validate and make plan model it). The corpus Experiment runs 3 trials of a 2-pod PyTorchJob."""
    from policies.diff.objects import world_of
    from policies.diff.trees import key
    from policies.render.files import read

    objs = {key(m): m for m in read(str(REPO / "tests/corpus/katib/katib-pytorchjob-mnist.yaml"))}
    w = world_of(objs)
    assert w is not None and (w.pods, w.procs, w.world, w.gpus) == (6, "1", 6, 0)
