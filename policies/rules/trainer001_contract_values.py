"""Every value the trainer reads is one it accepts (trainer/contract.py).

`/app/trainer/train.py` takes each flag's default from an environment variable (`DIST_BACKEND` for `--backend`,
`EPOCHS` for `--epochs`, ...) and refuses a value outside what the flag accepts: argparse's error, exit 2 on every
rank before training, so the world never trains. The accepted values are declared once in `trainer/contract.py`;
this rule checks every container that starts the trainer (`/app/trainer/train.py` or `-m trainer.train`) against
it: each declared variable as the container sees it (its env, ConfigMaps through `envFrom`, what the controller
injects), unless the flag itself is on the command line, and each such flag's own value. A value the manifests do
not resolve (a Secret, a `fieldRef` only the cluster knows) is not checked.

The contract is this repository's trainer's, so it binds where the container's image is one known to hold it:
gitops.yaml's `identity.image` (the repository the input lies in) or the template's example image. Another image may
hold another program at that path or module (a team's own `trainer` package): there each finding is a warning
that starts with that condition (TRAINER002 and TRAINER003 alike).

Fails: `DIST_BACKEND=glo` in the environment's `ddp-env` ConfigMap; `--epochs=0`.
Passes: `DIST_BACKEND=gloo`; `DIST_BACKEND=glo` with `--backend=gloo` on the command line (the flag wins).
"""
from __future__ import annotations

from typing import Any, Iterator

from ..model.trainer_contract import contract

from ..kube.objects import Problem
from .kit import Context, located, trainer_containers, trainer_problem, where

ID = "TRAINER001"
NAME = "trainer-contract-values"


def _flag_values(args: list[str], fields: list[str]) -> Iterator[tuple[str, str, str]]:
    """(flag, value, field) for every contract flag written with a value in the trainer's arguments."""
    for i, tok in enumerate(args):
        flag, eq, value = tok.partition("=")
        if flag not in contract.FLAGS:
            continue
        if eq:
            yield flag, value, fields[i]
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            yield flag, args[i + 1], fields[i + 1]


def check(ctx: Context) -> Iterator[Problem]:
    seen: set[tuple[str, str | None, str]] = set()  # a Master and its Workers share one ConfigMap key
    for w, pod, c, argv, fields, start, cond in trainer_containers(ctx):
        args, arg_fields = argv[start:], fields[start:]
        given = contract.flags_given(args)
        for flag, value, field in _flag_values(args, arg_fields):
            var = contract.FLAGS[flag]
            why = var.refuses(value) if "$(" not in value else None
            if why:
                m, f = located(w, field)
                if (m.ref, f, flag) in seen:
                    continue
                seen.add((m.ref, f, flag))
                yield trainer_problem(ID, cond, m, f, f"{flag} is '{value}', which "
                                  f"{contract.SCRIPT} refuses ({why}; trainer/contract.py): every rank exits 2 "
                                  "before training", _hint(var, flag))
        env = c.env
        for name, var in contract.ENV.items():
            if var.flag is None or var.flag in given:
                continue
            value = env.get(name)
            if value is None or "$(" in value:
                continue
            why = var.refuses(value)
            if why:
                m, f = where(ctx, w, c, name)
                if (m.ref, f, name) in seen:
                    continue
                seen.add((m.ref, f, name))
                yield trainer_problem(ID, cond, m, f, f"{name} is '{value}', which {contract.SCRIPT} refuses ({why}; "
                                  "trainer/contract.py): every rank exits 2 before training", _hint(var, name))


def _hint(var: Any, what: str) -> str:
    if var.choices:
        return f"set {what} to one of {', '.join(var.choices)}"
    return f"set {what} to {var.kind}"
