"""KubeRay's RayCluster and RayJob (ray.io/v1, ray-project/kuberay tag v1.7.0): what the controller refuses, and
the pod templates the security and image rules read. Modelled as admission only: the pods KubeRay creates (a head,
worker groups that the autoscaler may resize, a submitter Job) and the world Ray Train forms over them are not. A Ray
Train job sets up torch.distributed in Python from Ray's own actors (no torchrun, no MASTER_ADDR in the manifest;
KubeRay generates each container's `ray start` command), so no torchrun topology rule reads these objects: TOPO012
says so in one info line per object. RayService and RayCronJob stay unmodelled (unmodelled.py).

Where upstream validates, at v1.7.0:
- raycluster_controller.go:158-161 skips a RayCluster whose spec.managedBy names another controller; 165-177 runs
  ValidateRayClusterMetadata and ValidateRayClusterSpec after setDefaults (2422-2432: empty rayStartParams maps) and
  on an error records a Warning event (InvalidRayClusterMetadata / InvalidRayClusterSpec) and returns: no pods; so
  does ValidateRayClusterUpgradeOptions at 203-208.
- rayjob_controller.go:107-110 skips a RayJob managed elsewhere; 143-160 and 466-483 run ValidateRayJobMetadata and
  ValidateRayJobSpec at every reconcile and, on an error, set JobDeploymentStatus ValidationFailed and return before
  any RayCluster is made. ValidateRayJobSpec validates rayClusterSpec with ValidateRayClusterSpec (validation.go:605-
  612). A failure is an error here: the job cannot run as written.
- The webhooks (pkg/webhooks/v1/raycluster_webhook.go:49-81, rayjob_webhook.go:49-63) are optional in a deployment:
  they check the same metadata and, for a RayCluster, unique worker group names; a duplicate name is a warning.
- The checks themselves are kuberay_validation.py's (validation.go line by line); feature gates at their v1.7.0
  defaults (pkg/features/features.go:106-116), a gate off by default a warning that carries it (TOPO011 decides)."""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.objects import Manifest, WARNING
from ..kube.values import dig, listing, mapping
from .base import Check, Launcher, Workload
from .kuberay_validation import (CONTROLLER, FEATURE_GATES, HINT, LAUNCHER_ID, cluster_spec, job_spec, name_checks,
                                 upgrade_checks)
from .unmodelled import ray_templates

GROUP = "ray.io"
# Where each kind holds its RayClusterSpec.
CLUSTER_SPEC: dict[str, tuple[str, ...]] = {"RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec")}


class KubeRayLauncher(Launcher[Workload]):
    id = LAUNCHER_ID
    order = 95
    upstream = "ray-project/kuberay v1.7.0"
    title = "KubeRay RayCluster and RayJob (the controller's admission; its pods and the Ray world are not modelled)"
    kinds = ((GROUP, "RayCluster"), (GROUP, "RayJob"))
    starts_pods = False  # KubeRay creates them, but the model holds none of them: admission only
    feature_gates = FEATURE_GATES
    managed_by_field = ("spec", "managedBy")
    controller_name = CONTROLLER
    managed_by_source = "ray-project/kuberay v1.7.0 raycluster_controller.go:158-161, rayjob_controller.go:107-110"

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, Any]]:
        """The head and worker group templates of the RayClusterSpec, and a RayJob's submitter pod template."""
        base = CLUSTER_SPEC.get(m.kind)
        return ray_templates(m, base, submitter=m.kind == "RayJob") if base else iter(())

    def refused(self, m: Manifest) -> list[Check]:
        """What the KubeRay controller refuses (see the module's docstring), each Check's obj set to `m`; nothing for
        an object another controller manages (KubeRay skips it) or one whose spec is not a mapping (the schema stage
        reports it)."""
        spec = m.obj.get("spec") if isinstance(m.obj, dict) else None
        if not isinstance(spec, dict) or self.manager(m) is not None:
            return []
        found = name_checks(m.metadata, m.kind)
        if m.kind == "RayCluster":
            found += cluster_spec(spec, m.metadata.get("annotations"), "spec", m.kind) + upgrade_checks(m.obj)
        else:
            found += job_spec(m.obj)
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
        what = "its cluster" if m.kind == "RayJob" else "it"
        other = self.manager(m)
        if other is not None:
            return (f"managedBy '{other}' names another controller: KubeRay skips the {m.kind} here "
                    f"({self.managed_by_source}); its pod templates got the schema, security and image checks, "
                    "nothing else was checked")
        return ("KubeRay's admission was checked (TOPO011) and its pod templates got the schema, security "
                f"and image checks; the pods {what} starts (head, worker groups the autoscaler may resize) and the "
                "Ray Train world over them (set up by Ray in Python, not by torchrun) were not checked")


KUBERAY = KubeRayLauncher()
__all__ = ["KUBERAY", "KubeRayLauncher", "HINT"]
