"""The installable package as users get it: the wheel built from this checkout with its pinned build backend, installed
into a fresh virtualenv outside the checkout, with no network. pip reads wheels only from the wheelhouse `make setup`
downloads (.cache/wheelhouse: requirements.txt's pins and the build backend): PIP_NO_INDEX, PIP_FIND_LINKS, and
proxies that lead nowhere, so any attempt to reach an index fails the test rather than passing quietly."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WHEELHOUSE = REPO / ".cache" / "wheelhouse"
DEAD_PROXY = "http://127.0.0.1:9"


def wheelhouse() -> Path:
    """The offline wheelhouse, or a skip that says why (make's own reason where its bounded download failed); on CI,
    where make test builds it first, its absence without such a reason fails."""
    if (WHEELHOUSE / ".complete").is_file():
        return WHEELHOUSE
    failed = WHEELHOUSE / ".failed"
    if failed.is_file():  # make tried and could not download it (no index reachable): the reason it wrote
        pytest.skip(failed.read_text().strip() or f"{failed} says the download failed")
    if os.environ.get("CI") or os.environ.get("GITHUB_ACTIONS") == "true":
        pytest.fail(f"{WHEELHOUSE} is missing: make test builds it (make setup does too)")
    pytest.skip(f"{WHEELHOUSE} is missing (make setup downloads it from PyPI); the package was not built or installed")


def offline_env(**extra: str) -> dict[str, str]:
    """The environment for pip (and pre-commit's pip): the wheelhouse only, every network route closed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse()), PIP_DISABLE_PIP_VERSION_CHECK="1",
               HTTP_PROXY=DEAD_PROXY, HTTPS_PROXY=DEAD_PROXY, http_proxy=DEAD_PROXY, https_proxy=DEAD_PROXY,
               NO_PROXY="", no_proxy="")
    env.update(extra)
    return env


def outside_checkout(path: Path) -> Path:
    resolved = path.resolve()
    assert REPO.resolve() not in (resolved, *resolved.parents), f"{path} is inside the checkout"
    return resolved


@dataclass
class Installed:
    wheel: Path
    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def command(self) -> str:
        return str(self.bin / "ddp-check")

    def run(self, *args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.command, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=env if env is not None else self.env())

    def env(self, **extra: str) -> dict[str, str]:
        """A user's shell with the virtualenv's bin first; nothing of this checkout on the import path."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "POLICIES_"))}
        env["PATH"] = os.pathsep.join([str(self.bin), "/usr/local/bin", "/usr/bin", "/bin"])
        env.update(extra)
        return env


def build_wheel(out: Path) -> Path:
    """`pip wheel` of the checkout as `pip install <path>` builds it: in an isolated environment with the pinned
    backend (pyproject.toml [build-system]), here from the wheelhouse."""
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
                          capture_output=True, text=True, env=offline_env(), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = sorted(out.glob("ddp_k8s_gitops-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def install(wheel: Path, venv: Path) -> Installed:
    outside_checkout(venv)
    base = getattr(sys, "_base_executable", sys.executable)
    proc = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                          capture_output=True, text=True, env=offline_env(), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return Installed(wheel, venv)


def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Installed:
    """The package built and installed once per test session, outside the checkout."""
    wheelhouse()
    root = outside_checkout(tmp_path_factory.mktemp("package"))
    return install(build_wheel(root / "dist"), root / "venv")
