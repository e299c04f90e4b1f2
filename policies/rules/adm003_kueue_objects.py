"""Kueue's own objects are ones its webhooks admit.

Kueue runs validating webhooks on its admin objects, and they refuse more than the CRD's schema and CEL rules do
(`launchers/kueue_webhooks.py`, ported from kueue v0.19.2 pkg/webhooks: clusterqueue_webhook.go, cohort_webhook.go,
resourceflavor_webhook.go, common.go). The object is never created, so a ClusterQueue refused admits nothing queued
to it and a ResourceFlavor refused is one no ClusterQueue can use: an error, the refusal in the webhook's own words
(`spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "20": must be less than or equal to the
nominalQuota`), all of one object's refusals in one line.

- ClusterQueue: a resource covered by two resource groups or a flavor in two (`Duplicate value`), a resource name not
  a qualified name, a flavor's resource not named as coveredResources in order, a negative nominalQuota or limit, a
  lendingLimit without a cohort or over its nominalQuota, a namespaceSelector the label-selector validation refuses,
  a fairSharing weight negative or in (0, 1n], more than 256 flavors or covered resources in all or 512
  flavor-resource pairs in one group, an admissionChecksStrategy `onFlavors` naming a flavor the queue does not have.
- Cohort: the same resource groups with limits needing a `parentName` (no bound on lendingLimit), and fairSharing.
- ResourceFlavor: nodeLabels, taint keys and values, toleration keys that are not valid labels; two taints with one
  key and effect.

What the CRD's CEL rules already refuse is the SCHEMA stage's and is not said again (a ClusterQueue's borrowingLimit
without a cohort, preemption's reclaimWithinCohort Never with borrowWithinCohort, a flavorFungibility preference
without TryNextFlavor, a ResourceFlavor's taint effects and toleration operators); an object the schema refuses is
not checked here. concurrentAdmissionPolicy is behind an alpha feature gate off by default and is not checked.
LocalQueue's webhook validates nothing, and AdmissionCheck, WorkloadPriorityClass and Topology have none. RES010
treats a refused ClusterQueue as absent, so the workloads queued to it are not told twice.

Fails: a ClusterQueue with a lendingLimit over its nominalQuota, a flavor in two resource groups, a namespaceSelector
with an `In` and no values, `onFlavors` naming a flavor it lacks; a Cohort with a borrowingLimit and no parent; a
ResourceFlavor with a taint repeated.
Passes: Kueue's admin samples (site/static/examples at v0.19.2: admin/single-clusterqueue-setup.yaml, the shared
quota setup, ResourceFlavors with taints and tolerations). Its doc snippet admin/minimal-cq.yaml is refused: its
`onFlavors` names `default-flavor`, and the queue has no resource groups.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, Problem
from ..launchers.kueue_webhooks import refusals
from .kit import Context, obj_problem

ID = "ADM003"
NAME = "kueue-objects-admitted"
SEVERITY = ERROR
KINDS = ("ClusterQueue", "Cohort", "ResourceFlavor")
HINT = "change the object as Kueue's webhook says (kueue v0.19.2 pkg/webhooks)"


def check(ctx: Context) -> Iterator[Problem]:
    for kind in KINDS:
        for m in ctx.of_kind(kind):
            if m.ref in ctx.schema_refused:
                continue  # the schema stage says why it is refused
            said = refusals(m.api_version, m.kind, m.obj)
            if said:
                field = said[0].split(":", 1)[0]
                yield obj_problem(ID, m, field, f"Kueue's webhook refuses the {kind}: {'; '.join(said)}", HINT)
