"""No auto-sync fights Kueue over a queued workload's suspend field: ignored, with RespectIgnoreDifferences.

Kueue owns the suspend field of a workload labelled `kueue.x-k8s.io/queue-name` (Kueue v0.19.2 reads the label only,
pkg/controller/jobframework/utils.go:180-182): its webhook suspends the job at creation whatever the manifest says
(jobframework/defaults.go:36-46), its reconciler resumes it when the whole gang is admitted and suspends it again on
eviction or preemption (reconciler.go:1480-1565). A manifest that sets the field itself (`spec.suspend` of a Job,
JobSet, TrainJob or AppWrapper, `spec.runPolicy.suspend` of a PyTorchJob or MPIJob: each launcher's `suspend_field`)
then differs from the live object for good: Argo CD shows the run OutOfSync, and under auto-sync a sync puts the
manifest's value back, starting a gang Kueue has not admitted (`false`) or stopping one it has (`true`). The
Application needs the field's JSON pointer in `spec.ignoreDifferences` for that group and kind (Argo CD v3.5.1 drops
it from the diff: util/argo/normalizers/diff_normalizer.go:185-197) and `RespectIgnoreDifferences=true` in its
`syncOptions`, without which a sync started by any other change still applies the manifest's value
(controller/sync.go:236-246). A manifest that does not set the field shows no drift (Argo CD compares the fields the
desired state sets: gitops-engine pkg/diff/diff.go:731-764 for the three-way diff, 421-503 for the structured-merge
diff of ServerSideApply=true) and the rule says nothing; the repository's test (tests/test_argocd_drift.py) asks
argocd/applicationset.yaml for the entries of every queued workload all the same, set or not. Reads only the
Application's own `ignoreDifferences` (argocd-cm's `resource.customizations.ignoreDifferences` are not read), and
only the queue label (not Kueue's `manageJobsWithoutQueueName`). Where the rendered folder's environment declares
Kueue's integrations (`kueueFrameworks`), a kind whose integration is not among them is left alone: Kueue sets up no
webhook or reconciler for it (Kueue v0.19.2 pkg/controller/jobframework/setup.go:76, 108-111) and never touches its
suspend field, so the manifest's value stands; where nothing is declared, every queued kind counts, as a warning
phrased as the condition that its integration is on (an error where it is declared on).

Fails: an auto-syncing Application whose path renders 64x8-h100's PyTorchJob with `runPolicy.suspend: true` and
whose ignoreDifferences lacks `/spec/runPolicy/suspend` for kubeflow.org/PyTorchJob; the same with the entry but
without RespectIgnoreDifferences=true; a queued Job with `suspend: false`.
Passes: the same PyTorchJob under an Application with the entry and RespectIgnoreDifferences=true; 64x8-h100's
PyTorchJob, which does not set suspend, under an Application without ignoreDifferences; an Application that does not
auto-sync; a queued PyTorchJob with `runPolicy.suspend: true` whose environment's `kueueFrameworks` leaves out
kubeflow.org/pytorchjob, under an Application without ignoreDifferences.
Warns: the failing cases where the rendered folder's environment declares no `kueueFrameworks`: whether the
cluster's Kueue has the kind's integration on is not in the input, so the finding is phrased as that condition.
"""
from __future__ import annotations

from typing import Iterator

from ..argocd.apps import RESPECT_IGNORE_DIFFERENCES, ignores, unguarded
from ..render.files import rel
from ..kube.values import dig, kueue_queue
from ..kube.objects import ERROR, WARNING, Problem
from .kit import Context

ID = "ARGO012"
NAME = "kueue-suspend-ignored"
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")


def check(ctx: Context) -> Iterator[Problem]:
    seen: set[tuple[str, str, str, str]] = set()
    for app in ctx.argo.apps:
        if app.automated is None:
            continue
        respect = RESPECT_IGNORE_DIFFERENCES in app.options
        ns = str(app.destination.get("namespace") or "")
        where = f"{app.manifest.ref} {app.spec_field}"
        for _, _, t in ctx.argo.targets(app):
            for m, entry in unguarded(app, t.manifests, set_only=True, frameworks=t.kueue_frameworks):
                key = (app.name, rel(t.folder), m.ref, entry.pointer)
                if key in seen:
                    continue
                seen.add(key)
                field = entry.pointer.strip("/").replace("/", ".")
                value = dig(m.obj, *entry.pointer.strip("/").split("/"))
                shown = str(value).lower() if isinstance(value, bool) else repr(value)
                gk = f"{entry.group}/{entry.kind}" if entry.group else entry.kind
                if ignores(app, entry, m.name, m.namespace or ns):
                    missing = f"ignores {entry.pointer} but lacks {RESPECT_IGNORE_DIFFERENCES} in syncOptions, so " \
                              "every sync applies the manifest's value"
                    fix = f"add {RESPECT_IGNORE_DIFFERENCES} to {where}.syncPolicy.syncOptions"
                else:
                    missing = f"does not ignore {entry.pointer} for {gk}, so it shows OutOfSync and auto-sync " \
                              "sets the manifest's value back"
                    fix = f"add {entry.yaml()} to {where}.ignoreDifferences" + \
                          ("" if respect else f" and {RESPECT_IGNORE_DIFFERENCES} to {where}.syncPolicy.syncOptions")
                if value is False:
                    effect = "the gang starts before Kueue admits it"
                elif value is True:
                    effect = "the admitted gang is suspended again and its pods deleted"
                else:
                    effect = "Argo CD and Kueue keep rewriting it"
                # Without a declaration, whether Kueue's integration for the kind is on is not in the input.
                condition = "" if t.kueue_frameworks is not None else \
                    f" (where the cluster's Kueue has the {gk} integration on: no kueueFrameworks is declared)"
                yield Problem(ID, f"{field} is {shown} on a workload in Kueue queue {kueue_queue(m.metadata)}, which "
                              f"suspends it until admission and resumes it then; {app.label()} {missing}: "
                              f"{effect}{condition}", rel(t.folder),
                              obj=m.ref, field=field,
                              hint=f"remove {field} from the manifest (Kueue suspends a queued workload itself), "
                                   f"or {fix}", severity=WARNING if condition else ERROR)
