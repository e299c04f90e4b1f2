"""KubeRay's RayCluster, RayJob, RayService and RayCronJob (ray.io/v1, ray-project/kuberay tag v1.7.0): what the
controller refuses, and the pod templates the security and image rules read (kuberay_pods.py). Modelled as admission
only: the pods KubeRay creates (a head, worker groups that the autoscaler may resize, a submitter Job), the RayJobs a
RayCronJob creates on its schedule, a RayService's Serve applications and upgrades, and the world Ray Train forms over
the pods are not. A Ray Train job sets up torch.distributed in Python from Ray's own actors (no torchrun, no
MASTER_ADDR in the manifest; KubeRay generates each container's `ray start` command), so no torchrun topology rule
reads these objects: TOPO012 says so in one info line per object.

Where upstream validates, at v1.7.0:
- raycluster_controller.go:158-161 skips a RayCluster whose spec.managedBy names another controller; 165-177 runs
  ValidateRayClusterMetadata and ValidateRayClusterSpec after setDefaults (2422-2432: empty rayStartParams maps) and
  on an error records a Warning event (InvalidRayClusterMetadata / InvalidRayClusterSpec) and returns: no pods; so
  does ValidateRayClusterUpgradeOptions at 203-208.
- rayjob_controller.go:107-110 skips a RayJob managed elsewhere; 143-160 and 466-483 run ValidateRayJobMetadata and
  ValidateRayJobSpec at every reconcile and, on an error, set JobDeploymentStatus ValidationFailed and return before
  any RayCluster is made. ValidateRayJobSpec validates rayClusterSpec with ValidateRayClusterSpec (validation.go:605-
  612). A failure is an error here: the job cannot run as written.
- rayservice_controller.go:121-124 skips a RayService managed elsewhere; 156-171 run its checks (kuberay_service.py)
  at every reconcile and, on an error, record a Warning event and set Ready False (ValidationFailed): no RayCluster.
- A RayCronJob has a controller only with the RayCronJob gate on (main.go:353-359); raycronjob_controller.go:77-82
  then run ValidateRayCronJobSpec, which validates the jobTemplate as a RayJob (kuberay_cron.py), and on an error
  record a Warning event and create no RayJob. It has no managedBy.
- The webhooks (pkg/webhooks/v1/raycluster_webhook.go:49-81, rayjob_webhook.go:49-63) are optional in a deployment:
  they check the same metadata and, for a RayCluster, unique worker group names; a duplicate name is a warning.
- The checks themselves are kuberay_validation.py's, kuberay_service.py's and kuberay_cron.py's (validation.go line
  by line); feature gates at their v1.7.0
  defaults (pkg/features/features.go:106-116), a gate off by default a warning that carries it (TOPO011 decides)."""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.objects import Manifest, WARNING
from ..kube.values import as_int, dig, listing, mapping
from .base import Bundle, Check, Launcher, Workload
from .kuberay_cron import cron_checks
from .kuberay_pods import ray_templates
from .kuberay_service import service_checks
from .kuberay_validation import (CONTROLLER, FEATURE_GATES, HINT, LAUNCHER_ID, cluster_spec, job_spec, name_checks,
                                 upgrade_checks)

GROUP = "ray.io"
# Where each kind holds its RayClusterSpec, and its submitter pod template.
CLUSTER_SPEC: dict[str, tuple[str, ...]] = {"RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"),
                                            "RayService": ("spec", "rayClusterConfig"),
                                            "RayCronJob": ("spec", "jobTemplate", "rayClusterSpec")}
# What deletes a finished RayJob itself (ARGO002: Launcher.finished_ttl).
SELF_RULE = "the DeleteSelf policy (DeleteCluster frees the cluster and keeps the RayJob)"
SUBMITTER: dict[str, tuple[str, ...]] = {"RayJob": ("spec", "submitterPodTemplate"),
                                         "RayCronJob": ("spec", "jobTemplate", "submitterPodTemplate")}


class KubeRayLauncher(Launcher[Workload]):
    id = LAUNCHER_ID
    order = 95
    upstream = "ray-project/kuberay v1.7.0"
    title = ("KubeRay RayCluster, RayJob, RayService and RayCronJob (the controller's admission; its pods and the Ray "
             "world are not modelled)")
    kinds = ((GROUP, "RayCluster"), (GROUP, "RayJob"), (GROUP, "RayService"), (GROUP, "RayCronJob"))
    starts_pods = False  # KubeRay creates them, but the model holds none of them: admission only
    feature_gates = FEATURE_GATES
    managed_by_field = ("spec", "managedBy")
    controller_name = CONTROLLER
    managed_by_source = ("ray-project/kuberay v1.7.0 raycluster_controller.go:158-161, rayjob_controller.go:107-110, "
                         "rayservice_controller.go:121-124")

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, Any]]:
        """The head and worker group templates of the RayClusterSpec, and a RayJob's (or a RayCronJob's jobTemplate's)
        submitter pod template."""
        base = CLUSTER_SPEC.get(m.kind)
        return ray_templates(m, base, SUBMITTER.get(m.kind), m.kind != "RayCronJob") if base else iter(())

    def manager(self, m: Manifest) -> str | None:
        return None if m.kind == "RayCronJob" else super().manager(m)  # (a RayCronJob has no managedBy)

    def finished_ttl(self, m: Manifest) -> tuple[str, Any, str] | None:
        """Where a finished RayJob deletes itself (rayjob_controller.go:420-444 at v1.7.0): not with a clusterSelector
        (nothing is deleted); a deletionRules rule with policy DeleteSelf, at its ttlSeconds (handleDeletionRules,
        1413-1468; executeDeletionPolicy, 1571-1573); a legacy onSuccess/onFailure DeleteSelf, at
        ttlSecondsAfterFinished (1471-1512). shutdownAfterJobFinishes and its TTL delete the RayCluster, not the RayJob
        (1515-1549), unless the operator runs with DELETE_RAYJOB_CR_AFTER_JOB_FINISHES=true (its env, default false:
        not in the manifests, not modelled). Other kinds: nothing deletes them."""
        spec = mapping(m.obj.get("spec")) if m.kind == "RayJob" and isinstance(m.obj, dict) else {}
        if not spec or mapping(spec.get("clusterSelector")) or not isinstance(spec.get("deletionStrategy"), dict):
            return None
        strategy = spec["deletionStrategy"]
        if strategy.get("deletionRules") is not None:
            for i, rule in enumerate(listing(strategy.get("deletionRules"))):
                if mapping(rule).get("policy") == "DeleteSelf":
                    ttl = as_int(dig(rule, "condition", "ttlSeconds"), 0)
                    return f"spec.deletionStrategy.deletionRules[{i}].condition.ttlSeconds", ttl, SELF_RULE
            return None
        if "DeleteSelf" in (dig(strategy, "onSuccess", "policy"), dig(strategy, "onFailure", "policy")):
            return "spec.ttlSecondsAfterFinished", as_int(spec.get("ttlSecondsAfterFinished"), 0), SELF_RULE
        return None

    def refused(self, m: Manifest, bundle: Bundle) -> list[Check]:
        """What the KubeRay controller refuses (see the module's docstring), each Check's obj set to `m`; nothing for
        an object another controller manages (KubeRay skips it) or one whose spec is not a mapping (the schema stage
        reports it)."""
        spec = m.obj.get("spec") if isinstance(m.obj, dict) else None
        if not isinstance(spec, dict) or self.manager(m) is not None:
            return []
        if m.kind == "RayCluster":
            found = name_checks(m.metadata, m.kind) + cluster_spec(spec, m.metadata.get("annotations"), "spec", m.kind)
            found += upgrade_checks(m.obj)
        elif m.kind == "RayJob":
            found = name_checks(m.metadata, m.kind) + job_spec(m.obj)
        elif m.kind == "RayService":
            found = service_checks(m.obj)
        else:
            found = cron_checks(m.obj)
        cluster = dig(m.obj, *CLUSTER_SPEC[m.kind])
        seen: set[str] = set()
        for i, group in enumerate(listing(mapping(cluster).get("workerGroupSpecs"))):
            name = str(mapping(group).get("groupName", ""))
            if name in seen:
                found.append(Check(f"{'.'.join(CLUSTER_SPEC[m.kind])}.workerGroupSpecs[{i}].groupName",
                                   f"worker group name '{name}' is used twice: KubeRay's webhook, where it is "
                                   "deployed, refuses the RayCluster (worker group names must be unique)",
                                   "give each worker group its own groupName", severity=WARNING))
            seen.add(name)
        for c in found:
            c.obj = m
        return found

    def unchecked(self, m: Manifest) -> str | None:
        what = {"RayCluster": "it starts", "RayCronJob": "the RayJobs it creates start"}.get(m.kind, "its cluster starts")
        other = self.manager(m)
        if other is not None:
            return (f"managedBy '{other}' names another controller: KubeRay skips the {m.kind} here "
                    f"({self.managed_by_source}); its pod templates got the schema, security and image checks, "
                    "nothing else was checked")
        return ("KubeRay's admission was checked (TOPO011) and its pod templates got the schema, security "
                f"and image checks; the pods {what} (head, worker groups the autoscaler may resize) and "
                "any Ray Train world over them (set up by Ray in Python, not by torchrun) were not checked")


KUBERAY = KubeRayLauncher()
__all__ = ["KUBERAY", "KubeRayLauncher", "HINT"]
