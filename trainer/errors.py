"""Errors the trainer reports as one line, without a traceback, and the exit codes it uses."""

EXIT_OK = 0
EXIT_PEER_LOST = 1  # a collective failed because another worker died: torchrun restarts or fails the job
EXIT_USAGE = 2  # bad flags, environment, data, output folder or checkpoint: same code as argparse
EXIT_PHASE_TIMEOUT = 3  # a phase of the run took longer than --phase-timeout (trainer/phases.py)
EXIT_PREEMPTED = 143  # 128 + SIGTERM: stopped on request after saving a checkpoint


class TrainerError(Exception):
    """A problem the user can fix (flags, environment, data, output folder, checkpoint).

    The message is printed as a single ``[ERROR]`` line; no traceback.
    """


class Preempted(Exception):
    """Raised on every rank once all ranks agreed to stop after SIGTERM and the checkpoint is saved."""


ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"  # set by torchrun for every worker (torch.distributed.elastic)


def write_error_file(message: str) -> None:
    """Leave this worker's one-line reason where torchrun looks for it: the file named by TORCHELASTIC_ERROR_FILE.

    torchrun 2.13 reads it into its failure report (`ProcessFailure`, torch/distributed/elastic/multiprocessing/
    errors/__init__.py, which accepts {"message": str, "timestamp": int}); `python -m trainer.launch` prints it
    as its last line. Nothing happens outside torchrun, and a write that fails is not worth a second error.
    """
    import json
    import os
    import time

    path = os.environ.get(ERROR_FILE_ENV)
    if not path:
        return
    try:
        with open(path, "w") as f:
            json.dump({"message": message, "timestamp": int(time.time())}, f)
    except OSError:
        pass
