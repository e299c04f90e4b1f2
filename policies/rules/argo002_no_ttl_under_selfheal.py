"""No training Job that an auto-syncing Application heals carries a TTL: the finished run would start again.

`ttlSecondsAfterFinished` makes the TTL controller delete a finished Job (a PyTorchJob's `runPolicy` and a JobSet
have the same field). Under `syncPolicy.automated.selfHeal: true` Argo CD sees the object missing from the cluster
and creates it again, so a training run that finished hours ago starts over and overwrites its outputs. Finished
Jobs stay; the next run gets a new name (the run id, see docs/gitops.md) and `prune` removes the old one.

Fails: an Application with `automated: {selfHeal: true}` whose path renders a Job with `ttlSecondsAfterFinished:
600`, or a PyTorchJob with `runPolicy.ttlSecondsAfterFinished`.
Passes: the same Job without the TTL; a TTL under an Application without selfHeal.
"""
from __future__ import annotations

from typing import Iterator

from .. import launchers
from ..render.files import rel
from ..kube.values import dig
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
                path = launchers.ttl_field(m)
                ttl = dig(m.obj, *path) if path else None
                if ttl is None or path is None:  # (no path: no ttl)
                    continue
                yield Problem(ID, f"ttlSecondsAfterFinished is {ttl} while {app.label()} syncs this with selfHeal: "
                              "once the finished workload is deleted, Argo CD creates it again and the training "
                              "runs again", rel(t.folder), obj=m.ref, field=".".join(path),
                              hint="remove the TTL; start the next run under a new run id (make new-run), and "
                                   "prune removes the finished one")
