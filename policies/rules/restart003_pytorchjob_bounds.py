"""A PyTorchJob bounds its restarts and its running time.

With `restartPolicy` OnFailure, Always or ExitCode and no `runPolicy.backoffLimit`, the training-operator restarts a
failing world for ever, holding every pod of the gang (and its GPUs); without `runPolicy.activeDeadlineSeconds` a
world hung in a collective holds them for ever too. A warning (Kubeflow's own examples run without them; an
environment can make it an error); `backoffLimit` is not needed when every replica type has `restartPolicy: Never`.

Fails: Kubeflow's `simple.yaml` (OnFailure, no runPolicy) gives two warnings.
Passes: `runPolicy: {backoffLimit: 3, activeDeadlineSeconds: 86400}`.
"""
from __future__ import annotations

from typing import Iterator

from .. import launchers
from ..launchers import pytorchjob

from ..kube.objects import WARNING, Problem
from .kit import Context, obj_problem

ID = "RESTART003"
NAME = "pytorchjob-restart-bounds"
KINDS = (pytorchjob.KIND,)
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    for m in ctx.bundle.manifests:
        if pytorchjob.LAUNCHER is not launchers.of(m):
            continue
        spec = m.obj.get("spec") or {}
        run = spec.get("runPolicy") or {}
        restarts = any(((rs or {}).get("restartPolicy") or "OnFailure") != "Never"
                       for rs in (spec.get("pytorchReplicaSpecs") or {}).values())
        if restarts and run.get("backoffLimit") is None:
            yield obj_problem(ID, m, "spec.runPolicy.backoffLimit", "no backoffLimit: a failing world is restarted "
                              "for ever, holding every pod of the gang (and its GPUs)",
                              "set runPolicy.backoffLimit (e.g. 3)", severity=WARNING)
        if run.get("activeDeadlineSeconds") is None:
            yield obj_problem(ID, m, "spec.runPolicy.activeDeadlineSeconds", "no activeDeadlineSeconds: a world hung "
                              "in a collective holds its pods (and their GPUs) for ever",
                              "set runPolicy.activeDeadlineSeconds to the longest the run may take", severity=WARNING)
