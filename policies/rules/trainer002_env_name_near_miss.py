"""An environment variable set beside the trainer is not a near miss of one it reads.

A misspelt name is set, read by nobody, and the value it was meant for stays at its default: `NPROC_PER_NOD: "8"` in
a topology patch leaves the base's `NPROC_PER_NODE=1` in force, and a 512-GPU world trains on 64. For every
container that starts `/app/trainer/train.py`, each variable the manifests set (its env and its ConfigMaps through
`envFrom`; not what a controller injects) that nothing is known to read is compared with the names that are read:
the trainer's (trainer/contract.py), those the container's command, arguments and env values reference as `$(NAME)`,
and torchrun's `PET_*` settings. A name the container's shell script reads (`$NAME`, `${NAME}`) is read.

One edit away from such a name (or differing in case only), where the input shows the value in force differs from
the one written, the run is other than written and that is an error: the name it was meant for is set to another
value, or is read as `$(NAME)` and set nowhere (the kubelet leaves the text as it is), or is torchrun's `PET_*` with
neither the flag nor the variable set (torchrun's default is known). Otherwise (two edits, the same value, a flag on
the command line that wins anyway, or the trainer's own default, which the manifests do not show) it is a warning
phrased as that condition. Where the name meant is the trainer's and the image is not one known to hold it (see
TRAINER001), the error is a warning that starts with that condition.

Fails: `NPROC_PER_NOD` set where the arguments read `$(NPROC_PER_NODE)`; `DIST_BACKND: nccl` beside
`DIST_BACKEND: gloo` in `ddp-env` (an error: the run uses gloo).
Passes: `NPROC_PER_NODE`; `NCCL_DEBUG`, `MODEL_PARAMS` (close to no name that is read); `NPROC_PER_NOD` read by the
container's shell script.
"""
from __future__ import annotations

import re
from typing import Collection, Iterator

from ..model.trainer_contract import contract

from ..kube.objects import ERROR, WARNING, Problem
from ..launchers import ContainerEnv
from .kit import Context, obj_problem
from ..command.torchrun import DEFAULTS
from .kit import trainer_containers, where

ID = "TRAINER002"
NAME = "trainer-env-name-near-miss"
SEVERITY = ERROR
_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")
# What a shell reads: `$NAME` and `${NAME...}` (an unescaped `$` before the name).
_SHELL_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
TORCHRUN_ENV = tuple(f"PET_{name.upper()}" for name in DEFAULTS)


def distance(a: str, b: str, bound: int | None = None) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b` (optimal string alignment).
    With `bound`, any answer over it may come back as `bound + 1`, computed only as far as it takes to know: a
    container's every variable is compared with every name that is read, and almost none are near."""
    if bound is not None and abs(len(a) - len(b)) > bound:  # each edit changes the length by one at most
        return bound + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if bound is not None and min(cur) > bound and min(prev) > bound:
            return bound + 1  # no cell of two rows in a row is within it: a swap reaches back one row only
        prev2, prev = prev, cur
    return prev[-1]


def near_miss(name: str, read: Collection[str]) -> str | None:
    """The name among `read` that `name` is a near miss of (one edit for names up to 8 characters, two beyond, or
    the same letters in another case), None when it is none's: the first in sorted order of those nearest. Worked
    out once per name and set of names read (a handful of sets per run)."""
    names = frozenset(read)
    answers = _ANSWERS.get(names)
    if answers is None:
        if len(_ANSWERS) > 256:  # bounded on any input
            _ANSWERS.clear()
        answers = _ANSWERS[names] = {}
    if name not in answers:
        if len(answers) > 4096:
            answers.clear()
        answers[name] = _INDEX.nearest(name, names)
    return answers[name]


def _deletions(word: str, most: int) -> set[str]:
    """`word` with up to `most` of its letters deleted, itself included."""
    out, edge = {word}, {word}
    for _ in range(most):
        edge = {w[:i] + w[i + 1:] for w in edge for i in range(len(w))}
        out |= edge
    return out


class _Index:
    """Every name read so far that can be a near miss's (four letters or more: the trainer's contract and torchrun's
    in every set, a container's own $(NAME)s), by its lower case and by each of its deletions within its limit. A
    name `n` edits from another shares a deletion of at most `n` letters from each (an insertion, deletion or
    substitution costs at most one on each side, a swap one too), so the names read that share one with the
    variable are the only ones whose distance needs working out (a container's variables are compared with some 60
    names, almost never near)."""

    def __init__(self) -> None:
        self.known: set[str] = set()
        self.by_case: dict[str, set[str]] = {}
        self.by_deletion: dict[str, set[str]] = {}

    def _add(self, read: frozenset[str]) -> None:
        new = [k for k in read if len(k) >= 4 and k not in self.known]
        if new and len(self.known) + len(new) > 20_000:  # bounded on any input
            self.known.clear()
            self.by_case.clear()
            self.by_deletion.clear()
            new = [k for k in read if len(k) >= 4]
        for known in new:
            self.known.add(known)
            self.by_case.setdefault(known.lower(), set()).add(known)
            for v in _deletions(known, 1 if len(known) <= 8 else 2):
                self.by_deletion.setdefault(v, set()).add(known)

    def nearest(self, name: str, read: frozenset[str]) -> str | None:
        self._add(read)
        for known in sorted(k for k in self.by_case.get(name.lower(), ()) if k in read):
            if known != name:
                return known
        upper = name.upper()
        best = None
        for known in sorted({k for v in _deletions(upper, 2) for k in self.by_deletion.get(v, ()) if k in read}):
            limit = 1 if len(known) <= 8 else 2
            d = distance(upper, known, limit)
            if known != name and d <= limit and (best is None or d < best[0]):
                best = (d, known)
        return best[1] if best else None


_INDEX = _Index()
# near_miss's answers, by the set of names read.
_ANSWERS: dict[frozenset[str], dict[str, str | None]] = {}


def _references(c: ContainerEnv) -> set[str]:
    """The names the container's command, args and env values read as `$(NAME)` (only text holding `$(` is
    searched: most hold none)."""
    refs: set[str] = set()
    for key in ("command", "args"):
        for tok in c.container.get(key) or []:
            tok = str(tok)
            if "$(" in tok:
                refs.update(_REF.findall(tok))
    for e in c.container.get("env") or []:
        if isinstance(e, dict) and isinstance(value := e.get("value"), str) and "$(" in value:
            refs.update(_REF.findall(value))
    return refs


def _shell_reads(argv: list[str]) -> set[str]:
    """The names the container's command line reads as a shell would (`sh -c '... $NAME ...'`): `$(NAME)` is gone
    by now (the kubelet expanded it), so what is left with a `$` is the shell's."""
    return {name for tok in argv if "$" in tok for name in _SHELL_REF.findall(tok)}


def _flag_given(tokens: list[str], flag: str) -> bool:
    """`flag` (or its underscore spelling) is on this part of the command line, alone or with `=value`."""
    spellings = {flag, flag.replace("-", "_")}
    return any(tok.partition("=")[0] in spellings for tok in tokens)


def in_force(meant: str, c: ContainerEnv, refs: set[str], argv: list[str], start: int) -> tuple[str | None, str]:
    """The value `meant` has for the run when the misspelt name is ignored, where the input shows it (None: it does
    not), and how that value comes about."""
    if meant in c.env:
        value = c.env[meant]
        return value, (f"{meant} is {value!r}" if value is not None else f"{meant} is set from elsewhere")
    if meant in refs:
        return f"$({meant})", f"{meant} is set nowhere, so $({meant}) stays as written"
    if meant in TORCHRUN_ENV:
        option = meant[len("PET_"):].lower()
        flag = "--" + option.replace("_", "-")
        if _flag_given(argv[:start], flag):
            return None, f"torchrun's {flag} is on the command line, which wins over both"
        return DEFAULTS[option], f"torchrun's default {flag} is {DEFAULTS[option]!r}"
    var = contract.ENV.get(meant)
    if var is not None and var.flag and _flag_given(argv[start:], var.flag):
        return None, f"the trainer's {var.flag} is on the command line, which wins over both"
    return None, f"{meant} is not set, so the trainer's default applies"


def check(ctx: Context) -> Iterator[Problem]:
    seen: set[tuple[str, str | None, str]] = set()  # a Master and its Workers share one ConfigMap key
    for w, pod, c, argv, fields, start, cond in trainer_containers(ctx):
        refs = _references(c)
        read = set(contract.ENV) | refs | set(TORCHRUN_ENV)
        shell = _shell_reads(argv)
        for name in c.env:
            if name in read or name in c.injected or name in shell:
                continue
            meant = near_miss(name, read)
            if meant is None:
                continue
            reader = (f"{contract.SCRIPT} reads {meant} (trainer/contract.py)" if meant in contract.ENV else
                      f"the container's arguments read $({meant})" if meant in refs else f"torchrun reads {meant}")
            m, f = where(ctx, w, c, name)
            if (m.ref, f, name) in seen:
                continue
            seen.add((m.ref, f, name))
            written = c.env[name]
            value, how = in_force(meant, c, refs, argv, start)
            one_edit = meant.lower() == name.lower() or distance(name.upper(), meant) <= 1
            if one_edit and written is not None and value is not None and value != written:
                said = (f"{name} is {written!r}, but nothing reads {name}: {reader}, and {how}, so the run is not "
                        "what this says")
                if meant in contract.ENV and cond is not None:  # what the image's program reads is not shown
                    yield obj_problem(ID, m, f, f"{cond}, {said}", f"rename {name} to {meant}", severity=WARNING)
                else:
                    yield obj_problem(ID, m, f, said, f"rename {name} to {meant}", severity=ERROR)
                continue
            yield obj_problem(ID, m, f, f"{name} is set but nothing is known to read it; {reader}, and {how}: "
                              f"if {meant} was meant, this setting is lost", f"rename {name} to {meant}",
                              severity=WARNING)
