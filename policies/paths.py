"""One reading of an OVERLAY (or PATHS) word for every command: `kind-cpu/indexed-job`, `overlays/kind-cpu/indexed-job`
and either with a trailing slash name the same overlay, from the working folder or from the repository."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def overlay_path(raw: str, root: Path = REPO, inside: bool = False) -> str:
    """The path `raw` names: as written when it exists from the working folder, else under `root` or
    `root`/overlays (relative to the working folder where it lies below it). With `inside`, only a path inside `root`
    counts (make scale edits that repository, whatever the working folder). `-` (standard input), an empty word and
    a path found nowhere come back as given, so the caller's own error names what the user wrote."""
    if raw in ("", "-"):
        return raw
    trimmed = raw.rstrip("/") or raw
    cands = [Path(trimmed)]
    if not os.path.isabs(trimmed):
        cands += [root / trimmed, root / "overlays" / trimmed]
    for cand in cands:
        if not os.path.lexists(cand) or (inside and not _below(cand, root)):
            continue
        if cand == cands[0]:
            return trimmed
        try:
            return str(cand.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(cand)
    return raw


def _below(path: Path, root: Path) -> bool:
    try:
        Path(path).resolve().relative_to(Path(root).resolve())
        return True
    except (ValueError, OSError, RuntimeError):
        return False
