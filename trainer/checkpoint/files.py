"""Files of a run folder written so that a reader sees either the old file or the complete new one.

Every file is written to a temporary name in the same folder, fsynced, then renamed over the target with os.replace,
and the folder is fsynced; temporary names start with TMP_PREFIX, which no checkpoint name does, and what a killed
writer left behind is removed at the next start.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from trainer.errors import TrainerError

TMP_PREFIX = ".tmp-"
_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK  # what a plain open() would have made


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see either the old file or the complete new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{TMP_PREFIX}{path.name}.")
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; other readers (a sync sidecar) need the usual mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def check_writable(folder: Path) -> None:
    """Create the run folder and prove that a file can be written, synced and removed there."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test.{os.getpid()}"  # one per process: ranks sharing a folder must not race
        atomic_write(probe, b"ok\n")
        probe.unlink()
    except OSError as e:
        raise TrainerError(f"output folder {folder} is not writable: {e.strerror or e}") from None


def remove_temp(*folders: Path) -> list[str]:
    """Delete leftovers of writes that were interrupted (a killed process never renamed them): files and folders."""
    removed = []
    for folder in folders:
        for p in sorted(folder.glob(f"{TMP_PREFIX}*")):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p.name)
    return removed


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def size(path: Path) -> int:
    """Bytes of a file, or of every file below a folder."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size
