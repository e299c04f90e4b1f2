"""Rank 0's output: tagged log lines for `kubectl logs | grep` and metrics.jsonl in the run folder.

Lines look like ``[EPOCH] epoch=2/3 train_loss=0.4123 ...``; the same fields go to metrics.jsonl as
``{"event": "epoch", "time": ..., "epoch": 2, ...}``. Other ranks print nothing but their own warnings (`warn`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def _fmt(key: str, value: Any) -> str:
    if isinstance(value, float):
        if key.endswith("per_s"):
            return f"{value:.0f}"
        return f"{value:.4g}" if abs(value) >= 1e4 or 0 < abs(value) < 1e-3 else f"{value:.4f}"
    return str(value)


# a field printed as "value/total" when its total is among the fields: epoch=2/3, epoch_step=40/120
FRACTIONS = {"epoch": "epochs", "epoch_step": "epoch_steps"}


def format_line(tag: str, fields: dict[str, Any]) -> str:
    totals = {FRACTIONS[k] for k in fields if k in FRACTIONS and FRACTIONS[k] in fields}
    parts = []
    for k, v in fields.items():
        if v is None or k in totals:
            continue
        text = _fmt(k, v)
        if FRACTIONS.get(k) in totals:
            text += f"/{fields[FRACTIONS[k]]}"
        parts.append(f"{k.replace('_per_s', '/s')}={text}")
    return f"[{tag}] " + " ".join(parts)


def warn(rank: int, message: str) -> None:
    """One line on stderr from whichever rank it concerns (RunLog.warn speaks for rank 0 only)."""
    print(f"[WARN] rank {rank}: {message}", file=sys.stderr, flush=True)


class RunLog:
    def __init__(self, enabled: bool, folder: Path | None = None):
        self.enabled = enabled
        self.path = folder / "metrics.jsonl" if folder is not None else None

    def line(self, tag: str, **fields: Any) -> None:
        if self.enabled:
            print(format_line(tag, fields), flush=True)

    def event(self, event: str, **fields: Any) -> None:
        if self.enabled and self.path is not None:
            record = {"event": event, "time": round(time.time(), 3), **fields}
            with self.path.open("a") as f:
                f.write(json.dumps(record, sort_keys=False) + "\n")

    def emit(self, tag: str, event: str, **fields: Any) -> None:
        self.line(tag, **fields)
        self.event(event, **fields)

    def warn(self, message: str) -> None:
        if self.enabled:
            print(f"[WARN] {message}", file=sys.stderr, flush=True)
