"""`make remove-env`: the inverse of `make new-env` in one validated transaction. An environment made and removed
gives back every byte; a template environment removed leaves a repository that validates with nothing left over;
each refusal is one line and writes nothing; a dry run writes nothing; a run killed part way is finished (or refused,
where a file changed since) by the next."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import REPO, stop, wait_for_hook
from policies.argocd import identity
from policies.render import transaction
from test_init import IMAGE, URL, copy_repo, init
from test_new_env import ENV, FROM, cli, new_env, with_code

GONE = "gke-t4"  # the template environment removed
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(root, *args, check=True):
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, env=GIT_ENV, check=check)


def commit(root, message):
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)


def remove_env(root, *args, env=None):
    return subprocess.run([sys.executable, "-m", "policies.edit.remove_env", *args, "--root", str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=env)


def tree(root):
    """Every file of the copy but git's own and the code the validation tests put beside it."""
    skip = {".git", "policies", "trainer", "schemas", ".cache"}
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(root).parts)}


def files_of(root, env):
    return sorted(p for d in (root / "components" / env, root / "overlays" / env) for p in d.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def initialised(tmp_path_factory):
    """A copy after make init, committed in a git repository of its own."""
    root = copy_repo(tmp_path_factory.mktemp("initialised") / "repo")
    assert init(root, "--repo-url", URL, "--image", IMAGE).returncode == 0
    (root / ".gitignore").write_text("/policies/\n/trainer/\n/schemas\n/.cache/\n/.venv\n__pycache__/\n"
                                     "/requirements*.txt\n")
    git(root, "init", "-q", "-b", "main")
    commit(root, "make init")
    return root


@pytest.fixture()
def repo(initialised, tmp_path):
    return shutil.copytree(initialised, tmp_path / "repo", symlinks=True)


def assert_validates(root):
    proc = cli(root, "validate", "overlays", "argocd")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0 errors, 0 warnings" in proc.stdout.splitlines()[-1], proc.stdout[-3000:]
    ident = subprocess.run([sys.executable, "-m", "policies.argocd.identity"], cwd=with_code(root), capture_output=True,
                           text=True, timeout=600)
    assert ident.returncode == 0 and "error" not in ident.stderr, ident.stderr


def test_an_environment_made_and_removed_gives_back_every_byte(repo):
    before = tree(repo)
    made = new_env(repo, "--env", ENV, "--from", FROM, "--nodes", "8", "--gpus-per-node", "4")
    assert made.returncode == 0, made.stderr
    commit(repo, "make new-env")
    proc = remove_env(repo, "--env", ENV)
    assert proc.returncode == 0, proc.stderr
    assert tree(repo) == before
    assert git(repo, "diff", "--stat", "HEAD~1").stdout == ""
    assert not (repo / "components" / ENV).exists() and not (repo / "overlays" / ENV).exists()
    assert_validates(repo)


def test_a_template_environment_removed_leaves_nothing_behind(repo):
    gone = files_of(repo, GONE)
    proc = remove_env(repo, "--env", GONE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["wrote gitops.yaml", "wrote argocd/applicationset.yaml",
                                        "wrote argocd/appproject.yaml"] + \
        [f"deleted {p.relative_to(repo)}" for p in gone]
    assert not (repo / "components" / GONE).exists() and not (repo / "overlays" / GONE).exists()
    # The three files lost the lines that named the environment, and nothing else changed in them.
    diff = git(repo, "diff", "-U0", "--", "gitops.yaml", "argocd").stdout.splitlines()
    added = [ln for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    assert not added and removed, diff
    assert GONE not in identity.load(repo).environments and identity.disagreements(repo) == []
    for name in ("gitops.yaml", "argocd/applicationset.yaml", "argocd/appproject.yaml"):
        assert f"ddp-{GONE}" not in (repo / name).read_text(), name
    assert_validates(repo)


def test_dry_run_writes_nothing(repo):
    before = tree(repo)
    proc = remove_env(repo, "--env", GONE, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "--- a/gitops.yaml\n+++ b/gitops.yaml\n" in proc.stdout
    assert f"--- a/components/{GONE}/policy.yaml\n+++ /dev/null\n" in proc.stdout
    n = len(files_of(repo, GONE))
    assert f"dry run: nothing was written (3 files would change, {n} would be deleted)" in proc.stderr
    assert tree(repo) == before and git(repo, "status", "--porcelain").stdout == ""


def _untracked(repo):
    (repo / "overlays" / GONE / "notes.txt").write_text("mine\n")
    return f"overlays/{GONE}/notes.txt is untracked"


def _changed(repo):
    path = repo / "components" / GONE / "policy.yaml"
    path.write_text(path.read_text() + "# mine\n")
    return f"components/{GONE}/policy.yaml is changed and not committed"


def _staged(repo):
    (repo / "components" / GONE / "extra.yaml").write_text("a: 1\n")
    git(repo, "add", f"components/{GONE}/extra.yaml")
    return f"components/{GONE}/extra.yaml is changed and not committed"


def _ignored(repo):
    with open(repo / ".gitignore", "a") as f:
        f.write("*.bak\n")
    commit(repo, "ignore backups")
    (repo / "overlays" / GONE / "indexed-job" / "kustomization.yaml.bak").write_text("mine\n")
    return f"overlays/{GONE}/indexed-job/kustomization.yaml.bak is ignored by git"


def _referenced(repo):
    path = repo / "overlays" / "kind-cpu" / "trainjob" / "kustomization.yaml"
    path.write_text(path.read_text().replace("../../../components/kind-cpu", f"../../../components/{GONE}"))
    commit(repo, "kind-cpu reads gke-t4's component")
    return (f"overlays/kind-cpu/trainjob/kustomization.yaml: components[0] '../../../components/{GONE}' reads "
            f"components/{GONE}, which make remove-env ENV={GONE} would delete")


def _half_scaled(repo):
    (repo / "overlays" / GONE / "pytorchjob" / transaction.JOURNAL).write_text("{}")
    return f"an interrupted make scale or make new-run left this overlay half written ({transaction.JOURNAL}); " \
           f"run `make recover OVERLAY="


def _not_git(repo):
    shutil.rmtree(repo / ".git")
    return f"{repo} is not a git checkout: make remove-env deletes only files git holds committed"


def _last(repo):
    others = [e for e in identity.environments_in_tree(repo) if e != GONE]
    git(repo, "rm", "-rq", *[f"overlays/{e}" for e in others])
    commit(repo, "only gke-t4 left")
    return f"{GONE} is the last environment of this repository: make another first (make new-env)"


@pytest.mark.parametrize("setup", [_untracked, _changed, _staged, _ignored, _referenced, _half_scaled, _not_git,
                                   _last], ids=lambda f: f.__name__.strip("_"))
def test_a_refusal_is_one_line_and_writes_nothing(repo, setup):
    message = setup(repo)
    before = tree(repo)
    proc = remove_env(repo, "--env", GONE)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ") and message in line, line
    assert tree(repo) == before


@pytest.mark.parametrize("args, message", [
    (["--env", "nope"], "ENV 'nope' is not an environment of this repository ("),
    (["--env=-x"], "ENV '-x' is not an environment of this repository ("),
    (["--env", "../components"], "ENV '../components' is not an environment of this repository ("),
    (["--env", "monitoring"], "ENV 'monitoring' is not an environment of this repository ("),  # a component only
    (["--env", ""], "ENV is required, e.g. make remove-env ENV="),
    ([], "ENV is required, e.g. make remove-env ENV="),
])
def test_a_bad_env_is_one_line_naming_the_environments(repo, args, message):
    before = tree(repo)
    proc = remove_env(repo, *args)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ") and message in line, line
    if "not an environment" in message:
        assert all(e in line for e in identity.environments_in_tree(repo)), line
    assert tree(repo) == before


def _killed_at(repo, step):
    proc = subprocess.Popen([sys.executable, "-m", "policies.edit.remove_env", "--env", GONE, "--root", str(repo)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, transaction.HOOK: step})
    wait_for_hook(proc, step)
    stop(proc, signal.SIGKILL)


def test_a_remove_env_killed_between_two_deletions_is_finished_by_the_next_run(repo):
    gone = files_of(repo, GONE)
    _killed_at(repo, "deleted-2")
    assert (repo / transaction.JOURNAL).is_file()
    assert GONE not in identity.load(repo).environments  # the edits were renamed before the deletions
    assert not gone[0].exists() and not gone[1].exists() and gone[2].exists()
    dry = remove_env(repo, "--env", GONE, "--dry-run")
    assert dry.returncode == 2 and "half written" in dry.stderr, dry.stderr
    again = remove_env(repo, "--env", GONE)
    assert again.returncode == 0, again.stderr
    assert "finished the change an interrupted run began" in again.stderr
    assert f"{GONE}: the interrupted make remove-env that removed it is finished" in again.stderr
    assert not (repo / transaction.JOURNAL).exists() and not list(repo.rglob(f"*{transaction.TMP_SUFFIX}"))
    assert not (repo / "components" / GONE).exists() and not (repo / "overlays" / GONE).exists()
    assert identity.disagreements(repo) == []


def test_a_remove_env_killed_before_its_journal_changes_nothing(repo):
    before = tree(repo)
    _killed_at(repo, "temps-written")
    assert not (repo / transaction.JOURNAL).exists()
    assert {p: b for p, b in tree(repo).items() if not p.name.endswith(transaction.TMP_SUFFIX)} == before
    again = remove_env(repo, "--env", GONE)
    assert again.returncode == 0, again.stderr
    assert not list(repo.rglob(f"*{transaction.TMP_SUFFIX}")) and not (repo / "overlays" / GONE).exists()


def test_a_file_changed_after_the_kill_is_refused_by_name(repo):
    gone = files_of(repo, GONE)
    _killed_at(repo, "deleted-1")
    gone[-1].write_text("changed by hand\n")
    again = remove_env(repo, "--env", GONE)
    assert again.returncode == 2, again.stderr
    (line,) = again.stderr.splitlines()
    assert f"{gone[-1].name}: changed since an interrupted make remove-env began to delete it" in line, line
    assert gone[-1].read_text() == "changed by hand\n" and (repo / transaction.JOURNAL).exists()


def test_the_make_target(repo):
    """make remove-env ENV=... [DRY_RUN=1] in the copy, as a user runs it: the variables reach the command."""
    with_code(repo)
    for name in ("requirements.txt", "requirements-dev.txt"):
        shutil.copy2(REPO / name, repo / name)
    (repo / ".venv").symlink_to(REPO / ".venv")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    make = lambda *a: subprocess.run(["make", "-s", "--no-print-directory", "remove-env", *a], cwd=repo,  # noqa: E731
                                     capture_output=True, text=True, timeout=600, env=env)
    before = tree(repo)
    dry = make(f"ENV={GONE}", "DRY_RUN=1")
    assert dry.returncode == 0 and "dry run: nothing was written" in dry.stderr, dry.stderr
    assert tree(repo) == before
    bad = make("ENV=nope;touch x")
    assert bad.returncode == 2 and "ENV 'nope;touch x' is not an environment" in bad.stderr, bad.stderr
    done = make(f"ENV={GONE}")
    assert done.returncode == 0, done.stderr
    assert "wrote gitops.yaml" in done.stdout and not (repo / "overlays" / GONE).exists()
