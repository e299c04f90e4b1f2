#!/usr/bin/env python3
"""torchrun with a short failure report: the workers' one-line reason comes last, where the eye lands.

    python -m trainer.launch --nproc-per-node 2 trainer/train.py --task digits    # any torchrun flags

torchrun 2.13 ends a failed run with the traceback of its own `ChildFailedError` and a 30-line box per failed
rank (torch/distributed/run.py `main`, decorated with `@record`), which pushes the trainer's `[ERROR]` line
far up. This entry point runs the same `torch.distributed.run.run(args)` with the same flags, and on failure
prints one summary line of the ranks' exit codes and then the root cause: the message the first failing
worker left in its TORCHELASTIC_ERROR_FILE (trainer/errors.py `write_error_file`). Exit code: the root-cause
worker's (2 bad input, 143 stopped after saving, 1 lost a peer), 128 + N when torchrun itself got signal N.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # started as a file: make the `trainer` package importable, as train.py does
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import signal

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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run(args)
    except ChildFailedError as e:
        lines, code = report(e)
    except SignalException as e:  # torchrun got SIGINT/SIGTERM/...: it has stopped its workers already
        name = signal.Signals(e.sigval).name
        lines, code = [f"[ERROR] torchrun stopped by {name}: the workers saved a checkpoint if they had trained "
                       "(see [CKPT] above); run the same command again to resume"], 128 + int(e.sigval)
    else:
        return 0
    sys.stdout.flush()
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
