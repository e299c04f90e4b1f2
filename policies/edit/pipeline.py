"""The one edit pipeline: every command that changes the user's files (make scale, make new-run, make recover, make
init, make new-env, make remove-env and the image workflow's pin_image) goes through `apply`, so the guarantees of
policies/render/transaction.py hold for all of them alike:

1. lock: the scope's folders are locked (flock, waiting up to 60 s for another run, saying so once);
2. recover or refuse: what an interrupted run left in the scope's folder is finished first (its journal rolled
   forward, its stray temporary files deleted) and said on standard error; a dry run finishes nothing, so it
   refuses a half-written scope in one line;
3. plan: the command's plan function returns the change, each path mapped to its new text or to None to delete it
   (files already right are left out here);
4. validate: the scope's validator checks the result on a scratch copy (the overlay's validation for make scale and
   make new-run, the whole repository's for make init, make new-env and make remove-env); any error line and
   nothing is written, exit 1;
5. then the unified diff (a dry run, nothing written), or every file written (and deleted) or none, through one
   `transaction.commit`: the journal, recovery by the next run, SIGINT, SIGTERM and SIGHUP held during the renames.

Only this module calls `transaction.commit` (tests/test_architecture.py checks it). What differs between the
commands is data: the `Scope` (its folders, locks and the words of its messages) and the validator."""
from __future__ import annotations

import contextlib
import difflib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from ..render import transaction
from .yamledit import EditError

Changes = Mapping[Path, "str | None"]
# The error lines of the result (empty when it is clean), checked on a scratch copy with the changes applied.
Validator = Callable[[dict[Path, "str | None"]], list[str]]


def _say(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass(frozen=True)
class Lock:
    """One folder's lock: `who` names the commands that take it and `what` the folder, in the waiting message."""
    folder: Path
    who: str = "make scale or make new-run"
    what: str = "overlay"


@dataclass(frozen=True)
class Words:
    """How a command words its outcome: the lines its users, its documents and its tests know."""
    # Each file written on a line of its own ("wrote a", "deleted b"), else one line ("wrote a, b").
    line_per_file: bool = True
    # The Ctrl-C line names the files written ("interrupted: wrote a, b"), else "interrupted: wrote every file".
    interrupted_names_files: bool = False
    # The recovery's line: "<prefix>finished the <noun> an interrupted run began: wrote ...".
    finished_prefix: str = ""
    finished_noun: str = "change"
    finished_verb_per_file: bool = True
    # A command with words of its own for these (pin_image): the line that nothing changes, a dry run's line per
    # file instead of the diff, and the line per file written.
    nothing: str | None = None
    would_change: Callable[[str], str] | None = None
    written: Callable[[str], str] | None = None


@dataclass(frozen=True)
class Scope:
    """Where an edit command writes: `folder` holds its journal and every file it changes; `locks` are taken in
    order; `name` is the subject of its lines ("overlays/kind-cpu/indexed-job", "make init"); `half_written` the
    dry run's refusal of a folder an interrupted run left half written; `strays` lists the stray temporary files
    recovery deletes where `folder` holds more than the command's own (the repository root); `after_recovery`
    tidies up after it (make new-env's empty folders); `shown` names a path in the lines."""
    folder: Path
    locks: tuple[Lock, ...]
    name: str
    half_written: Callable[[], str]
    shown: Callable[[Path], str]
    strays: Callable[[], list[Path]] | None = None
    after_recovery: Callable[[], None] | None = None
    error: type[EditError] = EditError
    words: Words = field(default_factory=Words)
    # Scopes inside this one whose commands take only one of its locks (pin_image's components/): their journals are
    # finished (or refused) first, so this scope's recovery never deletes the temporary files they name.
    inner: tuple["Scope", ...] = ()


class Session:
    """What a plan function gets: the files the recovery finished, and more locks to hold until the end."""

    def __init__(self, finished: list[Path], stack: contextlib.ExitStack):
        self.finished = finished
        self._stack = stack

    def hold(self, lock: Lock) -> None:
        self._stack.enter_context(transaction.locked(lock.folder, say=_say, who=lock.who, what=lock.what))


# A plan returns the change, or None when the recovery already did what was asked (nothing more to say or do).
Plan = Callable[[Session], "Changes | None"]


def apply(scope: Scope, plan: Plan | None, validate: Validator | None, dry_run: bool) -> int:
    """Lock, recover or refuse, plan, validate, then print the diff or write every file or none. `plan` None only
    finishes what is pending (make recover); `validate` None checks nothing more than the plan did (pin_image)."""
    with contextlib.ExitStack() as stack:
        finished = _open(scope, dry_run, stack)
        if plan is None:
            return 0
        changes = plan(Session(finished, stack))
        if changes is None:
            return 0
        return _apply(scope, dict(changes), validate, dry_run)
    raise AssertionError("unreachable")  # for mypy: an ExitStack may swallow exceptions


def _open(scope: Scope, dry_run: bool, stack: contextlib.ExitStack) -> list[Path]:
    transaction.sweep_scratch()
    for lock in scope.locks:
        stack.enter_context(transaction.locked(lock.folder, say=_say, who=lock.who, what=lock.what))
    # A journal's temporary files are never another scope's strays (make new-env's at the root name files under
    # components/, where pin_image's strays are looked for).
    named = {t for s in (*scope.inner, scope) for t in transaction.journal_temps(s.folder)}
    for inner in scope.inner:
        _recover(inner, dry_run, named)
    return _recover(scope, dry_run, named)


def _recover(scope: Scope, dry_run: bool, keep: set[Path]) -> list[Path]:
    """Finish what an interrupted run left in the scope's folder (the caller holds its lock) and say so; a dry run
    refuses it instead."""
    if dry_run:
        if (scope.folder / transaction.JOURNAL).exists():
            raise scope.error(scope.half_written())
        return []
    finished = transaction.recover(scope.folder, strays=scope.strays, keep=keep)
    if scope.after_recovery is not None:
        scope.after_recovery()
    if finished:
        w = scope.words
        names = [(("wrote " if os.path.lexists(p) else "deleted ") if w.finished_verb_per_file else "")
                 + scope.shown(p) for p in finished]
        _say(f"{w.finished_prefix}finished the {w.finished_noun} an interrupted run began: "
             + ("" if w.finished_verb_per_file else "wrote ") + ", ".join(names))
    return finished


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def _same(path: Path, text: str | None) -> bool:
    """Whether `path` already is what the change makes it."""
    return not _exists(path) if text is None else path.exists() and path.read_text(encoding="utf-8") == text


def _apply(scope: Scope, changes: dict[Path, str | None], validate: Validator | None, dry_run: bool) -> int:
    w = scope.words
    changes = {p: t for p, t in changes.items() if not _same(p, t)}
    if not changes:
        print(w.nothing if w.nothing is not None else f"{scope.name}: nothing to change")
        return 0
    errors = validate(changes) if validate is not None else []
    if errors:
        _say(f"error: {scope.name}: the result does not validate, so nothing was written:")
        for line in errors:
            _say(f"  {line}")
        return 1
    if dry_run:
        if w.would_change is not None:
            for path in changes:
                print(w.would_change(scope.shown(path)))
            return 0
        sys.stdout.write(unified(changes, scope.shown))
        gone = sum(t is None for t in changes.values())
        n = len(changes) - gone
        _say(f"dry run: nothing was written ({n} file{'s' if n != 1 else ''} would change"
             + (f", {gone} would be deleted" if gone else "") + ")")
        return 0
    try:
        write(scope.folder, changes)
    except KeyboardInterrupt:
        # Ctrl-C waits for the renames: say whether they had begun (then every file is written) or not (none is).
        done = all(_same(p, t) for p, t in changes.items())
        if w.interrupted_names_files:
            names = ", ".join(scope.shown(p) for p in changes)
            _say(f"interrupted: {'wrote ' + names if done else 'nothing was written'}")
        else:
            _say(f"interrupted: {'wrote every file' if done else 'nothing was written'}")
        raise
    if w.written is not None:
        for path in changes:
            print(w.written(scope.shown(path)))
    elif w.line_per_file:
        for path, text in changes.items():
            print(f"{'deleted' if text is None else 'wrote'} {scope.shown(path)}")
    else:
        print(f"wrote {', '.join(scope.shown(p) for p in changes)}")
    return 0


def unified(changes: Mapping[Path, str | None], shown: Callable[[Path], str]) -> str:
    """The change as a unified diff: a file created is every line added (--- /dev/null), a file deleted every line
    removed (+++ /dev/null), as git shows them."""
    out: list[str] = []
    for path, text in changes.items():
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        name = shown(path)
        out += difflib.unified_diff(old.splitlines(keepends=True), (text or "").splitlines(keepends=True),
                                    f"a/{name}" if path.exists() else "/dev/null",
                                    "/dev/null" if text is None else f"b/{name}")
    return "".join(out)


def write(folder: Path, changes: Mapping[Path, str | None]) -> None:
    """Write (or delete) every file of `changes` or none (the caller holds the lock): new folders first, then one
    transaction; folders made for a write that did not happen are removed again, and those a deletion emptied."""
    folder = Path(folder).resolve()
    made: list[Path] = []
    for path, text in changes.items():
        if text is None:
            continue
        for d in [p for p in reversed(Path(path).resolve().parents) if not p.exists()]:
            d.mkdir()
            made.append(d)
    try:
        transaction.commit(folder, changes)
    except BaseException:
        if not (folder / transaction.JOURNAL).exists():  # not decided: nothing was written
            for d in reversed(made):
                with contextlib.suppress(OSError):
                    d.rmdir()
        raise
    for path, text in changes.items():
        if text is None:
            remove_emptied(folder, unfollowed(path).parent)


def unfollowed(path: Path) -> Path:
    """An absolute path whose last part is not followed: a symbolic link to delete is the link."""
    path = Path(path)
    return path.parent.resolve() / path.name


def remove_emptied(root: Path, folder: Path) -> None:
    """Remove `folder` and its parents while they are empty, below root's own folders (components/, overlays/)."""
    root = Path(root).resolve()
    folder = Path(folder).resolve()
    while folder != root and folder.parent != root and root in folder.parents:
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            return
        folder = folder.parent
