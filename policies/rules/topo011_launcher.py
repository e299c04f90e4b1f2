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
from . import problem

ID = "TOPO011"
NAME = "launcher-requirements"


def check(ctx):
    for w in ctx.unresolved:
        m = w.manifest
        if w.launcher == "trainjob" and not w.facts.get("runtime_found"):
            yield Problem(ID, f"runtime {w.facts.get('runtime_kind')} '{w.facts.get('runtime_name')}' is not in these "
                          "manifests: the topology cannot be worked out", m.source, m.ref, "spec.runtimeRef",
                          "commit the runtime beside the TrainJob so everything it depends on lives in git")
    for t in ctx.topologies:
        m = t.manifest
        spec = m.obj.get("spec") or {}
        if t.launcher == "pytorchjob":
            counts = t.workload.facts.get("replica_counts") or {}
            if "Master" in counts and counts["Master"] != 1:
                yield problem(ID, t, "spec.pytorchReplicaSpecs.Master.replicas",
                              f"Master replicas is {counts['Master']}, expected 1", "use 1 Master and N-1 Workers")
            for g in t.workload.groups:
                names = [c.get("name") for c in (g.template.get("spec") or {}).get("containers") or []]
                if "pytorch" not in names:
                    yield problem(ID, t, f"{g.template_field}.spec.containers", f"no container named 'pytorch' in "
                                  f"{g.role} (found {names})", "name the training container pytorch")
            nproc = t.workload.facts.get("nproc_per_node")
            if not t.torchrun and str(nproc).isdigit() and int(nproc) > 1:
                yield problem(ID, t, "spec.nprocPerNode", f"nprocPerNode is {nproc} but the container does not start "
                              f"torchrun: WORLD_SIZE counts {nproc} processes per pod, one starts",
                              "start the script with torchrun, or set nprocPerNode to 1")
        elif t.launcher == "trainjob":
            f = t.workload.facts
            if not f.get("torch_policy"):
                yield problem(ID, t, "spec.runtimeRef", f"runtime '{f.get('runtime_name')}' has no mlPolicy.torch: "
                              "the Trainer injects no PET_* env", "use a torch runtime")
            for i, var in enumerate(((spec.get("trainer") or {}).get("env")) or []):
                if str(var.get("name", "")).startswith("PET_"):
                    yield problem(ID, t, f"spec.trainer.env[{i}]", f"{var.get('name')} is set by hand; the "
                                  "Trainer sets PET_* itself and its webhook rejects this",
                                  "use spec.trainer.numNodes / numProcPerNode instead")
