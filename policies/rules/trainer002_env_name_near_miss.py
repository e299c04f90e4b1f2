"""An environment variable set beside the trainer is not a near miss of one it reads.

A misspelt name is set, read by nobody, and the value it was meant for stays at its default: `NPROC_PER_NOD: "8"` in
a topology patch leaves the base's `NPROC_PER_NODE=1` in force, and a 512-GPU world trains on 64. For every
container that starts `/app/trainer/train.py`, each variable the manifests set (its env and its ConfigMaps through
`envFrom`; not what a controller injects) that nothing is known to read is compared with the names that are read:
the trainer's (trainer/contract.py), those the container's command, arguments and env values reference as `$(NAME)`,
and torchrun's `PET_*` settings. One within a letter or two of such a name (or differing in case only) is a warning
with the suggestion: the manifests cannot show that nothing else reads it.

Fails: `NPROC_PER_NOD` set where the arguments read `$(NPROC_PER_NODE)`; `DIST_BACKND` in `ddp-env`.
Passes: `NPROC_PER_NODE`; `NCCL_DEBUG`, `MODEL_PARAMS` (close to no name that is read).
"""
from __future__ import annotations

import re

from ..trainer_contract import contract

from ..model import WARNING
from ..rulekit import obj_problem
from ..torchrun import DEFAULTS
from .trainer001_contract_values import trainer_containers, where

ID = "TRAINER002"
NAME = "trainer-env-name-near-miss"
SEVERITY = WARNING
_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")
TORCHRUN_ENV = tuple(f"PET_{name.upper()}" for name in DEFAULTS)


def distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b` (optimal string alignment)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def near_miss(name: str, read: set[str]) -> str | None:
    """The name among `read` that `name` is a near miss of (one edit for names up to 8 characters, two beyond, or
    the same letters in another case), None when it is none's."""
    best = None
    for known in sorted(read):
        if len(known) < 4 or known == name:
            continue
        if known.lower() == name.lower():
            return known
        d = distance(name.upper(), known)
        if d <= (1 if len(known) <= 8 else 2) and (best is None or d < best[0]):
            best = (d, known)
    return best[1] if best else None


def _references(c) -> set[str]:
    refs: set[str] = set()
    for key in ("command", "args"):
        for tok in c.container.get(key) or []:
            refs.update(_REF.findall(str(tok)))
    for e in c.container.get("env") or []:
        if isinstance(e, dict) and isinstance(e.get("value"), str):
            refs.update(_REF.findall(e["value"]))
    return refs


def check(ctx):
    seen: set[tuple[str, str, str]] = set()  # a Master and its Workers share one ConfigMap key
    for w, pod, c, argv, fields, start in trainer_containers(ctx):
        refs = _references(c)
        read = set(contract.ENV) | refs | set(TORCHRUN_ENV)
        for name in c.env:
            if name in read or name in c.injected:
                continue
            meant = near_miss(name, read)
            if meant is None:
                continue
            reader = (f"{contract.SCRIPT} reads {meant} (trainer/contract.py)" if meant in contract.ENV else
                      f"the container's arguments read $({meant})" if meant in refs else f"torchrun reads {meant}")
            state = "is set too" if meant in c.env else "is not set"
            m, f = where(ctx, w, c, name)
            if (m.ref, f, name) in seen:
                continue
            seen.add((m.ref, f, name))
            yield obj_problem(ID, m, f, f"{name} is set but nothing is known to read it; {reader}, which {state}: "
                              f"if {meant} was meant, this setting is lost", f"rename {name} to {meant}",
                              severity=WARNING)
