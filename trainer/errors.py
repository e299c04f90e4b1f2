"""Errors the trainer reports as one line, without a traceback, and the exit codes it uses."""

EXIT_OK = 0
EXIT_PEER_LOST = 1  # a collective failed because another worker died: torchrun restarts or fails the job
EXIT_USAGE = 2  # bad flags, environment, data, output folder or checkpoint: same code as argparse
EXIT_PREEMPTED = 143  # 128 + SIGTERM: stopped on request after saving a checkpoint


class TrainerError(Exception):
    """A problem the user can fix (flags, environment, data, output folder, checkpoint).

    The message is printed as a single ``[ERROR]`` line; no traceback.
    """


class Preempted(Exception):
    """Raised on every rank once all ranks agreed to stop after SIGTERM and the checkpoint is saved."""
