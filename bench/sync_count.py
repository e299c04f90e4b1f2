#!/usr/bin/env python3
"""torchrun target of `make bench-gpu`'s lm-syncs step: trainer/train.py, run as torchrun runs it, with
torch.cuda.set_sync_debug_mode("warn") on, and every warning that mode gives ("called a synchronizing CUDA
operation", one per host-device synchronisation: `.item()`, `.cpu()`, `.tolist()`, a print of a CUDA tensor, a
blocking copy) counted by the trainer's phase (trainer/phases.py: start-up, model load, first step, `step N`,
validation, checkpoint save, ...) and by the innermost trainer/ line that caused it.

When the run is over (the trainer stops its phase watchdog) each rank writes $SYNC_COUNT_OUT/syncs-rank<RANK>.json:

    {"mode": "warn", "total": 41, "steps": 120, "by_phase": {"step": 12, ...}, "sites": {"trainer/loop.py:431": 12}}

`steps` counts the phases named `step N` entered (every step after the first); `by_phase["step"]` the syncs inside
them, which the fast step keeps to its periodic stop votes (docs/trainer.md, "The fast step"). A sync made where no
Python code runs (the autograd engine's C++ threads) is no Python warning: c10 prints it on stderr, and
bench_gpu.py counts those lines in the run's output. Without CUDA the mode
is "unavailable: ..." and nothing is counted (set_sync_debug_mode watches CUDA synchronisations only); the trainer
runs the same.

    SYNC_COUNT_OUT=/tmp/s torchrun --nproc-per-node 1 bench/sync_count.py --task causal-lm ...
"""

from __future__ import annotations

import collections
import json
import os
import re
import runpy
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "trainer" / "train.py"
# c10/cuda/CUDAFunctions.cpp (warn_or_error_on_sync): TORCH_WARN("called a synchronizing CUDA operation")
SYNC_WARNING = "called a synchronizing CUDA operation"


class SyncCounter:
    """Counts the sync-debug warnings by phase and trainer line; passes every other warning on unchanged."""

    def __init__(self) -> None:
        self.total = 0
        self.steps = 0
        self.phase = "start-up"
        self.by_phase: collections.Counter[str] = collections.Counter()
        self.sites: collections.Counter[str] = collections.Counter()
        self._show = warnings.showwarning

    def install(self) -> None:
        warnings.filterwarnings("always", message=".*" + re.escape(SYNC_WARNING))  # each one, not once per line
        self._show = warnings.showwarning
        warnings.showwarning = self.showwarning

    def enter(self, name: str) -> None:
        """trainer.phases.Watchdog.enter's phase name; `step N` counts as one more step."""
        if name.startswith("step "):
            self.steps += 1
            name = "step"
        self.phase = name

    def showwarning(self, message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                    line: Any = None) -> None:
        if SYNC_WARNING not in str(message):
            self._show(message, category, filename, lineno, file, line)
            return
        self.total += 1
        self.by_phase[self.phase] += 1
        self.sites[site(traceback.extract_stack()[:-1])] += 1

    def record(self, mode: str) -> dict[str, Any]:
        return {"mode": mode, "total": self.total, "steps": self.steps, "by_phase": dict(self.by_phase),
                "sites": dict(self.sites.most_common())}


def site(stack: list[traceback.FrameSummary]) -> str:
    """The innermost frame in trainer/ as `trainer/<file>:<line>`; else the innermost frame's file and line."""
    trainer = ROOT / "trainer"
    for frame in reversed(stack):
        path = Path(frame.filename)
        if path.is_relative_to(trainer):
            return f"{path.relative_to(ROOT)}:{frame.lineno}"
    return f"{stack[-1].filename}:{stack[-1].lineno}" if stack else "?"


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    from trainer import phases

    counter = SyncCounter()
    counter.install()
    enter = phases.Watchdog.enter

    def entered(self: phases.Watchdog, name: str) -> None:
        counter.enter(name)
        enter(self, name)

    phases.Watchdog.enter = entered  # type: ignore[method-assign]
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))  # the rank's own GPU, as the trainer picks it
        torch.cuda.set_sync_debug_mode("warn")
        mode = "warn"
    else:
        mode = "unavailable: no CUDA device (set_sync_debug_mode watches CUDA synchronisations only)"
    out = os.environ.get("SYNC_COUNT_OUT")
    stop = phases.Watchdog.stop

    def stopped(self: phases.Watchdog) -> None:
        # The trainer ends with os._exit (trainer/train.py, _hard_exit): no atexit handler runs. Its main() stops
        # the watchdog once the run is over (and before --after-done wait), so the record is written then.
        stop(self)
        if out:
            path = Path(out) / f"syncs-rank{os.environ.get('RANK', '0')}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(counter.record(mode), indent=2) + "\n")

    phases.Watchdog.stop = stopped  # type: ignore[method-assign]
    sys.argv = [str(TRAIN), *sys.argv[1:]]
    runpy.run_path(str(TRAIN), run_name="__main__")


if __name__ == "__main__":
    main()
