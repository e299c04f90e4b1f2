"""`PVC="claim=folder ..."` (`--pvc CLAIM=FOLDER`): a folder copied into a claim's volume before the pods start, as
the claim would hold it on the cluster. Every item is checked before anything is written (the run folder is not even
emptied yet): the claim is a name Kubernetes accepts for a PersistentVolumeClaim, the source a folder of regular
files, folders and links inside it, outside the run folder and not holding it, within SEED_BYTES and SEED_ENTRIES.
The source is only read."""
from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from ..kube.values import DNS1123_SUBDOMAIN
from .host import SimulationError

# What one run copies in, all claims together: enough for make tiny-lm's models and data many times over, not a
# filesystem.
SEED_BYTES = 4 << 30
SEED_ENTRIES = 100_000


@dataclass(frozen=True)
class Seed:
    claim: str
    source: Path  # resolved
    given: str  # the folder as written


def check(items: list[str], run_dir: Path) -> list[Seed]:
    """Each CLAIM=FOLDER item, checked (nothing is written): one SimulationError line for the first bad one."""
    seeds: list[Seed] = []
    run = run_dir.resolve()
    total_bytes = total_entries = 0
    for item in items:
        claim, sep, folder = item.partition("=")
        if not sep or not claim or not folder:
            raise SimulationError(f"PVC {item!r}: expected CLAIM=FOLDER")
        # A PersistentVolumeClaim's name is a DNS-1123 subdomain (kubernetes pkg/apis/core/validation/validation.go,
        # ValidatePersistentVolumeName = NameIsDNSSubdomain, used for claims too): no '/', no '..', and it is the
        # name of the claim's folder under <run folder>/pvc/.
        if len(claim) > 253 or not DNS1123_SUBDOMAIN.match(claim):
            raise SimulationError(f"PVC {item!r}: {claim!r} is not a PersistentVolumeClaim name (a DNS-1123 subdomain: "
                                  "lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)")
        src = Path(folder)
        if not src.is_dir():
            raise SimulationError(f"PVC {item!r}: {folder} is not a folder")
        where = src.resolve()
        if where == run or run.is_relative_to(where):
            raise SimulationError(f"PVC {item!r}: {folder} holds the run folder {run_dir}: the copy would copy the "
                                  "run into itself; name the folder the claim should hold")
        if where.is_relative_to(run):
            raise SimulationError(f"PVC {item!r}: {folder} is inside the run folder {run_dir}, which the simulator "
                                  "empties before it copies; name a folder outside it")
        nbytes, entries = _measure(item, where, SEED_BYTES - total_bytes, SEED_ENTRIES - total_entries)
        total_bytes += nbytes
        total_entries += entries
        seeds.append(Seed(claim, where, folder))
    return seeds


def _measure(item: str, root: Path, bytes_left: int, entries_left: int) -> tuple[int, int]:
    """The bytes and entries under `root`, walked without following links; a special file (FIFO, socket, device),
    a link that leaves the folder, an unreadable entry or more than the bound is one SimulationError line."""
    nbytes = entries = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                listing = list(it)
        except OSError as e:
            raise SimulationError(f"PVC {item!r}: cannot read {folder}: {e.strerror}") from None
        for entry in listing:
            entries += 1
            path = Path(entry.path)
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                target = path.resolve()
                if not target.is_relative_to(root):
                    raise SimulationError(f"PVC {item!r}: {path} is a link to {target}, outside the folder; copy what "
                                          "it points to into the folder instead")
            elif stat.S_ISDIR(st.st_mode):
                stack.append(path)
            elif stat.S_ISREG(st.st_mode):
                nbytes += st.st_size
                if not os.access(path, os.R_OK):
                    raise SimulationError(f"PVC {item!r}: cannot read {path}")
            else:
                kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                        else "a device")
                raise SimulationError(f"PVC {item!r}: {path} is {kind}, not a file; a claim's folder holds files, "
                                      "folders and links")
            if nbytes > bytes_left or entries > entries_left:
                raise SimulationError(f"PVC {item!r}: more than the bound of what one run copies in ("
                                      f"{SEED_BYTES >> 30} GiB, {SEED_ENTRIES:,} entries, all claims together)")
    return nbytes, entries


def copy(run_dir: Path, seeds: list[Seed]) -> list[str]:
    """Copy each checked folder into its claim's volume (links as links); what was copied, one line each."""
    done = []
    for s in seeds:
        try:
            shutil.copytree(s.source, run_dir / "pvc" / s.claim, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as e:
            raise SimulationError(f"PVC '{s.claim}={s.given}': copying into the run folder failed: {e}") from None
        done.append(f"{s.claim} <- {s.given}")
    return done
