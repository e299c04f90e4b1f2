#!/usr/bin/env python3
"""Train one task on every rank torchrun starts (trainer/loop.py); resume from the run folder's `latest` checkpoint.
This entry point turns the run's outcome into one line and an exit code: 0 done, 1 lost a peer (torchrun may restart
the group), 2 bad input (trainer/errors.py), 143 stopped by SIGTERM or SIGINT after saving.

    torchrun --nnodes=N --nproc-per-node=M trainer/train.py --task synthetic --epochs 3 --batch-size 256
    python trainer/train.py --task digits          # a world of one, no torchrun
    python -m trainer.train --task mnist --data-root /data

Every flag has an environment default (shown in --help); flags win. See docs/trainer.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # started as a file (torchrun /app/trainer/train.py): make the `trainer` package importable
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]  # no top-level `tasks`, `idx`, ...
    sys.path.insert(0, str(_here.parent))

import os
import signal
import socket
import time
from typing import TYPE_CHECKING, Any

# Torch-free: --help and a refused argument (exit 2) leave before torch is imported (about 2 s); main() imports the
# training side (torch, torch.distributed, the loop) once the arguments are read.
from trainer.cli import build_parser, parse_args  # noqa: F401  (the trainer's command line, as before)
from trainer.errors import EXIT_PEER_LOST, EXIT_PREEMPTED, EXIT_USAGE, Preempted, TrainerError, write_error_file

if TYPE_CHECKING:
    from trainer import distributed as D


def _is_comm_failure(e: BaseException) -> bool:
    import torch.distributed as dist

    text = str(e)
    return isinstance(e, dist.DistError) or any(
        s in text for s in ("Connection reset", "Connection closed", "Broken pipe", "gloo", "NCCL", "TCPStore")
    )


def _hard_exit(code: int) -> None:
    """Exit now, skipping destructors: after a peer vanished the process group's destructor can abort the
    interpreter ("terminate called without an active exception")."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# The trainer (its DDP Reducer and, through it, the process group) outlives main(): `_hard_exit` must leave before
# their destructors run. Freed when main() returns, the Reducer destroys gloo's process group, whose destructor joins
# gloo's worker thread while holding the GIL, while that thread waits for the GIL to release the last collective's
# tensors: a deadlock after a run that finished (seen on the simulator's second pod, py-spy: ~ProcessGroupGloo in
# std::thread::join, the worker in gil_scoped_acquire under ~AsyncAllgatherWork).
_ALIVE: list[Any] = []


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)  # --help (exit 0) and bad arguments (exit 2) end here, before torch is imported
    # (the run's configuration, trainer/config.py)
    from trainer.phases import Watchdog

    rank = os.environ.get("RANK", "0")
    watchdog = Watchdog(config.phase_timeout, int(rank) if rank.isdigit() else 0)  # --phase-timeout, if given
    watchdog.enter("start-up")
    from trainer import distributed as D
    from trainer.loop import Trainer

    denv = None
    try:
        denv, device = D.init(config.backend, config.pg_timeout)
    except TrainerError as e:  # environment problem found before any collective: every rank says it
        print(f"[ERROR] {e}", file=sys.stderr, flush=True)
        write_error_file(str(e))
        return EXIT_USAGE
    trainer = Trainer(config, denv, device, watchdog)
    _ALIVE.append(trainer)
    # How the run ended, for the observers that record it (rank 0's MLflow run): "done", "stopped" (SIGTERM or
    # SIGINT, after saving) or "failed" (a refusal, a lost peer, any other error). Whatever ends run().
    outcome = "failed"
    try:
        code = trainer.run()
        outcome = "done"
    except TrainerError as e:  # agreed on by all ranks: rank 0 prints it, every rank exits non-zero
        if denv.is_main:
            print(f"[ERROR] {e}", file=sys.stderr, flush=True)
        write_error_file(str(e))
        code = EXIT_USAGE
    except Preempted as e:
        write_error_file(str(e))
        outcome, code = "stopped", EXIT_PREEMPTED
    except Exception as e:
        if not (D.active() and (trainer.stop.requested or _is_comm_failure(e))):
            raise  # the observers hear "failed" (finally, below); Python prints the traceback
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        if trainer.stop.requested:
            message = (f"rank {denv.rank}: stopped by {trainer.stop.reason} while a peer was gone ({first}); "
                       "resume from the last checkpoint")
            outcome, code = "stopped", EXIT_PREEMPTED
        else:
            message = (f"rank {denv.rank}: lost another worker ({first}); exiting so that torchrun can restart "
                       "the group from the last checkpoint")
            code = EXIT_PEER_LOST
        print(f"[ERROR] {message}", file=sys.stderr)
        write_error_file(message)
        trainer.tel.end(outcome)
        _hard_exit(code)  # here, inside the handler: os._exit skips the `finally` below and every destructor
    finally:
        watchdog.stop()
        trainer.tel.end(outcome)
    if code == 0 and config.after_done == "wait":
        wait_after_done(denv)
    D.shutdown()
    return code


def wait_after_done(denv: D.DistEnv) -> None:
    """AFTER_DONE=wait: the run is complete, and a controller that restarts a container that exits (a StatefulSet,
    restartPolicy Always) would start it again. Every rank stays up doing nothing until SIGTERM or SIGINT (the
    workload scaled to 0 or deleted); each pod's first process says so once."""
    stopped = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda s, f: stopped.append(s))
    if denv.local_rank == 0:
        print(f"[IDLE] run complete on {socket.gethostname()}: waiting for SIGTERM (AFTER_DONE=wait: a controller "
              "that restarts exited containers would run it again; scale the workload to 0 or delete it to end)",
              flush=True)
    while not stopped:
        time.sleep(0.5)  # a signal's handler runs at once; the loop sees it within half a second


if __name__ == "__main__":
    # Leave without interpreter finalisation, whatever the code:
    # - gloo's worker thread may still be releasing the last collective's tensors (it needs the GIL to
    #   drop their Python objects) while the interpreter finalises, and a thread that takes the GIL then
    #   is cancelled mid-C++ frame: "terminate called without an active exception", SIGABRT, exit -6
    #   after a run that finished (seen about 1 run in 6 on 2 loaded cores);
    # - finalisation restores the default SIGTERM action, and torchrun SIGTERMs the ranks still on their
    #   way out once the first one has exited, which would turn their own exit code into -15.
    # Every file the trainer writes is closed by then (checkpoints and metrics.jsonl are written whole).
    _hard_exit(main())

