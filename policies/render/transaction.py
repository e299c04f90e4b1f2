"""All-or-nothing writes of several files of one folder (an overlay for make scale and make new-run, the repository
root for make init, make new-env and make remove-env, components/ for the image pinning): a lock per folder, a
journal that makes an interrupted write finish on the next run, and scratch folders that a killed run cannot leave
behind. The edit commands reach it through the one edit pipeline, policies/edit/pipeline.py, the only caller of `commit`
(tests/test_architecture.py).

The write (`commit`): every new file is written beside its target as `.<name>.<random>.scale-tmp` and fsynced; then
the journal `.scale-journal` (the targets, their temporary files and the sha256 of each target's old and new bytes)
is written, fsynced and renamed into the overlay folder: from that moment the change is decided. Each temporary file
is renamed over its target, the folders are fsynced and the journal is removed. Killed before the journal exists,
the targets are untouched and the next run deletes the temporary files (rolled back); killed after, the next run
renames what is left (rolled forward). SIGINT, SIGTERM and SIGHUP wait until the renames are done.

A change whose new text is None deletes its target (make remove-env): the journal names it with the sha256 of the
bytes it held and no temporary file, and the deletions follow the renames (rolled forward like them: a target
still holding those bytes is deleted by the next run; one changed since is refused, naming it)."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from .files import rel
from .paths import repository

JOURNAL = ".scale-journal"
TMP_SUFFIX = ".scale-tmp"
SCRATCH_PREFIX = "ddp-scale-"
# Tests stop a real run between two steps: DDP_SCALE_TEST_HOOK=<step>[:<seconds>] (steps: temps-written,
# journal-written, renamed-1, renamed-2, ..., then deleted-1, deleted-2, ...). It prints `hook: <step>` on standard
# error, then sleeps.
HOOK = "DDP_SCALE_TEST_HOOK"


class TransactionError(Exception):
    """A lock that cannot be had, or a pending change that cannot be finished: one line."""


def hook(step: str) -> None:
    want = os.environ.get(HOOK, "")
    name, _, seconds = want.partition(":")
    if name == step:
        os.write(2, f"hook: {step}\n".encode())
        time.sleep(float(seconds or 3600))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _held(path: Path) -> bytes:
    """What a file to delete holds: a symbolic link's target (never followed), else its bytes."""
    return os.readlink(path).encode() if path.is_symlink() else path.read_bytes()


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durable(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    os.chmod(path, mode)  # O_CREAT's mode passes through the umask; keep the target's


def pending(folder: Path) -> str | None:
    """One line when an interrupted write left `folder` half changed (a journal), else None."""
    if not (Path(folder) / JOURNAL).exists():
        return None
    shown = rel(folder)
    return (f"{shown}: an interrupted make scale or make new-run left this overlay half written ({JOURNAL}); "
            f"run `make recover OVERLAY={shown}` to finish it")


def pending_around(folder: Path) -> str | None:
    """`pending(folder)`, else the same for the repository around it (paths.repository):
    a journal at its root (make init, make new-env, make remove-env) or in its components/ (the image pinning) leaves
    what every overlay reads half written, until `make recover` (no OVERLAY) finishes it."""
    own = pending(folder)
    root = repository(folder)
    if own is not None or root is None:
        return own
    for where, who in ((root, "make init, make new-env or make remove-env"),
                       (root / "components", "image pinning (pin_image)")):
        if (where / JOURNAL).exists():
            return (f"{rel(where / JOURNAL)}: an interrupted {who} left the repository half written; run "
                    "`make recover` to finish it")
    return None


# ---------------------------------------------------------------- the lock


@contextlib.contextmanager
def locked(folder: Path, wait: float = 60.0, say: Callable[[str], object] | None = None, who: str = "make scale or make new-run",
           what: str = "overlay") -> Iterator[None]:
    """Hold the overlay's lock (flock on the folder itself: nothing to leave behind, released when the process dies).
    Waits up to `wait` seconds for another run, telling `say` once, then fails with one line; `who` and `what` name
    the commands that take this lock and the folder (pin_image locks components/)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + wait
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
            if time.monotonic() >= deadline:
                raise TransactionError(f"{rel(folder)}: another {who} is changing this {what} and did not "
                                       f"finish within {wait:.0f} s; nothing was written")
            if not told and say is not None:
                say(f"{rel(folder)}: waiting for another {who} on this {what} to finish")
                told = True
            time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # releases the lock


# ---------------------------------------------------------------- recovery


def journal_temps(folder: Path) -> set[Path]:
    """The temporary files the journal in `folder` names (resolved; none without a readable journal)."""
    try:
        entries = json.loads((Path(folder) / JOURNAL).read_text(encoding="utf-8"))["files"]
        return {(Path(folder) / e["tmp"]).resolve() for e in entries if not e.get("delete")}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def recover(folder: Path, strays: Callable[[], Iterable[Path]] | None = None,
            keep: Iterable[Path] = ()) -> list[Path]:
    """Finish what an interrupted run left in `folder` (the caller holds the lock): with a journal, rename its
    remaining temporary files over their targets (rolled forward); without one, delete stray temporary files
    (rolled back; `strays` lists them where `folder` holds more than the caller's files, as the repository root
    does for make init), except those in `keep` (resolved: named by another pending journal, as make new-env's at
    the root names files under components/, pin_image's folder). Returns the files rolled forward. A target
    changed by hand since refuses, naming it."""
    folder = Path(folder)
    journal = folder / JOURNAL
    done: list[Path] = []
    if journal.exists():
        try:
            entries = json.loads(journal.read_text(encoding="utf-8"))["files"]
            plan = [(_inside(folder, e["target"]), _inside(folder, e["tmp"]), e["old"], e["new"]) for e in entries
                    if not e.get("delete")]
            gone = [(_inside(folder, e["target"]), e["old"]) for e in entries if e.get("delete")]
            if any(not tmp.name.endswith(TMP_SUFFIX) for _, tmp, _, _ in plan):
                raise ValueError(f"a temporary file not named *{TMP_SUFFIX}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TransactionError(f"{rel(journal)}: unreadable ({exc}); compare the overlay with git, fix it by "
                                   f"hand and delete {JOURNAL}") from None
        for target, tmp, old, new in plan:
            # A target the change creates (make new-env) did not exist: its old bytes are the empty ones.
            current = _sha(target.read_bytes() if target.exists() else b"")
            if tmp.exists():
                if current not in (old, new):
                    raise TransactionError(f"{rel(target)}: changed since an interrupted make scale (or pin) "
                                           f"began to write it; compare it with {tmp.name}, keep what you want and "
                                           f"delete {JOURNAL}")
                if _sha(tmp.read_bytes()) != new:
                    raise TransactionError(f"{rel(tmp)}: not the bytes {JOURNAL} promised; compare it with "
                                           f"{target.name}, keep what you want and delete {JOURNAL}")
            elif current != new:
                raise TransactionError(f"{rel(target)}: neither its old nor its new bytes and {tmp.name} is "
                                       f"gone; fix it by hand and delete {JOURNAL}")
        for target, old in gone:
            if os.path.lexists(target) and _sha(_held(target)) != old:
                raise TransactionError(f"{rel(target)}: changed since an interrupted make remove-env began to "
                                       f"delete it; keep what you want (git shows what it held) and delete {JOURNAL}")
        with _signals_held():
            for target, tmp, _old, _new in plan:
                if tmp.exists():
                    os.replace(tmp, target)
                    done.append(target)
            for target, _old in gone:
                if os.path.lexists(target):
                    os.unlink(target)
                    done.append(target)
            for d in {t.parent for t, _, _, _ in plan} | {t.parent for t, _ in gone if t.parent.is_dir()} | {folder}:
                _fsync_dir(d)
            journal.unlink()
            _fsync_dir(folder)
    kept = set(keep)
    for stray in (strays() if strays is not None else _strays(folder)):
        if stray.resolve() not in kept:
            stray.unlink(missing_ok=True)
    return done


def _inside(folder: Path, name: str) -> Path:
    """A journal's path, refused unless it lies inside the overlay (a journal is a file anyone could commit)."""
    path = folder / name
    path.resolve().relative_to(folder.resolve())  # ValueError: outside
    return path


def _strays(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(f".*{TMP_SUFFIX}") if p.is_file()] + \
        [p for p in folder.glob(f"{JOURNAL}.*{TMP_SUFFIX}") if p.is_file()]


# ---------------------------------------------------------------- the write


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP while the renames run: delivered once they are done, never between two."""
    sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def commit(folder: Path, changes: Mapping[Path, str | None]) -> None:
    """Write every file of `changes` (all inside `folder`), and delete those whose text is None, or none of them
    (the caller holds the lock)."""
    folder = Path(folder).resolve()
    plan: list[dict[str, str]] = []
    gone: list[dict[str, Any]] = []
    try:
        for i, (path, text) in enumerate(changes.items()):
            if text is None:
                target = Path(path).parent.resolve() / Path(path).name  # a symbolic link is deleted, not followed
                target.relative_to(folder)
                gone.append({"target": str(target.relative_to(folder)), "delete": True, "old": _sha(_held(target))})
                continue
            target = Path(path).resolve()
            target.relative_to(folder)  # a file outside the overlay is a programming error
            old = target.read_bytes() if target.exists() else b""
            mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
            tmp = target.with_name(f".{target.name}.{os.getpid()}-{i}{TMP_SUFFIX}")
            data = text.encode("utf-8")
            _write_durable(tmp, data, mode)
            plan.append({"target": str(target.relative_to(folder)), "tmp": str(tmp.relative_to(folder)),
                         "old": _sha(old), "new": _sha(data)})
        hook("temps-written")
        staged = folder / f"{JOURNAL}.{os.getpid()}{TMP_SUFFIX}"
        # Version 2 where it deletes: a run of the code before deletions refuses it as unreadable, never half-reads it.
        _write_durable(staged, json.dumps({"version": 2 if gone else 1, "files": plan + gone}, indent=1).encode(),
                       0o644)
    except BaseException:
        for e in plan:
            (folder / e["tmp"]).unlink(missing_ok=True)
        (folder / f"{JOURNAL}.{os.getpid()}{TMP_SUFFIX}").unlink(missing_ok=True)
        raise
    with _signals_held():
        os.replace(staged, folder / JOURNAL)
        _fsync_dir(folder)  # the decision is durable: from here an interrupted write is rolled forward
        hook("journal-written")
        for n, e in enumerate(plan, 1):
            os.replace(folder / e["tmp"], folder / e["target"])
            hook(f"renamed-{n}")
        for n, e in enumerate(gone, 1):
            os.unlink(folder / e["target"])
            hook(f"deleted-{n}")
        for d in {(folder / e["target"]).parent for e in plan + gone} | {folder}:
            _fsync_dir(d)
        (folder / JOURNAL).unlink()
        _fsync_dir(folder)


# ---------------------------------------------------------------- scratch copies


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A temporary folder that a killed run cannot leave behind for long: it is locked while in use, and the next
    run's `sweep_scratch` deletes it if its run died."""
    base = Path(tempfile.gettempdir())
    while True:
        path = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=base))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # another run swept it before it was locked: make another
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break  # still ours: no other run swept it between mkdtemp and the lock
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


def sweep_scratch() -> None:
    """Delete the scratch folders of runs that died (SIGKILL gives no chance to clean up): those no live run
    holds locked. Every make scale, new-run and recover starts with it."""
    for old in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        _sweep(old)


def _sweep(path: Path) -> None:
    try:
        if not path.is_dir() or path.is_symlink() or path.stat().st_uid != os.getuid():
            return
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return  # in use by a live run
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)
