"""Every PyTorchJob replica type states the same `restartPolicy`.

The training-operator restarts each replica type by its own `restartPolicy` (OnFailure when unset). A Master on
`Never` with Workers on `OnFailure` restarts workers into a world whose master is gone, or lets the master end the
job while workers loop; the world must restart as one. Write it on every replica type, the same everywhere.
A missing one is a warning (the operator's default is the same for all); different ones are an error.
`ExitCode` recreates a pod whose exit code is 128 or more (a signal) and fails the job on any other; under torchrun a
pre-empted or evicted pod exits 1, not 143 (torchrun's agent ends with the SIGTERM's SignalException: torch v2.13.0
`torch/distributed/elastic/multiprocessing/api.py` line 86, `launcher/api.py` line 397), and so does every peer that
lost it: the job fails where `ExitCode` was meant to retry. A warning there.

Fails: Master `restartPolicy: Never`, Worker `restartPolicy: OnFailure`; `ExitCode` on replicas that start torchrun.
Passes: Master and Worker both `restartPolicy: OnFailure` (Kubeflow's examples) or both `Never`.
"""
from __future__ import annotations

from typing import Iterator

from .. import launchers
from ..launchers import pytorchjob

from ..kube.objects import WARNING, Problem
from .kit import Context, obj_problem

ID = "RESTART002"
NAME = "pytorchjob-restart-policy"
SEVERITY = WARNING
KINDS = (pytorchjob.KIND,)


def check(ctx: Context) -> Iterator[Problem]:
    for m in ctx.bundle.manifests:
        if pytorchjob.LAUNCHER is not launchers.of(m):
            continue
        specs = (m.obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        policies = {rtype: (rs or {}).get("restartPolicy") for rtype, rs in specs.items()}
        stated = {p for p in policies.values() if p}
        if len(stated) > 1:
            found = ", ".join(f"{r} {p or '(unset: OnFailure)'}" for r, p in policies.items())
            yield obj_problem(ID, m, "spec.pytorchReplicaSpecs", f"replica types restart differently ({found}): "
                              "part of the world restarts while the rest has stopped or hangs",
                              "give every replica type the same restartPolicy")
            continue
        torchrun = any(t.torchrun for t in ctx.topologies if t.manifest.obj is m.obj)
        for rtype, policy in policies.items():
            if policy == "ExitCode" and torchrun:
                yield obj_problem(ID, m, f"spec.pytorchReplicaSpecs.{rtype}.restartPolicy", f"{rtype} restartPolicy "
                                  "ExitCode retries exit codes of 128 and more, but the replicas start torchrun, which "
                                  "exits 1 when a pre-emption stops it, as do the peers that lost it: the operator "
                                  "fails the job instead", "use restartPolicy OnFailure (restarts counted against "
                                  "runPolicy.backoffLimit)", severity=WARNING)
                continue
            if not policy:
                yield obj_problem(ID, m, f"spec.pytorchReplicaSpecs.{rtype}.restartPolicy", f"{rtype} has no "
                                  "restartPolicy (the operator's default OnFailure applies, unseen)",
                                  "write restartPolicy on every replica type", severity=WARNING)
