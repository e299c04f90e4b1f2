"""Running git: the one place the tools do (make diff's trees and refs, make changed's files, make scale's committed
run id, make remove-env's check that what it deletes is committed, the simulator's provenance). Every call is
`git -C <repository> ...` with its output captured, nothing read from standard input and a bounded time; git that
cannot be started or does not answer in time is a GitError of one line. What a git that ran says (its exit status,
its standard error) is the caller's to read: each command words its own refusal."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Mapping

TIMEOUT_S = 120


class GitError(Exception):
    """git could not be run, did not answer in time, or (`output`) failed: one line."""


def run(repo: str | Path, *args: str, binary: bool = False, timeout: float = TIMEOUT_S,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[Any]:
    """`git -C repo args`, stdout and stderr captured (text unless `binary`); GitError where git cannot be started or
    runs past `timeout` seconds."""
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary,
                              timeout=timeout, stdin=subprocess.DEVNULL, env=None if env is None else dict(env))
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)}: no answer in {timeout:g} s") from None
    except OSError as exc:
        raise GitError(f"git cannot be run ({exc.strerror or exc})") from None


def output(repo: str | Path, *args: str, binary: bool = False, timeout: float = TIMEOUT_S) -> Any:
    """The standard output of a git that must succeed; GitError with git's own message, on one line, where it fails."""
    proc = run(repo, *args, binary=binary, timeout=timeout)
    if proc.returncode != 0:
        err = proc.stderr if not binary else proc.stderr.decode(errors="replace")
        raise GitError(f"git {' '.join(args)}: {' '.join(err.split()) or 'failed'}")
    return proc.stdout
