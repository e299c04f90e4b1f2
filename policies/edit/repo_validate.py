"""The validator of every edit command that rewrites the repository (`make init`, `make new-env`, `make remove-env`:
policies/edit/repo_edit.py; the image pinning: policies/edit/pin_image.py): the repository with the change applied, checked on
a scratch copy by `python -m policies.argocd.identity` and `python -m policies.cli validate overlays argocd`, run inside the
copy so that the copy's own gitops.yaml is the identity they read. A module of its own so that pin_image, which
repo_edit's scope names, can use it without an import cycle."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import pipeline as edit
from ..render import transaction
from ..render.render import cache_dir
from ..render.paths import REPO

# What the validation of a copy reads: the repository's inputs, the code that validates them (this code, copied so
# that it finds the copy's gitops.yaml beside it), and the generated schemas (linked: read only).
INPUTS = ("base", "components", "overlays", "argocd", "gitops.yaml", "Makefile")
CODE = ("policies", "trainer")
LINKED = ("schemas", "crds")


def validate(root: Path, changes: dict[Path, str | None]) -> list[str]:
    """The error lines of the repository with `changes` applied, checked on a scratch copy: every repetition of the
    identity against it, and `make validate` over overlays/ and argocd/. Empty when the result is clean."""
    root = Path(root).resolve()
    with transaction.scratch() as copy:
        transaction.hook("validating")
        ignore = shutil.ignore_patterns(f"*{transaction.TMP_SUFFIX}", transaction.JOURNAL, "__pycache__")
        for src in [root / name for name in INPUTS] + [REPO / name for name in CODE]:
            if src.is_dir():
                shutil.copytree(src, copy / src.name, symlinks=True, ignore=ignore)
            elif src.is_file():
                shutil.copy2(src, copy / src.name)
        for name in LINKED:
            if (REPO / name).exists():
                (copy / name).symlink_to(REPO / name)
        for path, text in changes.items():
            target = copy / (edit.unfollowed(path) if text is None else Path(path).resolve()).relative_to(root)
            if text is None:
                target.unlink(missing_ok=True)
                edit.remove_emptied(copy, target.parent)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        env = {**os.environ, "POLICIES_CACHE_DIR": str(cache_dir())}
        errors: list[str] = []
        ident = subprocess.run([sys.executable, "-m", "policies.argocd.identity"], cwd=copy, env=env, capture_output=True,
                               text=True, timeout=600)
        errors += [ln.removeprefix("error: ") for ln in ident.stderr.splitlines() if ln.startswith("error: ")]
        if ident.returncode not in (0, 1) and not errors:
            errors.append(ident.stderr.strip().splitlines()[-1] if ident.stderr.strip() else "identity check failed")
        proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "overlays", "argocd"], cwd=copy,
                              env=env, capture_output=True, text=True, timeout=1800)
        errors += [ln for ln in proc.stdout.splitlines() if ln.startswith("error ")]
        if proc.returncode not in (0, 1) or (proc.returncode == 1 and not any(ln.startswith("error ")
                                                                               for ln in proc.stdout.splitlines())):
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            errors.append(f"make validate on the result: {tail[-1] if tail else f'exit {proc.returncode}'}")
        prefix = str(copy) + os.sep
        return [e.replace(prefix, "") for e in errors]
