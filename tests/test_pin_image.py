"""The image workflow's pinning step: every environment gets the released tag (CPU environments the -cpu image) and
digest, by round-trip edits that change nothing else; a stale digest never outlives a new tag; a pin that would make
an overlay invalid is refused and nothing is written (the validator make init uses, policies/edit/repo_validate.py)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, copy_repository, stop, wait_for_hook
from policies.argocd import identity

GPU = "sha256:" + "a" * 64
CPU = "sha256:" + "b" * 64
# How the image workflow pins a release (.github/workflows/image.yaml): with both digests. An environment that
# requires digests (64x8-h100: requireImageDigest) refuses a tag alone, so the tests pin as the workflow does.
DIGESTS = ("--digest", GPU, "--cpu-digest", CPU)
# The environments the tree holds, and those that run the CPU image now (its tag ends in -cpu).
ENVIRONMENTS = identity.environments_in_tree(REPO)
CPU_ENVIRONMENTS = [e for e in ENVIRONMENTS if any(
    str(i.get("newTag", "")).endswith("-cpu")
    for i in yaml.safe_load((REPO / f"components/{e}/kustomization.yaml").read_text()).get("images") or [])]


def released(tag):
    """Every environment's tag once `tag` is pinned: the CPU environments get <tag>-cpu."""
    return {env: f"{tag}-cpu" if env in CPU_ENVIRONMENTS else tag for env in ENVIRONMENTS}


@pytest.fixture()
def repo(tmp_path):
    """A copy of what the pin's validator reads of a repository (policies/edit/repo_validate.py INPUTS): it checks the
    identity and make validate over overlays/ and argocd/, so a tree without argocd/ would not validate."""
    return copy_repository(tmp_path / "repo", ("gitops.yaml", "Makefile"))


def pin(root, *args):
    return subprocess.run([sys.executable, "-m", "policies.edit.pin_image", *args, "--root", str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def images(root, overlay):
    out = subprocess.run([str(REPO / ".venv/bin/kubectl"), "kustomize", str(root / "overlays" / overlay)],
                         capture_output=True, text=True, check=True).stdout
    return sorted({line.split("image:", 1)[1].strip() for line in out.splitlines() if "image:" in line})


def test_every_environment_runs_the_release(repo):
    proc = pin(repo, "--tag", "0.2.0", "--digest", GPU, "--cpu-digest", CPU, "--name", "ghcr.io/acme/ddp-trainer")
    assert proc.returncode == 0, proc.stderr
    assert CPU_ENVIRONMENTS and set(CPU_ENVIRONMENTS) != set(ENVIRONMENTS)
    for env in ENVIRONMENTS:
        for overlay in sorted((repo / "overlays" / env).glob("*/kustomization.yaml")):
            trainer = [i for i in images(repo, f"{env}/{overlay.parent.name}") if "ddp-trainer" in i]
            expected = f"0.2.0-cpu@{CPU}" if env in CPU_ENVIRONMENTS else f"0.2.0@{GPU}"
            assert trainer == [f"ghcr.io/acme/ddp-trainer:{expected}"], overlay
    # Only the images entries changed: comments and everything else are byte for byte the same.
    for env in ENVIRONMENTS:
        old = (REPO / f"components/{env}/kustomization.yaml").read_text().splitlines()
        new = (repo / f"components/{env}/kustomization.yaml").read_text().splitlines()
        assert [l for l in old if "newTag" not in l and "digest" not in l] == \
               [l for l in new if "newTag" not in l and "digest" not in l and "newName" not in l]
    assert pin(repo, "--tag", "0.2.0", "--digest", GPU, "--cpu-digest", CPU, "--name",
               "ghcr.io/acme/ddp-trainer").stdout.startswith("every environment already runs 0.2.0")


def test_a_tag_without_digest_drops_the_old_digest(repo):
    """The plan: a digest from an older release would win over the new tag, so a tag alone takes it out."""
    from policies.edit import pin_image

    digested = [e for e in ENVIRONMENTS if e not in CPU_ENVIRONMENTS and any(
        "digest" in i for i in yaml.safe_load((repo / f"components/{e}/kustomization.yaml").read_text())["images"])]
    if not digested:
        pytest.skip("no environment of this repository pins a digest now")
    planned = pin_image.pin(repo, "0.3.0", None, None, None)
    doc = yaml.safe_load(planned[repo / f"components/{digested[0]}/kustomization.yaml"])
    (entry,) = doc["images"]
    assert entry == {"name": identity.load(REPO).image, "newTag": "0.3.0"}


def _requires_digests(env):
    policy = REPO / f"components/{env}/policy.yaml"
    return policy.is_file() and bool((yaml.safe_load(policy.read_text()).get("spec") or {}).get("requireImageDigest"))


def test_a_pin_that_makes_an_overlay_invalid_is_refused_and_nothing_is_written(repo):
    """An environment that requires digests (requireImageDigest, IMG002; 64x8-h100 here): a tag alone would leave its
    overlays failing make validate (and Argo CD's plugin), so the pin is refused, naming each object, and no
    environment changes. The environments and the image are read from the repository (a fork's own)."""
    strict = [e for e in ENVIRONMENTS if _requires_digests(e)]
    if not strict:
        pytest.skip("no environment of this repository sets requireImageDigest")
    image = identity.load(REPO).image
    before = {p: p.read_bytes() for p in (repo / "components").rglob("*") if p.is_file()}
    for args in (("--tag", "0.3.0"), ("--tag", "0.3.0", "--dry-run")):
        proc = pin(repo, *args)
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.splitlines()
        assert lines[0].endswith("components: the result does not validate, so nothing was written:"), lines
        assert lines[1:] and all(ln.startswith("  error IMG002 overlays/") for ln in lines[1:]), lines
        assert {ln.split()[2].split("/")[1] for ln in lines[1:]} == set(strict), lines
        assert f"{image}:0.3.0 is not pinned by a sha256 digest, which {strict[0]} requires" in "\n".join(lines), lines
        assert proc.stdout == ""
        assert {p: p.read_bytes() for p in (repo / "components").rglob("*") if p.is_file()} == before
    assert not list(repo.rglob(".*.scale-tmp")) and not (repo / "components/.scale-journal").exists()
    # With the digests the workflow gives, the same release is pinned.
    assert pin(repo, "--tag", "0.3.0", *DIGESTS).returncode == 0


@pytest.mark.parametrize("args, message", [
    (["--tag", "0.2.0 beta"], "is not a valid image tag"),
    (["--tag", "0.2.0", "--digest", "sha256:xyz"], "is not sha256:<64 hex digits>"),
])
def test_bad_input(repo, args, message):
    proc = pin(repo, *args)
    assert proc.returncode == 2 and message in proc.stderr


def test_feature_components_get_no_images_entry(repo):
    """Only environments (a components/<env> with an overlays/<env>) are pinned: an images entry in monitoring or
    causal-lm would override the environment's own in every overlay that lists it after the environment."""
    before = {d: (repo / f"components/{d}/kustomization.yaml").read_text() for d in ("monitoring", "causal-lm")}
    proc = pin(repo, "--tag", "0.2.0", *DIGESTS)
    assert proc.returncode == 0, proc.stderr
    assert {d: (repo / f"components/{d}/kustomization.yaml").read_text() for d in before} == before
    assert sorted(line.split(" in ")[1].split("/")[-2] for line in proc.stdout.splitlines()) == ENVIRONMENTS


def _start(root, *args, hook):
    env = {**os.environ, "DDP_SCALE_TEST_HOOK": hook}
    return subprocess.Popen([sys.executable, "-m", "policies.edit.pin_image", *args, "--root", str(root)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _killed_at(root, step, *args):
    """Start a pin, wait until it says it stopped at `step`, SIGKILL it."""
    proc = _start(root, *args, hook=step)
    wait_for_hook(proc, step)
    stop(proc, signal.SIGKILL)


def _tags(root):
    return {env: yaml.safe_load((root / f"components/{env}/kustomization.yaml").read_text())["images"][0]["newTag"]
            for env in ENVIRONMENTS}


def test_a_pin_killed_between_two_renames_is_finished_by_the_next_run(repo):
    """Every environment is pinned or none: killed after the first file is renamed, the next run rolls the rest
    forward (never a release running in some environments and not in others) before its own change."""
    before = _tags(repo)
    _killed_at(repo, "renamed-1", "--tag", "0.2.0", *DIGESTS)
    half = _tags(repo)
    assert half != before and half != released("0.2.0")
    assert (repo / "components/.scale-journal").is_file()
    dry = pin(repo, "--tag", "0.2.0", *DIGESTS, "--dry-run")
    assert dry.returncode == 2 and "half pinned" in dry.stderr.splitlines()[-1], dry.stderr
    again = pin(repo, "--tag", "0.2.0", *DIGESTS)
    assert again.returncode == 0, again.stderr
    assert "finished the pinning an interrupted run began" in again.stderr
    assert _tags(repo) == released("0.2.0")
    assert not (repo / "components/.scale-journal").exists() and not list(repo.rglob(".*.scale-tmp"))


def test_a_pin_killed_before_its_journal_changes_nothing(repo):
    before = {p: p.read_bytes() for p in (repo / "components").rglob("*.yaml")}
    _killed_at(repo, "temps-written", "--tag", "0.2.0", *DIGESTS)
    assert {p: p.read_bytes() for p in (repo / "components").rglob("*.yaml")} == before
    assert list(repo.rglob(".*.scale-tmp")) and not (repo / "components/.scale-journal").exists()
    again = pin(repo, "--tag", "0.3.0", *DIGESTS)
    assert again.returncode == 0, again.stderr
    assert _tags(repo) == released("0.3.0")
    assert not list(repo.rglob(".*.scale-tmp"))


def test_a_tree_without_environments_is_one_line_not_a_silent_pass(repo):
    shutil.rmtree(repo / "overlays")
    proc = pin(repo, "--tag", "0.2.0")
    assert proc.returncode == 2 and "no environment folder" in proc.stderr.splitlines()[-1], proc.stderr
    assert "already runs" not in proc.stdout


def test_sigint_between_two_renames_waits_until_every_environment_is_pinned(repo):
    """The pinning goes through the one edit pipeline (policies/edit/pipeline.py), so Ctrl-C waits for the renames as it
    does for make scale: exit 130, every environment pinned, no journal left, and it says so."""
    proc = _start(repo, "--tag", "0.2.0", *DIGESTS, hook="renamed-1:2")
    wait_for_hook(proc, "renamed-1")
    _, err = stop(proc, signal.SIGINT)
    assert proc.returncode == 130, err
    assert "interrupted: wrote every file" in err
    assert _tags(repo) == released("0.2.0")
    assert not (repo / "components/.scale-journal").exists() and not list(repo.rglob(".*.scale-tmp"))
