"""The launcher's own requirements hold: what its controller or webhook needs before it injects anything.

PyTorchJob (training-operator v1): exactly one Master replica (the webhook rejects others), a container named
`pytorch` (its port `pytorchjob-port` sets MASTER_PORT), and torchrun whenever `nprocPerNode` is above 1 (the operator
counts WORLD_SIZE in processes but starts one process per pod). TrainJob (Trainer v2): the runtime it names is in
the manifests (or is upstream's `torch-distributed`), has an `mlPolicy.torch` (else no PET_* env is injected) and a
trainer step; users may not set PET_* in `spec.trainer.env` (the webhook rejects it).

Fails: a PyTorchJob with 2 Master replicas; `nprocPerNode: "4"` with `python train.py`; a TrainJob naming a
runtime that is not in git.
Passes: the repository's own PyTorchJob and TrainJob with their ClusterTrainingRuntime.
"""
from __future__ import annotations

from ..model import Problem

ID = "TOPO011"
NAME = "launcher-requirements"


def check(ctx):
    for w in ctx.unresolved:
        c = w.facts.get("unresolved")
        if c is not None:
            m = w.manifest
            yield Problem(ID, c.message, m.source, m.ref, c.field, c.hint)
    topologies = {id(t.workload): t for t in ctx.topologies}
    for w in ctx.workloads:
        t = topologies.get(id(w))
        for c in w.controller.admission(w, ctx.bundle, t.torchrun if t else False):
            m = c.obj or w.manifest
            yield Problem(ID, c.message, m.source, m.ref, c.field, c.hint)
