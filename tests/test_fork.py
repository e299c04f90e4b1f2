"""A fork's own CI after docs/deploy.md's steps (issue 31 item 3): in a fresh copy of the repository, `make init`
with other clusters and namespaces, then `make new-env` twice (the GPU environment docs/deploy.md makes, as written
there, and a CPU one), then `make validate` (no error, no ARGO warning) and the fork's `make test-fast`: the tests
read the identity and the environments from the repository, so they pass on every fork at every step. The fork's
test-fast leaves out only the modules in UNCHANGED_BY_A_FORK, which read nothing but code and test data that the fork
does not change (asserted below: its commit touches none of their inputs), so their verdict there is the one this
checkout's own run gives; mypy alone, cold in a fresh copy, was a third of the fork's test-fast."""
from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REPO, run_bounded
from test_docs import _env, blocks, commands, fresh_copy, skip_in_a_fork

URL = "https://git.acme.io/ml/ddp-gitops.git"
IMAGE = "registry.acme.io/ml/ddp-trainer"


# Unit-level modules whose only inputs are the Python code (policies/, trainer/, scripts/, bench/), tests/ and
# pyproject.toml: mypy, the launcher and trainer units, the ported conformance cases, the shell and Go-match parsers.
UNCHANGED_BY_A_FORK = (
    "test_typecheck", "test_architecture", "test_trainer_units", "test_trainer_idx", "test_trainer_state",
    "test_trainer_phases", "test_trainer_lm_step", "test_telemetry", "test_torchrun", "test_accelerate_config",
    "test_bench_lm", "test_conformance", "test_trainjob_conformance_reasons", "test_volcano_webhook", "test_katib",
    "test_launchers", "test_kube", "test_gomatch", "test_shell")
# What those modules read, which the fork's commit must leave as it is.
THEIR_INPUTS = ("policies/", "trainer/", "scripts/", "bench/", "tests/", "pyproject.toml")


def deploy_new_env() -> list[str]:
    """docs/deploy.md's `make new-env` command, word for word (its run block is what this fork runs)."""
    for b in blocks("docs/deploy.md"):
        if b.kind == "run":
            for cmd in commands(b.text):
                if cmd.startswith("make new-env "):
                    return cmd.split()
    raise AssertionError("docs/deploy.md runs no make new-env")


def make(fork, *args, timeout=600) -> subprocess.CompletedProcess[str]:
    return run_bounded(["make", "-s", "--no-print-directory", *args], timeout, cwd=fork, env=_env(fork))


def carry_wheelhouse(root) -> None:
    """The fork's CI runs `make test`, which downloads the wheelhouse before pytest starts; the copy gets this
    checkout's (hard-linked), so that its package tests run as they would there (on CI, a missing one fails them)."""
    src = REPO / ".cache" / "wheelhouse"
    if (src / ".complete").is_file():
        (root / ".cache").mkdir(exist_ok=True)
        subprocess.run(["cp", "-al", str(src), str(root / ".cache" / "wheelhouse")], check=True)


@pytest.fixture(scope="module")
def fork(tmp_path_factory):
    skip_in_a_fork("docs/deploy.md's fork flow")
    root = fresh_copy(tmp_path_factory.mktemp("fork") / "repo", own_venv=True)
    carry_wheelhouse(root)
    steps = [
        ["make", "init", f"REPO_URL={URL}", f"IMAGE={IMAGE}", "CLUSTERS=gke-t4=prod-gke kind-cpu=dev-kind",
         "NAMESPACES=gke-t4=ml-train"],
        deploy_new_env(),
        ["make", "new-env", "ENV=cpu-x3", "FROM=kind-cpu", "NODES=3", "PROCS_PER_NODE=2"],
    ]
    for step in steps:
        proc = make(root, *step[1:])
        assert proc.returncode == 0, (step, proc.stdout[-3000:], proc.stderr[-3000:])
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "ours: clusters, namespaces, an A100 and a CPU environment"], cwd=root,
                   check=True, env=_env(root))
    return root


def fork_changes(fork) -> list[str]:
    """The files the fork's own commit (init and both new-env) changed, added or removed."""
    return subprocess.run(["git", "diff", "--name-only", "HEAD~1", "HEAD"], cwd=fork, capture_output=True, text=True,
                          check=True).stdout.split()


def test_the_fork_validates_without_errors_or_argo_warnings(fork):
    proc = make(fork, "validate")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"; 0 errors, 0 warnings, ", summary), summary
    assert not [line for line in proc.stdout.splitlines() if re.match(r"(error|warning) ARGO", line)]
    for env in ("a100-2x8", "cpu-x3"):
        assert (fork / "overlays" / env).is_dir() and f"{env}" in (fork / "gitops.yaml").read_text()
    project = (fork / "argocd" / "appproject.yaml").read_text()
    assert "ml-train" in project and "prod-gke" in project and URL in project
    assert "example/ddp-k8s-gitops" not in (fork / "action.yml").read_text()


def test_the_forks_own_test_fast_passes(fork):
    """What the fork's CI runs first; the slow half (simulations, the package, the documents) is the same code. The
    modules whose inputs the fork leaves as they are (UNCHANGED_BY_A_FORK) are left out (K=, make test-fast's -k)."""
    changes = fork_changes(fork)
    assert "gitops.yaml" in changes and any(c.startswith("overlays/cpu-x3/") for c in changes), changes
    assert not [c for c in changes if c.startswith(THEIR_INPUTS)], changes
    for module in UNCHANGED_BY_A_FORK:
        assert (fork / "tests" / f"{module}.py").is_file(), module
    proc = make(fork, "test-fast", "K=" + " and ".join(f"not {m}.py" for m in UNCHANGED_BY_A_FORK), timeout=800)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert re.search(r"\d+ passed", tail) and " failed" not in tail.splitlines()[-1], tail
