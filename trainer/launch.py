#!/usr/bin/env python3
"""torchrun with a short failure report: the workers' one-line reason comes last, where the eye lands.

    python -m trainer.launch --nproc-per-node 2 trainer/train.py --task digits    # any torchrun flags

torchrun 2.13 ends a failed run with the traceback of its own `ChildFailedError` and a 30-line box per failed
rank (torch/distributed/run.py `main`, decorated with `@record`), which pushes the trainer's `[ERROR]` line
far up. This entry point runs the same `torch.distributed.run.run(args)` with the same flags, and on failure
prints one summary line of the ranks' exit codes and then the root cause: the message the first failing
worker left in its TORCHELASTIC_ERROR_FILE (trainer/errors.py `write_error_file`). Exit code: the root-cause
worker's (2 bad input, 143 stopped after saving, 1 lost a peer), 128 + N when torchrun itself got signal N.

torchrun itself stopped by SIGTERM or SIGINT (the kubelet, Ctrl-C) forwards the signal, waits for its workers, and
then ends with its own SignalException whatever they did (torch 2.13: the handler that raises it,
torch/distributed/elastic/multiprocessing/api.py 76-86; re-raised after the workers' shutdown, agent/server/api.py
752-756 and launcher/api.py 391-397; run.py 1025-1028 `main` under `@record`): plain torchrun prints a 25-line
traceback and exits 1 although the workers saved. Here that is one line, the first worker's own reason (the
checkpoint it saved), and exit 128 + N (143 for SIGTERM).
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # started as a file: make the `trainer` package importable, as train.py does
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import json
import signal
import tempfile

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from torch.distributed.run import parse_args, run


def _message(failure: ProcessFailure) -> str | None:
    """The worker's own one-line reason from its error file, or None when it left none."""
    message = failure.message if failure.error_file_data else None
    if isinstance(message, dict):  # torch's own ErrorHandler format: {"message": ..., "extraInfo": ...}
        message = message.get("message")
    return str(message).strip().splitlines()[0] if message else None


def _exit_code(failure: ProcessFailure) -> int:
    if failure.exitcode < 0:
        return 128 - failure.exitcode
    return failure.exitcode or 1


def report(error: ChildFailedError) -> tuple[list[str], int]:
    """The lines to print (last: the root cause) and the exit code."""
    root_rank, root = error.get_first_failure()
    ranks = []
    for rank in sorted(error.failures):
        f = error.failures[rank]
        how = f"killed by {f.signal_name()}" if f.exitcode < 0 else f"exited {f.exitcode}"
        ranks.append(f"rank {rank} {how}")
    summary = f"[FAILED] torchrun: {'; '.join(ranks)} (root cause: rank {root_rank})"
    reason = _message(root)
    if reason is None:
        how = f"was killed by {root.signal_name()}" if root.exitcode < 0 else f"exited {root.exitcode}"
        reason = f"rank {root_rank} {how} without leaving a reason: its own output above says why"
    return [summary, f"[ERROR] {reason}"], _exit_code(root)


def stop_reason(log_dir: Path, before: set[Path]) -> str | None:
    """After torchrun was stopped by a signal: the lowest rank's one-line reason from its error file in the last
    attempt of this run (`<log_dir>/<run>_*/attempt_<n>/<rank>/error.json`, torchrun's DefaultLogsSpecs; folders in
    `before` are earlier runs'), e.g. "rank 0: stopped by SIGTERM after saving <checkpoint>: run the same command
    again to resume from it"; None when no worker left one (stopped before it trained, or another LogsSpecs)."""
    found: dict[tuple[int, int], str] = {}
    for run_dir in (d for d in log_dir.iterdir() if d not in before and d.is_dir()) if log_dir.is_dir() else ():
        for f in run_dir.glob("attempt_*/*/error.json"):
            try:
                attempt, rank = int(f.parent.parent.name.split("_", 1)[1]), int(f.parent.name)
                message = json.loads(f.read_text()).get("message")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(message, dict):  # torch's own ErrorHandler format
                message = message.get("message")
            if message and str(message).strip():
                found[(-attempt, rank)] = str(message).strip().splitlines()[0]
    if not found:
        return None
    (_, rank), message = min(found.items())
    return f"rank {rank}: {message}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.log_dir:  # torchrun's own default, a new temporary folder, named here to read the workers' reasons
        args.log_dir = tempfile.mkdtemp(prefix="torchelastic_")
    log_dir = Path(args.log_dir)
    before = set(log_dir.iterdir()) if log_dir.is_dir() else set()
    try:
        run(args)
    except ChildFailedError as e:
        lines, code = report(e)
    except SignalException as e:  # torchrun got SIGINT/SIGTERM/...: it has stopped its workers already
        name = signal.Signals(e.sigval).name
        reason = stop_reason(log_dir, before)
        if reason is not None:  # the workers' own words: what they saved, how to resume
            lines = [f"[ERROR] torchrun stopped by {name}; {reason}"]
        else:
            lines = [f"[ERROR] torchrun stopped by {name}: the workers saved a checkpoint if they had trained "
                     "(see [CKPT] above); run the same command again to resume"]
        code = 128 + int(e.sigval)
    else:
        return 0
    sys.stdout.flush()
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
