"""A PyTorchJob bounds its restarts and its running time.

With `restartPolicy` OnFailure, Always or ExitCode and no `runPolicy.backoffLimit`, the training-operator restarts a
failing world for ever, holding every pod of the gang (and its GPUs, where the pods ask for any); without
`runPolicy.activeDeadlineSeconds` a world hung in a collective holds them for ever too. A warning (Kubeflow's own examples run without them; an
environment can make it an error); `backoffLimit` is not needed when every replica type has `restartPolicy: Never`.

Fails: Kubeflow's `simple.yaml` (OnFailure, no runPolicy) gives two warnings.
Passes: `runPolicy: {backoffLimit: 3, activeDeadlineSeconds: 86400}`.
"""
from __future__ import annotations

from typing import Iterator

from .. import launchers
from ..launchers import pytorchjob

from ..kube.values import listing, mapping
from ..kube.objects import WARNING, Manifest, Problem
from .kit import Context, obj_problem

ID = "RESTART003"
NAME = "pytorchjob-restart-bounds"
KINDS = (pytorchjob.KIND,)
SEVERITY = WARNING


def _asks_for_gpus(m: Manifest) -> bool:
    """Whether a container of any replica type asks for a GPU (launchers/pods.py's resource names)."""
    for rs in mapping(mapping(m.obj.get("spec")).get("pytorchReplicaSpecs")).values():
        for c in listing(mapping(mapping(mapping(rs).get("template")).get("spec")).get("containers")):
            res = mapping(mapping(c).get("resources"))
            if launchers.gpu_resources(res.get("limits")) or launchers.gpu_resources(res.get("requests")):
                return True
    return False


def check(ctx: Context) -> Iterator[Problem]:
    for m in ctx.bundle.manifests:
        if pytorchjob.LAUNCHER is not launchers.of(m):
            continue
        spec = m.obj.get("spec") or {}
        run = spec.get("runPolicy") or {}
        held, its = ("pods (and their GPUs)", " (and its GPUs)") if _asks_for_gpus(m) else ("pods", "")
        restarts = any(((rs or {}).get("restartPolicy") or "OnFailure") != "Never"
                       for rs in (spec.get("pytorchReplicaSpecs") or {}).values())
        if restarts and run.get("backoffLimit") is None:
            yield obj_problem(ID, m, "spec.runPolicy.backoffLimit", "no backoffLimit: a failing world is restarted "
                              f"for ever, holding every pod of the gang{its}",
                              "set runPolicy.backoffLimit (e.g. 3)", severity=WARNING)
        if run.get("activeDeadlineSeconds") is None:
            yield obj_problem(ID, m, "spec.runPolicy.activeDeadlineSeconds", "no activeDeadlineSeconds: a world hung "
                              f"in a collective holds its {held} for ever",
                              "set runPolicy.activeDeadlineSeconds to the longest the run may take", severity=WARNING)
