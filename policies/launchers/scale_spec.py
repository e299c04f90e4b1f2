"""Where `make scale` writes in a launcher's patches (Launcher.scale; base.py re-exports it)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ScaleSpec:
    """Where a patch of this launcher holds the topology `make scale` changes: paths into the patched object, with
    `*` for any key. The pod count is written `nodes + offset` at each `pods` path."""

    pods: list[tuple[tuple[Any, ...], int]]
    nproc: list[tuple[Any, ...]] = field(default_factory=list)
    # The container whose NNODES / NPROC_PER_NODE env the repository's bases read, where torchrun gets flags.
    env_container: tuple[Any, ...] | None = None
    resources: list[tuple[Any, ...]] = field(default_factory=list)
    nproc_quoted: bool = False
