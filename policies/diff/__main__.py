"""`python -m policies.diff` (`make diff BASE=<ref>`, the pull-request workflow): both sides exported and rendered,
compared, and printed in the form asked for."""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable

from .. import git
from ..entry import guarded
from .objects import OverlayDiff, compare
from .output import as_json, markdown, text
from .trees import DiffError, Side, export, render_side, resolve_ref
from ..render.paths import REPO


def run(root: Path, base_ref: str, head_ref: str | None) -> tuple[list[OverlayDiff], str, str, list[str]]:
    """The folders' differences, both sides' labels, and what is to be said about a side as a whole."""
    root = root.resolve()
    base_ref, base_sha = resolve_ref(root, base_ref, "BASE")
    head_ref, head_sha = resolve_ref(root, head_ref, "HEAD") if head_ref else (None, None)
    from ..render.transaction import hook, scratch, sweep_scratch

    sweep_scratch()  # what killed runs left in the temporary folder
    with scratch() as tmp:  # locked while this run lives, so a killed run's copy goes with the next run's sweep
        base_tree = export(root, base_sha, Path(tmp) / "base")
        head_tree = export(root, head_sha, Path(tmp) / "head") if head_sha else root
        hook("exported")
        base_label = f"{base_ref} ({base_sha[:7]})"
        head_label = f"{head_ref} ({head_sha[:7]})" if head_sha else "working tree"
        with ThreadPoolExecutor(max_workers=2) as pool:
            base, head = pool.map(render_side, [Side(base_label, base_tree), Side(head_label, head_tree)])
        return compare(base, head), base_label, head_label, base.warnings + head.warnings


def only_folder(root: Path, raw: str) -> str:
    from ..render.paths import overlay_path

    try:
        return Path(overlay_path(raw, root, inside=True)).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise DiffError(f"OVERLAY={raw} is not a folder of {root}") from None


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policies.diff", description=__doc__)
    ap.add_argument("--base", default="main", help="git ref to compare against (default: main)")
    ap.add_argument("--head", default=None, help="git ref to compare (default: the working tree)")
    ap.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    ap.add_argument("--root", default=str(REPO), help="the repository (default: this one)")
    ap.add_argument("--output", help="also write the result to this file")
    ap.add_argument("--overlay", help="only this folder (<env>/<launcher>, overlays/<env>/<launcher> or argocd)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    return guarded(lambda: report(args), (DiffError, git.GitError), prefix="make diff: ")


def report(args: argparse.Namespace) -> int:
    diffs, base, head, warnings = run(Path(args.root), args.base, args.head)
    if args.overlay:
        only = only_folder(Path(args.root), args.overlay)
        diffs = [d for d in diffs if d.path == only]
        if not diffs:
            raise DiffError(f"OVERLAY={args.overlay}: no such rendered folder at either side")
    if args.format == "markdown":
        out = markdown(diffs, base, head, warnings)
    elif args.format == "json":
        out = as_json(diffs, base, head, warnings)
    else:
        out = text(diffs, base, head, warnings)
    sys.stdout.write(out)
    if args.output:
        Path(args.output).write_text(out, encoding="utf-8")
    return 1 if any(d.error for d in diffs) else 0


if __name__ == "__main__":
    sys.exit(main())
