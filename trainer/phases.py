"""--phase-timeout: a run that hangs says where, in one line, and exits instead of hanging silently.

The run goes through named phases: `start-up` (importing torch, the process group's rendezvous), `model load` (the
task builds its model and data), `resume` (looking for and loading a checkpoint), `first step` (with --compile:
`compile and first step`, since torch.compile compiles during the first forward and backward pass), `step N` (every
later step), `validation`, `checkpoint save` and `export`. Each phase may take --phase-timeout seconds: a watchdog
thread checks twice a second, and when the phase in progress has run longer it prints

    [ERROR] rank 0: phase 'checkpoint save' did not finish within --phase-timeout 600 s (started 612 s ago, ...)

on standard error (and in torchrun's error file), then the Python stack of the main thread, and ends the process
with exit code 3 (`os._exit`: a thread blocked in a collective or a CUDA call cannot be unwound). The watchdog only
reads the clock: the step stays free of host syncs. On a GPU the host queues work ahead of the device, so a hang in
a step shows as the phase where the host next waits (the step after it, a log interval's vote, or validation).

`--after-done wait` and a run found complete stop the watchdog before they wait or exit. One limit serves every
phase: set it above the longest one expected (model load of a large model, or compile and first step).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback

from trainer.errors import EXIT_PHASE_TIMEOUT, write_error_file

# Tests make a phase hang: TRAINER_TEST_HOOK=phase:<name> sleeps (up to 10 minutes) when phase <name> begins.
HOOK = "TRAINER_TEST_HOOK"


class Watchdog:
    def __init__(self, limit_s: float | None, rank: int = 0, poll_s: float = 0.5):
        self.limit_s = limit_s
        self.rank = rank
        self.poll_s = poll_s
        self.name: str | None = None
        self.started = 0.0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._main = threading.main_thread().ident
        self._thread: threading.Thread | None = None
        if limit_s is not None:
            self._thread = threading.Thread(target=self._watch, name="phase-watchdog", daemon=True)
            self._thread.start()

    def enter(self, name: str) -> None:
        """Phase `name` begins now (the previous one ended)."""
        with self._lock:
            self.name, self.started = name, time.monotonic()
        if os.environ.get(HOOK) == f"phase:{name}":
            os.write(2, f"hook: phase:{name}\n".encode())
            time.sleep(600)

    def stop(self) -> None:
        """No limit from here on (the run is over, or waits on purpose)."""
        with self._lock:
            self.name = None
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(self.poll_s):
            with self._lock:
                name, started = self.name, self.started
            if name is None or self.limit_s is None or time.monotonic() - started <= self.limit_s:
                continue
            self._expire(name, time.monotonic() - started)

    def _expire(self, name: str, elapsed: float) -> None:
        message = (f"rank {self.rank}: phase '{name}' did not finish within --phase-timeout {self.limit_s:g} s "
                   f"(started {elapsed:.0f} s ago); exiting with code {EXIT_PHASE_TIMEOUT}")
        frame = sys._current_frames().get(self._main) if self._main is not None else None
        stack = "".join(traceback.format_stack(frame)[-8:]) if frame is not None else ""
        try:
            print(f"[ERROR] {message}", file=sys.stderr, flush=True)
            if stack:
                print(f"main thread's stack (innermost last):\n{stack}", file=sys.stderr, end="", flush=True)
            write_error_file(message)
            sys.stdout.flush()
        finally:
            os._exit(EXIT_PHASE_TIMEOUT)
