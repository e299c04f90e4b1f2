"""Whether what a simulation runs is what the default branch holds. The pods run the commands written in the
manifests, and the image's /app is this checkout, so a change nobody reviewed runs on this machine: the run's first
line says so when

- the files it runs from (every file kustomize reads to render the overlay, or the rendered file given; `trainer/`,
  what the image holds under /app, Dockerfile `COPY trainer/`; any other file of the checkout the manifests name
  under /app) include one outside this checkout, or one git does not track (untracked or ignored);
- or one of them has changes not committed (staged or not);
- or HEAD's version of one of them differs from the default branch's: the branch `origin/HEAD` names (what `git
  clone` set), else a local `main`, else `master` (`git diff <default> HEAD -- <files>`: a HEAD on another branch or
  commit whose copy of these files is the default branch's does not count; one that changes them does).

Where git or the default branch cannot be found, the line says that it cannot tell."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, Iterable

from ..git import GitError, run as run_git
from ..render.kustomization import inputs, kustomization_file

# The image's code (Dockerfile: COPY trainer/ /app/trainer/).
IMAGE_CODE = ("trainer",)
_APP_PATH = re.compile(r"(?<![\w.\-/])/app(/[^\s'\";:,=$()]+)")


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return run_git(repo, "--literal-pathspecs", *args, timeout=30,
                       env={"GIT_OPTIONAL_LOCKS": "0", "PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"})
    except GitError:
        return None


def default_branch(repo: Path) -> str | None:
    """The default branch: origin/HEAD's branch, else main, else master (None: none of them)."""
    head = git(repo, "symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD")
    if head is not None and head.returncode == 0 and head.stdout.strip():
        return head.stdout.strip()
    for name in ("main", "master"):
        found = git(repo, "rev-parse", "-q", "--verify", f"refs/heads/{name}^{{commit}}")
        if found is not None and found.returncode == 0:
            return name
    return None


def run_files(source: str, manifests: Iterable[Any], repo: Path) -> list[Path]:
    """The files the run's pods run from (the module's docstring): resolved paths, folders for whole trees."""
    src = Path(source).resolve()
    found: list[Path] = []
    if src.is_dir():
        ok, files = inputs(src)
        found += [f.resolve() for f in files]
        if not ok or kustomization_file(src) is None:
            found.append(src)
    else:
        found.append(src)
    found += [repo / part for part in IMAGE_CODE]
    for text in _strings(manifests):
        for m in _APP_PATH.finditer(text):
            found.append((repo / m.group(1).lstrip("/")).resolve())
    return sorted(set(found))


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _listed(names: str) -> list[str]:
    return [n for n in names.split("\0") if n]


def differences(files: list[Path], repo: Path) -> list[str] | None:
    """What makes these files differ from the default branch, one item per kind ([] where nothing does); LookupError
    where git cannot tell."""
    outside = [f for f in files if not f.is_relative_to(repo)]
    inside = [str(f.relative_to(repo)) for f in files if f.is_relative_to(repo) and f.exists()]
    out: list[str] = []
    if outside:
        out.append(f"outside this checkout: {_few([str(f) for f in outside])}")
    if not inside:
        return out
    tracked = git(repo, "ls-files", "-z", "--", *inside)
    # Untracked files under a folder of the run (trainer/) count; ignored ones there (__pycache__) do not; an ignored
    # file the run names itself is not tracked, below.
    status = git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *inside)
    if tracked is None or status is None or tracked.returncode or status.returncode:
        raise LookupError("not a git checkout, or git is not installed")
    tracked_names = set(_listed(tracked.stdout))
    loose = [p for p in inside if not (repo / p).is_dir() and p not in tracked_names]
    changed: list[str] = []
    untracked: list[str] = []
    for entry in _listed(status.stdout):
        code, name = entry[:2], entry[3:]
        if not name or entry[2:3] != " ":
            continue  # the old name of a rename
        (untracked if code == "??" else changed).append(name)
    untracked = sorted(set(untracked) | set(loose))
    if untracked:
        out.append(f"not in git: {_few(untracked)}")
    if changed:
        out.append(f"uncommitted changes: {_few(sorted(set(changed)))}")
    branch = default_branch(repo)
    if branch is None:
        raise LookupError("no default branch (no origin/HEAD, main or master)")
    diff = git(repo, "diff", "--name-only", "-z", branch, "HEAD", "--", *inside)
    if diff is None or diff.returncode:
        raise LookupError(f"git diff {branch} HEAD failed")
    if _listed(diff.stdout):
        out.append(f"HEAD differs from {branch} in: {_few(sorted(_listed(diff.stdout)))}")
    return out


def _few(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" ({len(names) - 3} more)" if len(names) > 3 else "")


def warning(source: str, manifests: Iterable[Any], repo: Path) -> str | None:
    """The run's first line where what it runs is not the default branch's (None where it is)."""
    files = run_files(source, manifests, repo)
    branch = "the default branch"
    try:
        found = differences(files, repo)
        branch = default_branch(repo) or branch
    except LookupError as e:
        return (f"simulate: WARNING: the pods run the commands in {source} and the checkout's code on this machine, "
                f"and whether they are the default branch's cannot be told here ({e}); run only what you have read "
                "(how the pods are confined: below)")
    if not found:
        return None
    return (f"simulate: WARNING: the pods run the commands in {source} and the checkout's code on this machine, and "
            f"they are not {branch}'s: {'; '.join(found)}; run only what you have read (how the pods are confined: "
            "below)")
