"""A world on torchrun's etcd rendezvous that its controller restarts keeps a torchrun restart, or one failure closes it.

When one pod of the world dies, the workers of every other pod fail with it (their collective loses a peer). A
torchrun with no restart left (`--max-restarts` 0, torchrun's default) then ends and, on its way out, closes the
rendezvous (torch v2.13.0 `torch/distributed/launcher/api.py` line 403, `spec.rdzv_handler.shutdown()`; only an
agent killed by a signal skips it, line 395). The etcd backends keep that `closed` state in etcd under the run's
`--rdzv-id` (`torch/distributed/elastic/rendezvous/etcd_rendezvous.py` `set_closed`, line 822), in a key leased
for two hours that every starting agent renews (line 88): each pod the kubelet or the controller starts again
reads it and ends at once with `RendezvousClosedError` (line 368), a crash loop that only a new run id or a cleared
etcd ends. The c10d backend keeps its state in the torchrun of the endpoint's pod, which ends too, so a restart
starts clean. With `--max-restarts` above 0 the surviving torchrun does not close the rendezvous: it restarts its
workers into a new round, which the restarted pod joins; with the etcd-v2 backend (torch's dynamic rendezvous) the
restarted pod then still waits for the store address of the survivor, which torch 2.13 publishes in the first round
only (`dynamic_rendezvous.py` lines 1209-1223; `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1` makes every round publish one),
so this rule claims only the closing (RESTART006 reports the wait). The rule applies where the controller restarts or
recreates the pods (a StatefulSet, a PyTorchJob restart policy other than `Never`, a Job or JobSet that retries).
A warning: the world forms and trains; only its recovery from a failure is lost. `make simulate FAULT=kill:1@step=6`
on such an overlay shows it.

Fails: a StatefulSet with `--rdzv-backend=etcd-v2` and no `--max-restarts`.
Passes: the same with `--max-restarts=3`; `--rdzv-backend=c10d`; an Indexed Job with `backoffLimit: 0` (no restart).
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from ..model.recovery import etcd_closes
from .kit import Context, problem

ID = "RESTART005"
NAME = "etcd-rendezvous-survives-restart"
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    """The condition is the model's (recovery.etcd_closes), which also makes the world survive no pod loss."""
    for t in ctx.topologies:
        b = etcd_closes(ctx, t)
        if b is not None:
            yield problem(ID, t, b.field, b.message, b.hint, severity=WARNING)
