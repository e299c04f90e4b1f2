"""`make init`: the template made yours in one validated transaction. Every repetition of the identity is rewritten
(and nothing else), the result validates, a bad argument or a result that does not validate writes nothing, and a
run killed between two renames is finished by the next."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, stop, wait_for_hook
from policies.argocd import identity
from policies.edit.init import PUBLISHED, _slug, sidecar_image

URL = "https://git.acme.io/ml/ddp-gitops.git"
IMAGE = "registry.acme.io/ml/ddp-trainer"
# The files that deploy: none may still name the template's example repository or registry after make init.
DEPLOYED = ("gitops.yaml", "Makefile", "argocd", "base", "components", "overlays")
EXAMPLE = re.compile(re.escape(identity.EXAMPLE_REPO_URL) + "|" + re.escape(identity.EXAMPLE_REGISTRY))


def copy_repo(root):
    """The repository's inputs, as the template ships them: a fork that ran make init gets its identity put back
    to the example's in the copy, so that these tests start where a new user starts."""
    for d in ("base", "components", "overlays", "argocd"):
        shutil.copytree(REPO / d, root / d)
    for f in ("gitops.yaml", "Makefile", *PUBLISHED):
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / f, root / f)
    ident = identity.load(root)
    for path in [root / "gitops.yaml", root / "Makefile", *(root / "argocd").rglob("*.yaml"),
                 *(root / "base").rglob("*.yaml"), *(root / "components").glob("*/kustomization.yaml"),
                 *(root / f for f in PUBLISHED)]:
        text = path.read_text()
        new = text.replace(ident.repo_url.removesuffix(".git"), identity.EXAMPLE_REPO_URL.removesuffix(".git"))
        if _slug(ident.repo_url) and _slug(ident.repo_url) != _slug(identity.EXAMPLE_REPO_URL):
            new = re.sub(re.escape(_slug(ident.repo_url)) + "(?=@)", _slug(identity.EXAMPLE_REPO_URL), new)
        new = re.sub(re.escape(ident.image) + r"(?=[:@\s\"']|$)", identity.EXAMPLE_IMAGE, new, flags=re.M)
        new = re.sub(re.escape(sidecar_image(ident.image)) + r"(?=[:@\s\"']|$)", sidecar_image(identity.EXAMPLE_IMAGE),
                     new, flags=re.M)
        if new != text:
            path.write_text(new)
    return root


@pytest.fixture()
def repo(tmp_path):
    return copy_repo(tmp_path / "repo")


def init(root, *args, env=None):
    return subprocess.run([sys.executable, "-m", "policies.edit.init", *args, "--root", str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=env)


def snapshot(root):
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def example_mentions(root):
    """Where the deployed files name the example (the Lua checks' testdata under argocd/ are fixtures, not deployed)."""
    out = []
    for name in DEPLOYED:
        path = root / name
        for f in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()
                                                       and "testdata" not in p.relative_to(path).parts):
            for i, line in enumerate(f.read_text().splitlines(), 1):
                if EXAMPLE.search(line):
                    out.append(f"{f.relative_to(root)}:{i}: {line.strip()}")
    return out


def test_init_rewrites_every_repetition_and_nothing_else(repo):
    before = snapshot(repo)
    assert example_mentions(repo), "the template names its example repository and registry"
    ident = identity.load(repo)
    env = sorted(ident.environments)[0]
    proc = init(repo, "--repo-url", URL, "--image", IMAGE, "--clusters", f"{env}=prod-a",
                "--namespaces", f"{env}=team-a")
    assert proc.returncode == 0, proc.stderr
    assert example_mentions(repo) == []
    now = identity.load(repo)
    assert (now.repo_url, now.image) == (URL, IMAGE)
    assert now.environments[env] == identity.Place("prod-a", "team-a")
    assert identity.disagreements(repo, now) == []
    after = snapshot(repo)
    changed = sorted(p for p in after if after[p] != before.get(p))
    assert [str(p) for p in changed] == sorted(line.removeprefix("wrote ") for line in proc.stdout.splitlines())
    # Round-trip edits: every changed line is one that named the old identity.
    old_words = [ident.repo_url.removesuffix(".git"), _slug(ident.repo_url) + "@", ident.image,
                 sidecar_image(ident.image), ident.environments[env].cluster, ident.environments[env].namespace]
    for name in changed:
        old_lines, new_lines = before[name].decode().splitlines(), after[name].decode().splitlines()
        assert len(old_lines) == len(new_lines), name
        for a, b in zip(old_lines, new_lines):
            assert a == b or any(w in a for w in old_words), (name, a, b)
    # What other repositories are told to use names the new repository: the Action, the hook, the package.
    for name in PUBLISHED:
        text = (repo / name).read_text()
        assert "example/ddp-k8s-gitops" not in text, name
        assert "ml/ddp-gitops@" in text or URL.removesuffix(".git") in text, name
    again = init(repo, "--repo-url", URL, "--image", IMAGE)
    assert again.returncode == 0 and again.stdout.strip() == "make init: nothing to change", again.stderr


def test_the_result_validates_and_renders_your_image(repo):
    assert init(repo, "--repo-url", URL, "--image", IMAGE).returncode == 0
    shutil.copytree(REPO / "policies", repo / "policies", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "trainer", repo / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "schemas").symlink_to(REPO / "schemas")
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "overlays", "argocd"], cwd=repo,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    rendered = subprocess.run([str(REPO / ".venv/bin/kubectl"), "kustomize", str(next(
        (repo / "overlays").glob("*/*/kustomization.yaml")).parent)], capture_output=True, text=True, check=True)
    images = {ln.split("image:", 1)[1].strip() for ln in rendered.stdout.splitlines() if "image:" in ln}
    assert images and all(i.startswith(IMAGE + ":") for i in images if "ddp-trainer" in i), images


def test_a_new_namespace_moves_everywhere_it_lives(repo):
    """NAMESPACES renames an environment's namespace in gitops.yaml, the ApplicationSet element, the AppProject's
    destination and the Namespace its clusterResourceWhitelist permits by name: argocd/ validates with no
    warning (ARGO008 would say the sync is refused)."""
    ident = identity.load(repo)
    env = sorted(ident.environments)[0]
    old = ident.environments[env].namespace
    assert init(repo, "--repo-url", URL, "--image", IMAGE, "--namespaces", f"{env}=team-a").returncode == 0
    project = yaml.safe_load((repo / "argocd/appproject.yaml").read_text())["spec"]
    names = {e["name"] for e in project["clusterResourceWhitelist"] if e["kind"] == "Namespace"}
    assert "team-a" in names and old not in names, names
    shutil.copytree(REPO / "policies", repo / "policies", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "trainer", repo / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "schemas").symlink_to(REPO / "schemas")
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "argocd"], cwd=repo,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "0 errors, 0 warnings" in proc.stdout, proc.stdout[-3000:]


def test_dry_run_prints_the_diff_and_writes_nothing(repo):
    before = snapshot(repo)
    proc = init(repo, "--repo-url", URL, "--image", IMAGE, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"+  repoURL: {URL}" in proc.stdout and f"+  image: {IMAGE}" in proc.stdout
    assert "dry run: nothing was written" in proc.stderr
    assert snapshot(repo) == before


@pytest.mark.parametrize("args, message", [
    ([], "nothing to do: give REPO_URL="),
    (["--repo-url", identity.EXAMPLE_REPO_URL], "REPO_URL is the template's example repository"),
    (["--repo-url", "not a url"], "REPO_URL 'not a url' is not a repository URL"),
    (["--image", IMAGE + ":0.1.0"], f"names a tag or digest: give the repository alone ({IMAGE})"),
    (["--image", "Registry.acme.io/ML/x"], "is not an image repository"),
    (["--image", "ghcr.io/example/other"], "is in the template's example registry"),
    (["--clusters", "nowhere=c"], "CLUSTERS: 'nowhere' is not an environment gitops.yaml declares"),
    (["--namespaces", "x"], "NAMESPACES: 'x' is not <environment>=<value>"),
    (["--namespaces", "kind-cpu=kube-public"], "NAMESPACES: 'kube-public' (for kind-cpu) is the cluster's own"),
    (["--namespaces", "gke-t4=argocd"], "NAMESPACES: 'argocd' (for gke-t4) is Argo CD's own namespace"),
])
def test_a_bad_argument_is_one_line_and_writes_nothing(repo, args, message):
    before = snapshot(repo)
    proc = init(repo, *args)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ") and message in line, line
    assert snapshot(repo) == before


def test_a_result_that_does_not_validate_writes_nothing(repo):
    """An overlay that no longer renders: the result is validated on a copy and refused before anything is
    written."""
    overlay = next((repo / "overlays").glob("*/*/patches/set-topology.yaml"))
    overlay.write_text(overlay.read_text() + "\nnot: [valid\n")
    before = snapshot(repo)
    proc = init(repo, "--repo-url", URL, "--image", IMAGE)
    assert proc.returncode == 1, proc.stderr
    assert "the result does not validate, so nothing was written" in proc.stderr
    assert snapshot(repo) == before


def test_a_repository_that_already_disagrees_is_refused(repo):
    make = repo / "Makefile"
    make.write_text(make.read_text().replace(f"?= {identity.load(repo).image}", "?= registry.acme.io/other"))
    proc = init(repo, "--repo-url", URL, "--image", IMAGE)
    assert proc.returncode == 2 and "already disagrees with gitops.yaml's identity" in proc.stderr, proc.stderr


def test_an_init_killed_between_two_renames_is_finished_by_the_next_run(repo):
    env = {**os.environ, "DDP_SCALE_TEST_HOOK": "renamed-2"}
    proc = subprocess.Popen([sys.executable, "-m", "policies.edit.init", "--repo-url", URL, "--image", IMAGE, "--root",
                             str(repo)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_for_hook(proc, "renamed-2")
    stop(proc, signal.SIGKILL)
    assert (repo / ".scale-journal").is_file()
    assert identity.disagreements(repo) != []  # half written
    dry = init(repo, "--repo-url", URL, "--image", IMAGE, "--dry-run")
    assert dry.returncode == 2 and "half written" in dry.stderr, dry.stderr
    again = init(repo, "--repo-url", URL, "--image", IMAGE)
    assert again.returncode == 0, again.stderr
    assert "finished the change an interrupted run began" in again.stderr
    assert not (repo / ".scale-journal").exists() and not list(repo.rglob(".*.scale-tmp"))
    assert identity.disagreements(repo) == [] and example_mentions(repo) == []


def test_an_init_killed_before_its_journal_changes_nothing(repo):
    before = snapshot(repo)
    env = {**os.environ, "DDP_SCALE_TEST_HOOK": "temps-written"}
    proc = subprocess.Popen([sys.executable, "-m", "policies.edit.init", "--repo-url", URL, "--image", IMAGE, "--root",
                             str(repo)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_for_hook(proc, "temps-written")
    stop(proc, signal.SIGKILL)
    assert list(repo.rglob(".*.scale-tmp")) and not (repo / ".scale-journal").exists()
    assert {p: b for p, b in snapshot(repo).items() if not p.name.endswith(".scale-tmp")} == before
    again = init(repo, "--repo-url", URL, "--image", IMAGE)
    assert again.returncode == 0, again.stderr
    assert not list(repo.rglob(".*.scale-tmp")) and example_mentions(repo) == []


def test_an_interrupted_pin_is_finished_before_init_changes_the_repository(repo):
    """The image pinning locks components/ alone and keeps its journal there; make init holds that lock too, so the
    one pipeline (policies/edit/pipeline.py) finishes a killed pin first instead of deleting its temporary files as strays
    (which left components/ half pinned for good)."""
    env = {**os.environ, "DDP_SCALE_TEST_HOOK": "renamed-1"}
    proc = subprocess.Popen([sys.executable, "-m", "policies.edit.pin_image", "--tag", "0.2.0", "--digest",
                             "sha256:" + "a" * 64, "--cpu-digest", "sha256:" + "b" * 64, "--root", str(repo)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_for_hook(proc, "renamed-1")
    stop(proc, signal.SIGKILL)
    assert (repo / "components/.scale-journal").is_file()
    dry = init(repo, "--repo-url", URL, "--image", IMAGE, "--dry-run")
    assert dry.returncode == 2 and "half pinned" in dry.stderr.splitlines()[-1], dry.stderr
    again = init(repo, "--repo-url", URL, "--image", IMAGE)
    assert again.returncode == 0, again.stderr
    assert "components: finished the pinning an interrupted run began: wrote " in again.stderr
    assert not list(repo.rglob(".scale-journal")) and not list(repo.rglob(".*.scale-tmp"))
    tags = {env: str(e.get("newTag")) for env in identity.environments_in_tree(repo)
            for e in yaml.safe_load((repo / f"components/{env}/kustomization.yaml").read_text())["images"]}
    assert all(t.removesuffix("-cpu") == "0.2.0" for t in tags.values()), tags
    assert identity.disagreements(repo) == [] and example_mentions(repo) == []


@pytest.mark.parametrize("command,hook", [
    (["policies.edit.init", "--repo-url", URL, "--image", IMAGE], "renamed-2"),
    (["policies.edit.pin_image", "--tag", "0.2.0", "--digest", "sha256:" + "a" * 64, "--cpu-digest", "sha256:" + "b" * 64],
     "renamed-1"),
], ids=["init", "pin_image"])
def test_a_half_written_repository_does_not_validate_until_make_recover_finishes_it(repo, command, hook):
    """Issue 32 item 5: killed between its renames, make init (journal at the root) or the image pinning (journal
    in components/) leaves every overlay's inputs half written: validation refuses each overlay in one line naming
    `make recover` (it said OK before), and `make recover` without OVERLAY finishes the change."""
    proc = subprocess.Popen([sys.executable, "-m", *command, "--root", str(repo)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "DDP_SCALE_TEST_HOOK": hook})
    wait_for_hook(proc, hook)
    stop(proc, signal.SIGKILL)
    assert list(repo.rglob(".scale-journal"))
    validate = [sys.executable, "-m", "policies.cli", "validate", "--format", "text", str(repo / "overlays")]
    refused = subprocess.run(validate, cwd=REPO, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in refused.stdout.splitlines() if "half written" in ln]
    assert refused.returncode == 1 and len(lines) == len(list(repo.glob("overlays/*/*/kustomization.yaml"))), \
        refused.stdout[-2000:]
    assert all("run `make recover` to finish it" in ln and "\n" not in ln for ln in lines)
    recover = subprocess.run([sys.executable, "-m", "policies.edit.scale", "recover", "", "--root", str(repo)], cwd=REPO,
                             capture_output=True, text=True, timeout=600)
    assert recover.returncode == 0, recover.stderr
    assert "finished the" in recover.stderr and "the repository: no change is pending" in recover.stderr
    assert not list(repo.rglob(".scale-journal")) and not list(repo.rglob(".*.scale-tmp"))
    again = subprocess.run(validate, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert "half written" not in again.stdout, again.stdout[-2000:]
