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

Kueue's own Configuration, where the manifests hold its ConfigMap `kueue-manager-config` (`launchers/kueue_config.py`):
Kueue decodes its `controller_manager_config.yaml` strictly and validates it (pkg/config/config.go 55-66,
validation.go 91-108), and its manager exits on what it refuses: an unknown or mistyped field of those read here, a
managedJobsNamespaceSelector that is not a valid selector or selects kube-system or Kueue's own namespace, an
integration Kueue does not know or named twice, a quotaCheckStrategy other than BlockUndeclared or IgnoreUndeclared,
or IgnoreUndeclared beside excludeResourcePrefixes. An error, the ConfigMap's file named, all in one line.

Fails: a ClusterQueue with a lendingLimit over its nominalQuota, a flavor in two resource groups, a namespaceSelector
with an `In` and no values, `onFlavors` naming a flavor it lacks; a Cohort with a borrowingLimit and no parent; a
ResourceFlavor with a taint repeated; Kueue's released Configuration with IgnoreUndeclared beside
excludeResourcePrefixes.
Passes: Kueue's admin samples (site/static/examples at v0.19.2: admin/single-clusterqueue-setup.yaml, the shared
quota setup, ResourceFlavors with taints and tolerations) and its released Configuration
(config/components/manager/controller_manager_config.yaml). Its doc snippet admin/minimal-cq.yaml is refused: its
`onFlavors` names `default-flavor`, and the queue has no resource groups.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, Problem
from ..launchers.kueue_config import CONFIG_KEY, config_maps, configuration_of
from ..launchers.kueue_webhooks import refusals
from .kit import Context, obj_problem

ID = "ADM003"
NAME = "kueue-objects-admitted"
SEVERITY = ERROR
OBJECTS = ("ClusterQueue", "Cohort", "ResourceFlavor")
KINDS = OBJECTS + ("ConfigMap",)  # Kueue's Configuration: launchers/kueue_config.py
HINT = "change the object as Kueue's webhook says (kueue v0.19.2 pkg/webhooks)"
HINT_CONFIG = ("write the Configuration Kueue loads (kueue v0.19.2 apis/config/v1beta2/configuration_types.go, "
               "pkg/config/validation.go)")


def check(ctx: Context) -> Iterator[Problem]:
    wrong: dict[str, list[str]] = {}
    for m, why in configuration_of(ctx.bundle)[1]:
        wrong.setdefault(str(m.ref), []).append(why)
    for m in config_maps(ctx.of_kind("ConfigMap")):
        if str(m.ref) in wrong and m.ref not in ctx.schema_refused:
            yield obj_problem(ID, m, f"data.{CONFIG_KEY}", f"Kueue cannot start with this Configuration: "
                              f"{'; '.join(wrong[str(m.ref)])}: its manager exits, so nothing queued is admitted "
                              "and its webhooks (failurePolicy Fail) refuse every object of their kinds outside "
                              "kube-system and kueue-system (kueue v0.19.2 pkg/config/config.go:55-66, "
                              "pkg/config/validation.go:91-108, config/components/webhook/manifests.yaml)", HINT_CONFIG)
    for kind in OBJECTS:
        for m in ctx.of_kind(kind):
            if m.ref in ctx.schema_refused:
                continue  # the schema stage says why it is refused
            said = refusals(m.api_version, m.kind, m.obj)
            if said:
                field = said[0].split(":", 1)[0]
                yield obj_problem(ID, m, field, f"Kueue's webhook refuses the {kind}: {'; '.join(said)}", HINT)
