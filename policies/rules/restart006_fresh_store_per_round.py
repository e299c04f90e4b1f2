"""A world whose pods restart one at a time under torchrun restarts gives every rendezvous round a fresh store address.

On torch's dynamic rendezvous (`c10d`, `etcd-v2`) with `--max-restarts` above 0, the torchrun of a pod that
survives a peer's failure restarts its workers into a new round, and the pod the kubelet or the controller starts
again joins that round with a new torchrun. By default (torch 2.13) the workers share the store of rank 0's
torchrun, whose address that torchrun publishes in its own first round only
(`torch/distributed/elastic/rendezvous/dynamic_rendezvous.py` lines 1209-1223): the new torchrun waits for it under
the new round's prefix (`rendezvous/api.py` line 102) and ends with `DistStoreError: wait timeout ... keys:
/torch.rendezvous.<id>.<round>/MASTER_ADDR`, the others with it. Measured with three torchruns on one machine, no
simulator (docs/simulate.md, "The elastic PyTorchJob"); pytorch/pytorch#147064 reports the same. With
`TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1` every round publishes a fresh address and port (line 1194) and the world
re-forms. Where torchrun has no restart (`--max-restarts` 0) every torchrun ends with its workers and a restart
starts clean: the rule stays silent (RESTART005 covers the etcd rendezvous then). A warning: the world forms and
trains; only its recovery from a pod's failure is lost. `make simulate FAULT="kill:1@step=6"` on such an overlay
shows it.

Fails: an elastic PyTorchJob (c10d, `maxRestarts: 3`) without `TORCH_DISABLE_SHARE_RDZV_TCP_STORE`.
Passes: the same with `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1` (overlays/kind-cpu/pytorchjob-elastic); no torchrun
restart; one node.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from ..model.recovery import shared_store
from .kit import Context, problem

ID = "RESTART006"
NAME = "fresh-store-per-round"
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    """The condition is the model's (recovery.shared_store), which also makes the world survive no pod loss."""
    for t in ctx.topologies:
        b = shared_store(ctx, t)
        if b is not None:
            yield problem(ID, t, b.field, b.message, b.hint, severity=WARNING)
