"""When the ranks stop together. SIGTERM (pre-emption, pod deletion, torchrun shutting down) and SIGINT (Ctrl-C, which
torchrun forwards to its workers) only set a flag; the ranks vote on it together, on a clock of training time rather
than a step count, and then save and exit 143.

The clock: a vote after the first step, then every `stop_check_seconds(grace)` (a sixth of the grace period, at most
5 s). At each vote the ranks all-reduce the flag and the seconds since the previous vote; every rank derives the next
voting step from those same figures, so all ranks vote at the same step without further messages. Validation keeps
the same clock over its batches. Torch-free: the training loop (trainer/loop.py) does the all-reduce.
"""

from __future__ import annotations

import signal
import time

MAX_STOP_CHECK_S = 5.0
# For `make simulate FAULT=...@step=N` (policies/simulate/fault_run.py): the global steps after which every rank stops
# itself (SIGSTOP) until the simulator, having injected the fault due there, continues it (SIGCONT): the fault lands
# between step N and N+1 on every rank, not a few steps later.
PAUSE_ENV = "PAUSE_AT_STEPS"


def pause_steps(text: str) -> frozenset[int]:
    """The steps of PAUSE_AT_STEPS ("3,7" or "3 7"); anything not a number is ignored."""
    return frozenset(int(t) for t in text.replace(",", " ").split() if t.isdigit())


def stop_check_seconds(grace_period: float) -> float:
    """How often (in seconds of training) the ranks agree on SIGTERM: a sixth of the grace period, at most
    5 s, so that the vote, the last step and the checkpoint fit well inside it."""
    return min(MAX_STOP_CHECK_S, max(0.05, grace_period / 6))


def steps_until_next_check(seconds_per_step: float, check_s: float) -> int:
    """Steps that fit in `check_s` at the measured pace (at least 1). Every rank computes it from the same
    all-reduced figures, so all ranks vote at the same step."""
    if not seconds_per_step > 0:
        return 1
    return max(1, min(1_000_000, int(check_s / seconds_per_step)))


def fits(seconds: float | None, grace_period: float) -> bool:
    """Whether work measured at `seconds` (None: never measured) fits a stop: within half of the grace period,
    which leaves the other half to the vote, the step in progress and the checkpoint."""
    return seconds is not None and seconds <= grace_period / 2


class StopFlag:
    """Set by SIGTERM or SIGINT; the ranks act on it together."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.requested = False
        self.signal: str | None = None  # the first signal this rank received

    def install(self) -> None:
        for signum in self.SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.requested = True
        self.signal = self.signal or signal.Signals(signum).name

    @property
    def reason(self) -> str:
        """What the logs name as the cause: this rank's signal (rank 0 may stop on another rank's vote)."""
        return self.signal or "SIGTERM"


class VoteClock:
    """Which step (or validation batch) the next vote falls on. `due(n)` after the n-th unit of work; `voted(n,
    seconds)` with the all-reduced mean seconds since the previous vote moves the next vote `check_s` ahead at
    that pace."""

    def __init__(self, check_s: float, start: int = 0):
        self.check_s = check_s
        self.last = start
        self.next = start + 1
        self.since = time.perf_counter()

    def due(self, n: int) -> bool:
        return n >= self.next

    def elapsed(self) -> float:
        return time.perf_counter() - self.since

    def restart(self, n: int) -> None:
        """Measure the pace from now and unit `n` on (the next vote stays where it was)."""
        self.last = n
        self.since = time.perf_counter()

    def voted(self, n: int, seconds: float, now: float | None = None) -> None:
        self.next = n + steps_until_next_check(seconds / max(1, n - self.last), self.check_s)
        self.last = n
        self.since = time.perf_counter() if now is None else now
