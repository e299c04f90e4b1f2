"""Every option written to torchrun is one torchrun takes.

torchrun reads its options with argparse (torch/distributed/run.py get_args_parser, torch 2.13): an option it does not
know (`--nprocs-per-node=8` for `--nproc-per-node`) ends it with "unrecognized arguments", exit 2, before any worker
starts: on every pod, so the world never forms. A unique prefix of an option is taken (`--nnode`), and a prefix of
several is left alone (ambiguous on some Pythons only). `python -m torch.distributed.launch` also takes its own
`--use-env` (torch/distributed/launch.py parse_args). The options are
the installed torch's (policies/command/torchrun.py OPTIONS; tests/test_torchrun.py compares them with the real parser).

Fails: `torchrun --nprocs-per-node=1 ...`.
Passes: the repository's overlays; `--nproc_per_node` and `--nproc-per-node` alike; `python -m
torch.distributed.launch --use_env --nproc_per_node=8 ...`.
"""
from __future__ import annotations

import difflib
from typing import Iterator

from ..kube.objects import Problem
from .kit import Context, problem
from ..command.torchrun import OPTIONS, unknown_option

ID = "TOPO013"
NAME = "torchrun-options"


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        inv = t.first.inv
        if inv is None or inv.launcher != "torchrun":
            continue
        for dest, (_, field) in inv.flags.items():
            if dest in inv.own_options or not unknown_option(dest):
                continue
            written = f"--{dest.replace('_', '-')}"
            near = difflib.get_close_matches(written, sorted(o for o in OPTIONS if "_" not in o), n=1)
            yield problem(ID, t, field, f"torchrun refuses {written} (unrecognized arguments): it exits 2 before "
                          "any worker starts, on every pod", f"write {near[0]}" if near else "remove it")
