"""Under auto-sync a training workload is named for its run, or opts in to being replaced.

A Job's pod template (and with it the command, image and resources), a Job's completions, and a StatefulSet's
selector, serviceName and podManagementPolicy cannot be changed in place, and the training operators do not
restart a running PyTorchJob or TrainJob when its spec changes. So a change under an automated Application either
fails to sync (`field is immutable`) or silently trains with the old settings. The repository's scheme: every
workload name ends with the run id the trainer gets as `RUN_ID` (`ddp-train-run-001` with `RUN_ID=run-001`, also
the run's folder under /out). A new run bumps it (`make new-run`): Argo CD creates the new workload and prunes the
old one. The only alternative is the explicit per-object opt-in `argocd.argoproj.io/sync-options:
Force=true,Replace=true`, which deletes and re-creates the workload on every change, ending a running training.

Fails: a Job `ddp-train` under an automated Application; `ddp-train-run-002` whose containers set `RUN_ID=run-001`;
a PyTorchJob whose Master and Worker set different RUN_IDs.
Passes: `ddp-train-run-001` with `RUN_ID=run-001`; a Job `ddp-train` annotated `Force=true,Replace=true`.
"""
from __future__ import annotations

from typing import Iterator

from ..argocd.apps import WORKLOAD_KINDS, replace_opt_in, run_id_of
from ..render.files import rel
from ..kube.objects import Problem
from .kit import Context

ID = "ARGO006"
NAME = "run-id-names"
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")


def check(ctx: Context) -> Iterator[Problem]:
    apps, _ = ctx.argo.apps, ctx.argo.failed
    done: set[tuple[str, str]] = set()
    for app in apps:
        if app.automated is None:
            continue
        for _, _, t in ctx.argo.targets(app):
            source = rel(t.folder)
            for m in t.manifests:
                if m.kind not in WORKLOAD_KINDS or (source, m.ref) in done or replace_opt_in(m):
                    continue
                done.add((source, m.ref))
                values, field = run_id_of(m)
                hint = ("end the name with the run id, e.g. ddp-train-run-001 with RUN_ID=run-001 (make new-run "
                        "writes both), or opt in with argocd.argoproj.io/sync-options: Force=true,Replace=true")
                if not values:
                    yield Problem(ID, f"{app.label()} auto-syncs this workload, which sets no {'RUN_ID'}: a changed "
                                  "spec cannot start a new run under the same name", source, obj=m.ref,
                                  field="metadata.name", hint=hint)
                elif len(set(values)) > 1:
                    yield Problem(ID, f"its containers set different run ids {sorted(set(values))}", source,
                                  obj=m.ref, field=field, hint="set the same RUN_ID in every replica")
                elif not m.name.endswith(f"-{values[0]}"):
                    yield Problem(ID, f"name '{m.name}' does not end with its run id '-{values[0]}' (RUN_ID) while "
                                  f"{app.label()} auto-syncs it: the next run's changes cannot be applied to it",
                                  source, obj=m.ref, field="metadata.name", hint=hint)
