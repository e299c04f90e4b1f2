"""Every argument of the trainer's is one its parser takes (trainer/contract.py).

`/app/trainer/train.py` reads its arguments with argparse: an option it does not know (`--epocs=3`,
`--batchsize 256`), an ambiguous prefix of several (`--s`), a positional argument (it takes none) or anything after
`--` ends it with "unrecognized arguments", exit 2, on every rank before training; `--help` prints the usage and
exits 0 without training. contract.refused answers as the parser does (tests/test_trainer_contract.py compares it with
trainer/cli.py's parser on generated command lines). An argument the manifest does not resolve (`$(VAR)`) is left
alone. In an image not known to hold the trainer (see TRAINER001) each finding is a warning that starts with that
condition.

Fails: `--epocs=3`; `--batchsize 256`.
Passes: the repository's overlays; `--epoch=3` (argparse takes a unique prefix).
"""
from __future__ import annotations

import difflib
from typing import Iterator

from ..kube.objects import Problem
from .kit import Context, located
from ..model.trainer_contract import contract
from .kit import trainer_containers, trainer_problem

ID = "TRAINER003"
NAME = "trainer-arguments"


def check(ctx: Context) -> Iterator[Problem]:
    seen: set[tuple[str, str | None]] = set()
    for w, pod, c, argv, fields, start, cond in trainer_containers(ctx):
        for k, written, why in contract.refused([str(a) for a in argv[start:]]):
            m, f = located(w, fields[start + k])
            if (m.ref, f) in seen:
                continue
            seen.add((m.ref, f))
            near = difflib.get_close_matches(written, [o for o in contract.OPTIONS if o.startswith("--")], n=1)
            exits = "every rank exits 0 without training" if written in ("-h", "--help") else \
                "every rank exits 2 before training"
            yield trainer_problem(ID, cond, m, f, f"{contract.SCRIPT} refuses '{written}' ({why}): {exits}",
                              f"write {near[0]}" if near and not why.startswith("ambiguous") else
                              "remove it, or write one of the options in docs/trainer.md")
