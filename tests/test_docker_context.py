"""Every image's build context as BuildKit assembles it, from what a clone of this repository holds: each Dockerfile
parsed by BuildKit's own parser (the `dockerfile` package), its ignore file applied as Docker does (docker-py's
port of moby's patternmatcher; `<Dockerfile>.dockerignore` beside the Dockerfile wins over the context's
`.dockerignore`, https://docs.docker.com/build/concepts/context/#filename-and-location), every COPY source found in
that context, and the image's own install steps run against the files its COPY steps place. There is no Docker
engine here: the exact context and the install steps are the test, not a real build."""
from __future__ import annotations

import fnmatch
import posixpath
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import dockerfile
import pytest
from docker.utils.build import PatternMatcher

from conftest import REPO
from package_helpers import offline_env, outside_checkout

DOCKERFILES = ("Dockerfile", "Dockerfile.cpu", "argocd/cmp/Dockerfile")


def ignore_file(name: str) -> Path | None:
    own = REPO / f"{name}.dockerignore"
    if own.is_file():
        return own
    root = REPO / ".dockerignore"
    return root if root.is_file() else None


def patterns(path: Path | None) -> list[str]:
    """The ignore file's patterns as docker reads them: one per line, blank lines and `#` comments left out."""
    if path is None:
        return []
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#")]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The files a clone of this checkout holds (tracked, plus new files git would commit), without .venv, .cache
    or anything else git ignores: what the release workflow's `docker build` sees."""
    root = tmp_path_factory.mktemp("clone")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True, timeout=120).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / rel)
    return root


@dataclass
class Copy:
    sources: list[str]
    dest: str
    line: int


def copies(name: str) -> list[Copy]:
    """The COPY and ADD steps that read the build context (not `--from` another stage), with WORKDIR applied."""
    out, workdir = [], "/"
    for cmd in dockerfile.parse_file(str(REPO / name)):
        if cmd.cmd == "WORKDIR":
            workdir = posixpath.join(workdir, cmd.value[0])
        elif cmd.cmd in ("COPY", "ADD") and not any(f.startswith("--from") for f in cmd.flags):
            *sources, dest = cmd.value
            out.append(Copy(sources, dest if dest.startswith("/") else posixpath.join(workdir, dest) +
                            ("/" if dest.endswith("/") else ""), cmd.start_line))
    return out


def sent(clone: Path, rules: list[str]) -> set[str]:
    """The files of the clone the patterns leave in the context. docker-py's matcher always adds `!.dockerignore`
    (and exclude_paths `!<Dockerfile>`) for the classic builder; BuildKit sends the Dockerfile apart and forces
    nothing into the context, so that entry is dropped."""
    matcher = PatternMatcher(rules)
    assert matcher.patterns[-1].cleaned_pattern == ".dockerignore" and matcher.patterns[-1].exclusion
    matcher.patterns.pop()
    return {p for p in matcher.walk(str(clone)) if (clone / p).is_file()}


def context(clone: Path, name: str) -> set[str]:
    """The files of the clone that reach the builder for this Dockerfile."""
    return sent(clone, patterns(ignore_file(name)))


def matched(files: set[str], source: str) -> list[str]:
    """The context files a COPY source names: the file, everything under a folder, or a wildcard's matches."""
    src = posixpath.normpath(source.lstrip("/"))
    if any(ch in src for ch in "*?["):
        return sorted(f for f in files if fnmatch.fnmatchcase(f, src) or
                      any(fnmatch.fnmatchcase(f[:i], src) for i in range(len(f)) if f[i] == "/"))
    return sorted(f for f in files if f == src or f.startswith(src + "/"))


def assemble(clone: Path, name: str, root: Path) -> Path:
    """The image's files as its COPY steps place them, under `root`; a source missing from the context fails as
    BuildKit does ("not found")."""
    files = context(clone, name)
    for step in copies(name):
        many = len(step.sources) > 1 or step.dest.endswith("/")
        for source in step.sources:
            found = matched(files, source)
            assert found, (f"{name}:{step.line}: COPY {source} is not in the build context "
                           f"({ignore_file(name).relative_to(REPO) if ignore_file(name) else 'no ignore file'})")
            base = posixpath.normpath(source.lstrip("/"))
            for f in found:
                if f == base:  # a file: into the folder, or as the destination itself
                    target = posixpath.join(step.dest, posixpath.basename(f)) if many else step.dest
                else:  # a folder's contents go into the destination
                    target = posixpath.join(step.dest, posixpath.relpath(f, base))
                out = root / target.lstrip("/")
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(clone / f, out)
    return root


@pytest.mark.parametrize("name", DOCKERFILES)
def test_every_copy_source_is_in_the_build_context(clone, name, tmp_path):
    assemble(clone, name, tmp_path / "image")


def test_a_source_the_ignore_file_leaves_out_fails_as_buildkit_does(clone, tmp_path):
    """The check fails where the build does: the plugin image without its ignore file's exception for the
    trainer's contract (the package force-includes trainer/contract.py)."""
    ignore = REPO / "argocd/cmp/Dockerfile.dockerignore"
    assert "!trainer/contract.py" in patterns(ignore)
    files = sent(clone, [p for p in patterns(ignore) if p != "!trainer/contract.py"])
    assert "trainer/contract.py" not in files
    assert "trainer/contract.py" in context(clone, "argocd/cmp/Dockerfile")


def test_the_trainer_images_send_only_the_trainer(clone):
    for name in ("Dockerfile", "Dockerfile.cpu"):
        files = context(clone, name)
        assert files and all(f.startswith("trainer/") for f in files), sorted(files)[:5]
        assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]


def pip_steps(name: str) -> list[list[str]]:
    """The `pip install` commands of the Dockerfile's RUN steps, split as the shell would (`&&` chains)."""
    args = {c.value[0].split("=", 1)[0]: c.value[0].partition("=")[2] for c in dockerfile.parse_file(str(REPO / name))
            if c.cmd == "ARG"}
    out = []
    for cmd in dockerfile.parse_file(str(REPO / name)):
        if cmd.cmd != "RUN" or cmd.json:
            continue
        text = cmd.value[0]
        for k, v in args.items():
            text = text.replace("${" + k + "}", v).replace("$" + k, v)
        for part in text.split("&&"):
            words = shlex.split(part)
            if words[:2] == ["pip", "install"]:
                out.append(words[2:])
    return out


@pytest.mark.slow
def test_the_plugin_image_installs_and_runs_from_its_own_context(clone, tmp_path_factory):
    """argocd/cmp/Dockerfile's install steps, run on the files its COPY steps place (the image's /src), in a
    fresh virtualenv with the wheelhouse as the only index; then the installed ddp-check validates an overlay."""
    root = outside_checkout(tmp_path_factory.mktemp("cmp-image"))
    image = assemble(clone, "argocd/cmp/Dockerfile", root / "image")
    steps = pip_steps("argocd/cmp/Dockerfile")
    assert [s[-1] for s in steps] == ["/src/requirements.txt", "/src"], steps
    venv = root / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=600)
    for step in steps:
        # The image's paths are the assembled tree's; --no-cache-dir is the image's size, not behaviour.
        argv = [str(image / a.lstrip("/")) if a.startswith("/") else a for a in step if a != "--no-cache-dir"]
        proc = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", *argv], capture_output=True,
                              text=True, env=offline_env(), timeout=600)
        assert proc.returncode == 0, f"pip install {' '.join(step)}: {proc.stdout}{proc.stderr}"
    assert (image / "home/argocd/cmp-server/config/plugin.yaml").read_text() == \
        (REPO / "argocd/cmp/plugin.yaml").read_text()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(root)}
    proc = subprocess.run([str(venv / "bin/ddp-check"), "validate", str(clone / "overlays/kind-cpu/indexed-job")],
                          cwd=root, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("OK: 1 rendered folder"), proc.stdout
    # The plugin's own command, as cmp-server starts it: the operator policy the image carries is found.
    proc = subprocess.run([str(venv / "bin/ddp-check"), "cmp-init"], cwd=clone / "overlays/kind-cpu/indexed-job",
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "operator policy argocd-plugin" in proc.stderr, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cpu"])
def test_the_trainer_image_holds_what_its_command_runs(clone, name, tmp_path):
    """The trainer image's /app, as its COPY steps place it, starts the trainer: `train.py --help`, then one epoch
    of the synthetic task, through this interpreter (its torch and the trainer's pins are the image's, tests/test_trainer_image.py), with nothing of
    the checkout on the import path."""
    image = assemble(clone, name, tmp_path / "image")
    steps = pip_steps(name)
    assert steps and all("/app/trainer/requirements.txt" in s or any(a.startswith("torch==") for a in s)
                         for s in steps), steps
    proc = subprocess.run([sys.executable, "-E", "-s", str(image / "app/trainer/train.py"), "--help"],
                          cwd=image / "app", capture_output=True, text=True, timeout=900,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--task" in proc.stdout
    # --help reads the arguments only (it imports no torch): one step of a world of one imports the training side
    proc = subprocess.run([sys.executable, "-E", "-s", str(image / "app/trainer/train.py"), "--task", "synthetic",
                           "--samples", "64", "--features", "4", "--batch-size", "32", "--epochs", "1",
                           "--out-dir", str(tmp_path / "out"), "--run-id", "image"],
                          cwd=image / "app", capture_output=True, text=True, timeout=900,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0 and "[DONE]" in proc.stdout, proc.stdout + proc.stderr
