"""Validate only what a change touches: map changed files to the overlays that read them (through bases, components
and patches) and validate those, plus argocd/ whenever an Application's target may have changed. The pre-commit hook
runs this; so does `make validate-changed` without pre-commit."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from . import git
from .entry import guarded
from .render.loader import HELM_CHART_FILE, InputError
from .report.engine import MANIFEST_SUFFIXES, plain_manifests
from .render.kustomization import KUSTOMIZATION_FILES, find_overlays, helm_chart, inputs, kustomization_file

REPO = Path(__file__).resolve().parent.parent
# A change under these can change what an Argo CD Application syncs: validate argocd/ too (its rules render them).
ARGO_INPUTS = ("base/", "components/", "overlays/", "argocd/", "gitops.yaml")


def overlay_inputs(root: Path) -> dict[Path, set[Path]]:
    """Every overlay under root/overlays and the files it reads."""
    out: dict[Path, set[Path]] = {}
    for folder in find_overlays(root / "overlays"):
        _, files = inputs(folder)
        out[folder] = {f.resolve() for f in files} | {folder.resolve()}
    return out


def affected(changed: list[str], root: Path) -> list[str]:
    """The folders to validate for these changed files (paths relative to root), in a stable order."""
    root = root.resolve()
    paths = [_resolved(root / c) for c in changed]
    targets: list[str] = []
    for folder, reads in sorted(overlay_inputs(root).items()):
        # A file an overlay reads, or any file inside the overlay (a new patch not wired in yet still counts).
        if any(p in reads or folder.resolve() in p.parents for p in paths):
            targets.append(str(folder.relative_to(root)))
    rels = [str(p.relative_to(root)) if root in p.parents or p == root else str(p) for p in paths]
    # Plain manifests that make validate checks beside the overlays (engine.plain_manifests: files under overlays/
    # outside every kustomization's folder), each validated as make validate does.
    plain = set(plain_manifests(root / "overlays")) if (root / "overlays").is_dir() else set()
    targets += [str(f.relative_to(root)) for f in sorted(plain) if _resolved(f) in paths]
    if (root / "argocd" / "kustomization.yaml").is_file() and any(r.startswith(ARGO_INPUTS) for r in rels):
        targets.append("argocd")
    return targets


def targets(changed: list[str], root: Path, bundle: bool = False) -> list[str]:
    """For any repository (the pre-commit hook of other repositories, `ddp-check changed`): the overlays below root
    that read or hold a changed file, leaves only (a base another overlay reads is checked through that overlay),
    then the changed manifest files no kustomization reads, validated as they are; with `bundle`, each with the
    other such files of its folder, which `validate --bundle` reads as one input (a Namespace and its pods, a
    TrainJob and its runtime, in files of their own). Hidden folders are skipped."""
    root = root.resolve()
    overlays = [d.resolve() for d in find_overlays(root)
                if not any(part.startswith(".") for part in d.relative_to(root).parts)]
    reads: dict[Path, set[Path]] = {}
    for folder in overlays:
        _, files = inputs(folder)
        reads[folder] = {_resolved(f) for f in files}
    included = {f.parent for folder, files in reads.items() for f in files
                if f.name in KUSTOMIZATION_FILES and f.parent != folder}
    leaves = [f for f in overlays if f not in included]
    read_by_any = set().union(*reads.values()) if reads else set()
    out: list[str] = []
    for folder in leaves:
        if any(p in reads[folder] or folder in p.parents for p in (_resolved(root / c) for c in changed)):
            out.append(os.path.relpath(folder, root))
    neighbours: dict[Path, list[Path]] = {}  # with `bundle`: each folder's plain manifests, listed once
    for c in changed:
        p = _resolved(root / c)
        # A file of a Helm chart stands for the chart's Chart.yaml, which says the chart is helm's to render.
        chart = next((d for d in p.parents if (d == root or root in d.parents) and helm_chart(d)), None)
        p = chart / HELM_CHART_FILE if chart is not None else p
        inside_kustomize = any(kustomization_file(d) for d in p.parents if d == root or root in d.parents)
        if (p.suffix.lower() in MANIFEST_SUFFIXES and p.is_file() and p not in read_by_any
                and not inside_kustomize):
            if bundle and p.parent not in neighbours:
                neighbours[p.parent] = [f for f in plain_manifests(p.parent, below=False) if f not in read_by_any]
            for f in [*neighbours[p.parent], p] if bundle else [p]:  # p too where hidden (not listed)
                if os.path.relpath(f, root) not in out:
                    out.append(os.path.relpath(f, root))
    return out


def _resolved(path: Path) -> Path:
    """The path with its folders' links resolved; a file that is itself a symlink loop or a dangling link keeps its
    name (so a loop next to an overlay still maps to that overlay, whose validation then says what kustomize reads)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: pathlib's "Symlink loop" before Python 3.13
        return _resolved(path.parent) / path.name


def git_changed(root: Path, staged: bool) -> list[str]:
    args = ["diff", "--name-only", "--cached"] if staged else ["diff", "--name-only", "HEAD"]
    names: list[str] = git.run(root, *args).stdout.split()
    if not staged:
        names += git.run(root, "ls-files", "--others", "--exclude-standard").stdout.split()
    return names


def main(argv: list[str] | None = None) -> int:
    return guarded(lambda: _main(argv), (InputError, git.GitError))


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policies.changed", description=__doc__)
    ap.add_argument("files", nargs="*", help="changed files (default: git's uncommitted changes)")
    ap.add_argument("--staged", action="store_true", help="the files staged for commit")
    ap.add_argument("--list", action="store_true", help="print the folders that would be validated, validate nothing")
    ap.add_argument("--root", default=str(REPO), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    root = Path(args.root).resolve()
    files = args.files or git_changed(root, args.staged)
    targets = affected(files, root)
    if args.list:
        print("\n".join(targets))
        return 0
    if not targets:
        print("no overlay reads the changed files: nothing to validate")
        return 0
    print(f"validating {len(targets)} folder(s) the change touches: {' '.join(targets)}", file=sys.stderr)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "policies.cli", "validate", *targets], cwd=root, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
