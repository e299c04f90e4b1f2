"""Where things are, in one place: the repository's data (schemas/, gitops.yaml, docs/rules.md) and one reading of an
OVERLAY (or PATHS) word for every command.

The code runs two ways. From a checkout (`make validate`, `python -m policies`), the data is the repository's own
files beside `policies/`. From an installed wheel (`pip install`, then `ddp-check`; docs/install.md), the build
copied the same files into `policies/_data/` (pyproject.toml, `force-include`), and there is no repository around the
code: paths on the command line are the user's, read from the working folder."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
BUNDLED = PACKAGE / "_data"
INSTALLED = BUNDLED.is_dir()
REPO = PACKAGE.parent  # the checkout (meaningless when INSTALLED: site-packages)
CHECKOUT: Path | None = None if INSTALLED else REPO
DATA = BUNDLED if INSTALLED else REPO  # holds schemas/, gitops.yaml and docs/rules.md either way
# The console script the wheel installs (pyproject.toml [project.scripts]); `python -m policies` is the same command.
COMMAND = "ddp-check"


def version() -> str:
    """This package's version: the installed distribution's metadata, or, in a checkout, pyproject.toml's."""
    if INSTALLED:
        from importlib.metadata import PackageNotFoundError, version as dist_version

        try:
            return dist_version("ddp-k8s-gitops")
        except PackageNotFoundError:  # pragma: no cover - _data exists only in a built wheel
            return "unknown"
    import tomllib

    try:
        with open(REPO / "pyproject.toml", "rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, tomllib.TOMLDecodeError, KeyError):
        return "unknown (no pyproject.toml beside policies/)"


def cache_root() -> Path:
    """Where caches go: the checkout's .cache/, or, installed, the user's cache folder (never site-packages)."""
    if CHECKOUT is not None:
        return CHECKOUT / ".cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ddp-k8s-gitops"


def repository(start: str | Path) -> Path | None:
    """The nearest folder above `start` with gitops.yaml (or .git); None where there is none."""
    p = Path(start).resolve()
    for d in (p, *p.parents):
        if (d / "gitops.yaml").is_file() or (d / ".git").exists():
            return d
    return None


def repo_root(start: str | Path) -> Path:
    """The repository a manifest belongs to: the nearest folder above it with gitops.yaml (or .git)."""
    return repository(start) or CHECKOUT or Path.cwd()  # installed: the working folder


# The folder of a repository that holds its Argo CD manifests (the AppProject, the ApplicationSet) beside gitops.yaml:
# what `make validate` validates with the overlays, and where policies/argocd/identity.py, changed.py and new_env.py read them.
DELIVERY_FOLDER = "argocd"


def delivery_folder(start: str | Path) -> Path | None:
    """The Argo CD folder of the repository `start` lies in (`repository`), when it has a kustomization; None
    otherwise (a folder in no repository included). In a checkout and installed alike: which of its Applications'
    sources are that repository is read from that repository's own gitops.yaml (engine.synced), not from the
    package's."""
    from .kustomization import kustomization_file

    root = repository(start) if start not in ("<stdin>", "-", "") else None
    folder = root / DELIVERY_FOLDER if root is not None else None
    return folder if folder is not None and kustomization_file(folder) is not None else None


def overlay_path(raw: str, root: Path | None = None, inside: bool = False) -> str:
    """The path `raw` names: as written when it exists from the working folder, else under `root` or
    `root`/overlays (relative to the working folder where it lies below it). `root` is the checkout, or, installed,
    the working folder (so `kind-cpu/indexed-job` names `overlays/kind-cpu/indexed-job` from a fork's root either
    way). With `inside`, only a path inside `root` counts (make scale edits that repository, whatever the working
    folder). `-` (standard input), an empty word and a path found nowhere come back as given, so the caller's own
    error names what the user wrote."""
    from .files import rel

    if raw in ("", "-"):
        return raw
    if root is None:
        root = CHECKOUT or Path.cwd()
    trimmed = raw.rstrip("/") or raw
    cands = [Path(trimmed)]
    if not os.path.isabs(trimmed):
        cands += [root / trimmed, root / "overlays" / trimmed]
    for cand in cands:
        if not os.path.lexists(cand) or (inside and not _below(cand, root)):
            continue
        if cand == cands[0]:
            return trimmed
        return rel(cand)
    return raw


def _below(path: Path, root: Path) -> bool:
    try:
        Path(path).resolve().relative_to(Path(root).resolve())
        return True
    except (ValueError, OSError, RuntimeError):
        return False
