"""No training Job that an auto-syncing Application heals carries a TTL: the finished run would start again.

`ttlSecondsAfterFinished` makes the TTL controller delete a finished Job (a PyTorchJob's `runPolicy` and a JobSet
have the same field). Under `syncPolicy.automated.selfHeal: true` Argo CD sees the object missing from the cluster
and creates it again, so a training run that finished hours ago starts over and overwrites its outputs. Finished
Jobs stay; the next run gets a new name (the run id, see docs/gitops.md) and `prune` removes the old one.

A KubeRay RayJob is deleted only by a DeleteSelf policy: a `deletionStrategy.deletionRules` rule (at its
`ttlSeconds`) or a legacy `onSuccess`/`onFailure` policy (at `ttlSecondsAfterFinished`), never with a
`clusterSelector`. Its `ttlSecondsAfterFinished` with `shutdownAfterJobFinishes` deletes the RayCluster, not the
RayJob, so it passes (kuberay v1.7.0 rayjob_controller.go:420-444, 1413-1573).

Fails: an Application with `automated: {selfHeal: true}` whose path renders a Job with `ttlSecondsAfterFinished:
600`, a PyTorchJob with `runPolicy.ttlSecondsAfterFinished`, or a RayJob with a DeleteSelf deletion rule.
Passes: the same Job without the TTL; a TTL under an Application without selfHeal; a RayJob whose
`ttlSecondsAfterFinished` shuts its cluster down.
"""
from __future__ import annotations

from typing import Iterator

from .. import launchers
from ..render.files import rel
from ..kube.objects import Problem
from .kit import Context

ID = "ARGO002"
NAME = "no-ttl-under-selfheal"
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")


def check(ctx: Context) -> Iterator[Problem]:
    apps, _ = ctx.argo.apps, ctx.argo.failed
    for app in apps:
        if not app.self_heal:
            continue
        for _, _, t in ctx.argo.targets(app):
            for m in t.manifests:
                found = launchers.finished_ttl(m)
                if found is None:  # (nothing deletes the finished object)
                    continue
                field, ttl, undo = found
                yield Problem(ID, f"{field.rsplit('.', 1)[-1]} is {ttl} while {app.label()} syncs this with selfHeal: "
                              "once the finished workload is deleted, Argo CD creates it again and the training "
                              "runs again", rel(t.folder), obj=m.ref, field=field,
                              hint=f"remove {undo}; start the next run under a new run id (make new-run), and "
                                   "prune removes the finished one")
