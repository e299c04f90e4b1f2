"""A dynamic rendezvous (c10d, etcd) has an id of its own for each run.

torchrun's `--rdzv-id` (`PET_RDZV_ID`, PyTorchJob `elasticPolicy.rdzvId`) names the rendezvous. Left at torchrun's
default `none`, every job on a shared etcd joins the same rendezvous, and a re-run finds the finished state of the
last one: an error with the etcd backends, a warning with c10d (its store dies with the job, but restarts and logs
cannot be told apart). A constant written into the command line gives every run of the manifest the same id: a
warning with etcd. Take it from the run id (`$(RUN_ID)`, which also names the trainer's checkpoint folder) or from
the Job's uid label. The static backend ignores the id.

Fails: `--rdzv-backend=etcd-v2` with no `--rdzv-id`; a c10d StatefulSet without an id (warning).
Passes: `--rdzv-backend=c10d --rdzv-id=$(RUN_ID)`; static rendezvous.
"""
from __future__ import annotations

from ..model import ERROR, WARNING
from . import problem

ID = "RDZV002"
NAME = "rdzv-id-per-run"
SEVERITY = WARNING


def check(ctx):
    for t in ctx.topologies:
        if not t.torchrun or t.backend == "static" or t.backend.startswith("c10d (standalone)"):
            continue
        if t.pods <= 1 and (t.nnodes_max or 1) <= 1:
            continue
        s = t.first.rdzv_id
        etcd = t.backend.startswith("etcd")
        where = s.field or ("spec.elasticPolicy.rdzvId" if t.launcher == "pytorchjob" else t.first.inv.field)
        if s.value in ("", "none"):
            yield problem(ID, t, where, f"rendezvous id is unset (torchrun's default 'none') with the {t.backend} "
                          "backend" + (": every job on this etcd, and every re-run, joins the same rendezvous" if etcd
                                       else ": restarts and re-runs cannot be told apart"),
                          "set --rdzv-id=$(RUN_ID) (an id per run)", severity=ERROR if etcd else WARNING)
        elif etcd and s.origin == "flag" and not s.var and "$" not in s.value:
            yield problem(ID, t, where, f"rendezvous id is the constant '{s.value}': every run of this manifest "
                          "joins the same etcd rendezvous", "take it from the run id, e.g. --rdzv-id=$(RUN_ID)",
                          severity=WARNING)
