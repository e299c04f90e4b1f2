"""The repository as the scope of one edit: `make init` (policies/edit/init.py), `make new-env` (policies/edit/new_env.py)
and `make remove-env` (policies/edit/remove_env.py) rewrite, add or delete files across gitops.yaml, argocd/, base/,
components/, overlays/ and the Makefile. A change maps each path to its new text, or to None to delete it.

These commands go through the one edit pipeline (policies/edit/pipeline.py), as make scale does; what this module
gives it is the scope (`scope`: the repository root as the journal's folder, its lock and components/', the stray
files and empty folders a killed run leaves). Their validator is policies/edit/repo_validate.py (`python -m
policies.argocd.identity` and `python -m policies.cli validate overlays argocd` run inside a scratch copy, so the
copy's own gitops.yaml is the identity they read). New folders a killed run leaves empty are removed by the next run,
and so are the folders a deletion empties."""
from __future__ import annotations

import contextlib
from pathlib import Path

from . import pipeline as edit, pin_image
from ..render import transaction
from ..render.files import rel
from .yamledit import EditError as EditError  # noqa: F401 - the one error of every edit command, raised here too

# Folders whose stray temporary files belong to these commands (never an overlay's own: make scale's, which holds
# that overlay's lock and not this one, may be writing there).
OWN_FOLDERS = ("argocd", "base", "components", "docs")  # docs/: make init rewrites docs/install.md


def _environment_folders(root: Path) -> set[str]:
    overlays = root / "overlays"
    return {d.name for d in overlays.iterdir() if d.is_dir() and any(d.glob("*/kustomization.yaml"))} \
        if overlays.is_dir() else set()


def _strays(root: Path) -> list[Path]:
    found = [p for p in root.glob(f".*{transaction.TMP_SUFFIX}") if p.is_file()]
    for d in OWN_FOLDERS:
        if (root / d).is_dir():
            found += [p for p in (root / d).rglob(f".*{transaction.TMP_SUFFIX}") if p.is_file()]
    envs = _environment_folders(root)
    for folder in (root / "overlays").iterdir() if (root / "overlays").is_dir() else []:
        if folder.is_dir() and folder.name not in envs:  # a new environment's folder a killed make new-env began
            found += [p for p in folder.rglob(f".*{transaction.TMP_SUFFIX}") if p.is_file()]
    return found


def _prune_empty(root: Path) -> None:
    """Remove the empty folders a killed make new-env (or make remove-env) left under components/ and overlays/."""
    for top in ("components", "overlays"):
        base = root / top
        if not base.is_dir():
            continue
        for d in sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                d.rmdir()  # only succeeds when empty


def scope(root: Path, command: str) -> edit.Scope:
    """The repository as one edit's scope (policies/edit/pipeline.py): the journal at its root, the root's lock and
    components/' (the image pinning's, whose interrupted pin is finished first), stray temporary files in the
    folders these commands own, and the empty folders a killed make new-env (or make remove-env) left removed after
    recovery. `command` is the make target
    ("init", "new-env", "remove-env"), named where a dry run refuses a half-written repository."""
    root = Path(root).resolve()
    return edit.Scope(
        folder=root,
        locks=(edit.Lock(root, "make init, make new-env or make remove-env", "repository"),
               edit.Lock(root / "components", "make init, make new-env, make remove-env or pin_image", "folder")),
        name=f"make {command}",
        half_written=lambda: (f"an interrupted make init, make new-env or make remove-env left the repository half "
                              f"written ({transaction.JOURNAL}); run `make {command}` again without DRY_RUN to "
                              f"finish it"),
        shown=lambda p: rel(p, root),
        strays=lambda: _strays(root),
        after_recovery=lambda: _prune_empty(root),
        inner=(pin_image.scope(root / "components", "", shown=lambda p: rel(p, root)),))
