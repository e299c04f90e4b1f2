"""One validated, all-or-nothing change to the repository as a whole: `make init` (policies/init.py), `make
new-env` (policies/new_env.py) and `make remove-env` (policies/remove_env.py) rewrite, add or delete files across
gitops.yaml, argocd/, base/, components/, overlays/ and the Makefile. A change maps each path to its new text, or to
None to delete it.

The same guarantees as `make scale` (policies/transaction.py), with the repository root as the folder: a lock (the
root and components/, which the image workflow's pinning locks too), the change validated on a scratch copy first
(`python -m policies.identity` and `python -m policies.cli validate overlays argocd` run inside the copy, so the
copy's own gitops.yaml is the identity they read), then every file written or none through the journal, finished by
the next run if the process is killed part way. New folders a killed run leaves empty are removed by the next run,
and so are the folders a deletion empties."""
from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Mapping

from . import transaction
from .files import rel
from .render import cache_dir
from .yamledit import EditError  # noqa: F401 - the one error of every edit command, raised here too

# What the validation of a copy reads: the repository's inputs, the code that validates them (this code, copied so
# that it finds the copy's gitops.yaml beside it), and the generated schemas (linked: read only).
INPUTS = ("base", "components", "overlays", "argocd", "gitops.yaml", "Makefile")
CODE = ("policies", "trainer")
LINKED = ("schemas", "crds")
HERE = Path(__file__).resolve().parent.parent
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


@contextlib.contextmanager
def locked(root: Path, who: str, dry_run: bool) -> Iterator[list[Path]]:
    """Hold the repository's lock and components/' (the image pinning's), finishing first what an interrupted make
    init, make new-env or make remove-env left (the files it wrote or deleted are yielded); a dry run finishes
    nothing, so it refuses a half-written repository."""
    root = Path(root)
    transaction.sweep_scratch()
    say = lambda m: print(m, file=sys.stderr)  # noqa: E731
    with transaction.locked(root, say=say, who="make init, make new-env or make remove-env", what="repository"), \
            transaction.locked(root / "components", say=say,
                               who="make init, make new-env, make remove-env or pin_image", what="folder"):
        journal = root / transaction.JOURNAL
        finished: list[Path] = []
        if dry_run:
            if journal.exists():
                raise EditError(f"an interrupted make init, make new-env or make remove-env left the repository half "
                                f"written "
                                f"({transaction.JOURNAL}); run `make {who}` again without DRY_RUN to finish it")
        else:
            finished = transaction.recover(root, strays=lambda: _strays(root))
            _prune_empty(root)
            if finished:
                print(f"finished the change an interrupted run began: "
                      f"{', '.join(('wrote ' if p.exists() else 'deleted ') + rel(p, root) for p in finished)}",
                      file=sys.stderr)
        yield finished


def validate(root: Path, changes: dict[Path, str | None]) -> list[str]:
    """The error lines of the repository with `changes` applied, checked on a scratch copy: every repetition of the
    identity against it, and `make validate` over overlays/ and argocd/. Empty when the result is clean."""
    root = Path(root).resolve()
    with transaction.scratch() as copy:
        transaction.hook("validating")
        ignore = shutil.ignore_patterns(f"*{transaction.TMP_SUFFIX}", transaction.JOURNAL, "__pycache__")
        for src in [root / name for name in INPUTS] + [HERE / name for name in CODE]:
            if src.is_dir():
                shutil.copytree(src, copy / src.name, symlinks=True, ignore=ignore)
            elif src.is_file():
                shutil.copy2(src, copy / src.name)
        for name in LINKED:
            if (HERE / name).exists():
                (copy / name).symlink_to(HERE / name)
        for path, text in changes.items():
            target = copy / (_unfollowed(path) if text is None else Path(path).resolve()).relative_to(root)
            if text is None:
                target.unlink(missing_ok=True)
                _remove_emptied(copy, target.parent)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        env = {**os.environ, "POLICIES_CACHE_DIR": str(cache_dir())}
        errors: list[str] = []
        ident = subprocess.run([sys.executable, "-m", "policies.identity"], cwd=copy, env=env, capture_output=True,
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


def _unfollowed(path: Path) -> Path:
    """An absolute path whose last part is not followed: a symbolic link to delete is the link."""
    path = Path(path)
    return path.parent.resolve() / path.name


def _remove_emptied(root: Path, folder: Path) -> None:
    """Remove `folder` and its parents while they are empty, below root's own folders (components/, overlays/)."""
    root = Path(root).resolve()
    folder = Path(folder).resolve()
    while folder != root and folder.parent != root and root in folder.parents:
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            return
        folder = folder.parent


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def unified(root: Path, changes: dict[Path, str | None]) -> str:
    """The change as a unified diff: a file deleted is every line removed (+++ /dev/null), as git shows it."""
    out: list[str] = []
    for path, text in changes.items():
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        name = rel(path, root)
        out += difflib.unified_diff(old.splitlines(keepends=True), (text or "").splitlines(keepends=True),
                                    f"a/{name}" if path.exists() else "/dev/null",
                                    "/dev/null" if text is None else f"b/{name}")
    return "".join(out)


def write(root: Path, changes: dict[Path, str | None]) -> None:
    """Write (or delete) every file of `changes` or none (the caller holds the lock): new folders first, then one
    transaction; folders made for a write that did not happen are removed again, and those a deletion emptied."""
    root = Path(root).resolve()
    made: list[Path] = []
    for path, text in changes.items():
        if text is None:
            continue
        missing = [p for p in reversed(Path(path).resolve().parents) if not p.exists()]
        for d in missing:
            d.mkdir()
            made.append(d)
    try:
        transaction.commit(root, changes)
    except BaseException:
        if not (root / transaction.JOURNAL).exists():  # not decided: nothing was written
            for d in reversed(made):
                with contextlib.suppress(OSError):
                    d.rmdir()
        raise
    for path, text in changes.items():
        if text is None:
            _remove_emptied(root, _unfollowed(path).parent)


def apply(root: Path, changes: Mapping[Path, str | None], dry_run: bool, what: str) -> int:
    """Validate `changes` on a copy, then print the diff (dry run) or write (and delete) them all; 1 when they do not
    validate."""
    changes = {p: t for p, t in changes.items()
               if (_exists(p) if t is None else not p.exists() or p.read_text(encoding="utf-8") != t)}
    if not changes:
        print(f"{what}: nothing to change")
        return 0
    errors = validate(root, changes)
    if errors:
        print(f"error: {what}: the result does not validate, so nothing was written:", file=sys.stderr)
        for line in errors:
            print(f"  {line}", file=sys.stderr)
        return 1
    if dry_run:
        sys.stdout.write(unified(root, changes))
        gone = sum(t is None for t in changes.values())
        n = len(changes) - gone
        print(f"dry run: nothing was written ({n} file{'s' if n != 1 else ''} would change"
              + (f", {gone} would be deleted" if gone else "") + ")", file=sys.stderr)
        return 0
    try:
        write(root, changes)
    except KeyboardInterrupt:
        done = all(not _exists(p) if t is None else p.exists() and p.read_text(encoding="utf-8") == t
                   for p, t in changes.items())
        print(f"interrupted: {'wrote every file' if done else 'nothing was written'}", file=sys.stderr)
        raise
    for path, text in changes.items():
        print(f"{'deleted' if text is None else 'wrote'} {rel(path, root)}")
    return 0
