"""What KubeRay's controller refuses in a RayService (ray-project/kuberay v1.7.0,
ray-operator/controllers/ray/utils/validation.go), ported check by check; kuberay.py says where they run.

rayservice_controller.go:121-124 skips a RayService whose spec.managedBy names another controller; 156-171 runs
validateRayService (333-350: ValidateRayServiceMetadata, then ValidateRayServiceSpec) at every reconcile and, on an
error, records a Warning event (InvalidRayServiceMetadata / InvalidRayServiceSpec), sets the condition Ready False
with reason ValidationFailed and returns before any RayCluster or Service is created. ValidateRayServiceSpec validates
the rayClusterConfig, a RayClusterSpec, with ValidateRayClusterSpec and the RayService's annotations (685-687); the
optional webhook (pkg/webhooks/v1/rayservice_webhook.go:49-63) checks the same metadata. Upstream returns the first
error; each check here is one upstream would refuse alone, so all are reported."""
from __future__ import annotations

from typing import Any

from ..kube.durations import go_duration
from ..kube.values import as_int, dig, go_atoi, mapping
from .base import Check
from .kuberay_validation import FEATURE_GATES, REFUSED, autoscaling, cluster_spec, name_checks

KIND = "RayService"
# utils/constant.go:82: the annotation that bounds how long a RayService may stay initializing.
INITIALIZING_TIMEOUT = "ray.io/initializing-timeout"
# apis/ray/v1/rayservice_types.go: the upgradeStrategy types validation.go:693-700 admits.
UPGRADE_TYPES = ("NewClusterWithIncrementalUpgrade", "NewCluster", "None")
INCREMENTAL = "NewClusterWithIncrementalUpgrade"


def timeout_problem(annotations: Any) -> str | None:
    """validateInitializingTimeout (validation.go:651-678): the annotation, where set and not empty, is a positive
    Go duration or a positive number of seconds; why not, None where it is."""
    text = mapping(annotations).get(INITIALIZING_TIMEOUT)
    if not isinstance(text, str) or not text:
        return None
    duration = go_duration(text)
    if duration is not None:
        return None if duration > 0 else f"annotation {INITIALIZING_TIMEOUT} must be a positive duration, got: {text}"
    seconds = go_atoi(text)
    if seconds is not None:
        return None if seconds > 0 else (f"annotation {INITIALIZING_TIMEOUT} must be a positive integer (seconds), "
                                         f"got: {text}")
    return (f"annotation {INITIALIZING_TIMEOUT} has invalid format: {text}. Expected Go duration format (e.g., '5m', "
            "'1h') or positive integer seconds")


def service_checks(obj: dict[str, Any], gates: dict[str, bool] | None = None) -> list[Check]:
    """ValidateRayServiceMetadata (validation.go:632-646) and ValidateRayServiceSpec (680-715) with
    ValidateClusterUpgradeOptions (717-749) on a RayService as the API server stores it; `gates`: KubeRay's feature
    gates (their defaults where None)."""
    on = {**FEATURE_GATES, **(gates or {})}
    meta, spec = mapping(obj.get("metadata")), mapping(obj.get("spec"))
    out = name_checks(meta, KIND)

    def refuse(field: str, message: str, hint: str) -> None:
        out.append(Check(field, f"{message}: {REFUSED[KIND]}", hint))

    why = timeout_problem(meta.get("annotations"))
    if why:
        refuse(f"metadata.annotations.{INITIALIZING_TIMEOUT}", why, "write a positive duration such as 10m, or a "
               "number of seconds")
    cluster = mapping(spec.get("rayClusterConfig"))
    prefix = "spec.rayClusterConfig"
    if dig(cluster, "authOptions", "enableK8sTokenAuth") is True:
        refuse(f"{prefix}.authOptions.enableK8sTokenAuth", "K8s token auth mode is currently not supported for "
               "RayService", "leave enableK8sTokenAuth out")
    out += cluster_spec(cluster, meta.get("annotations"), prefix, KIND, on)
    if dig(cluster, "headGroupSpec", "headService", "metadata", "name"):
        refuse(f"{prefix}.headGroupSpec.headService.metadata.name", "spec.rayClusterConfig.headGroupSpec.headService."
               "metadata.name should not be set", "leave the head Service's name out: KubeRay names it")
    strategy = mapping(spec.get("upgradeStrategy"))
    kind = strategy.get("type")
    if kind is not None and kind not in UPGRADE_TYPES:
        refuse("spec.upgradeStrategy.type", f"Spec.UpgradeStrategy.Type value {kind} is invalid, valid options are "
               f"{', '.join(UPGRADE_TYPES[:2])}, or {UPGRADE_TYPES[2]}", f"set it to one of {', '.join(UPGRADE_TYPES)}")
    delay = as_int(spec.get("rayClusterDeletionDelaySeconds"))
    if spec.get("rayClusterDeletionDelaySeconds") is not None and isinstance(delay, int) and delay < 0:
        refuse("spec.rayClusterDeletionDelaySeconds", "Spec.RayClusterDeletionDelaySeconds should be a non-negative "
               f"integer, got {delay}", "set it to 0 or more")
    if kind == INCREMENTAL and on["RayServiceIncrementalUpgrade"]:  # utils.IsIncrementalUpgradeEnabled (util.go:917)
        out += upgrade_option_checks(spec)
    return out


def upgrade_option_checks(spec: dict[str, Any]) -> list[Check]:
    """ValidateClusterUpgradeOptions (validation.go:717-749): NewClusterWithIncrementalUpgrade needs the autoscaler
    and clusterUpgradeOptions with percentages within 0-100 (the step within maxSurgePercent, which the CRD defaults
    to 100), a positive interval and a gatewayClassName. Upstream stops at the first; so does this."""
    field = "spec.upgradeStrategy.clusterUpgradeOptions"

    def refuse(where: str, message: str, hint: str) -> list[Check]:
        return [Check(where, f"{message}: {REFUSED[KIND]}", hint)]

    if not autoscaling(mapping(spec.get("rayClusterConfig"))):
        return refuse("spec.rayClusterConfig.enableInTreeAutoscaling", "Ray Autoscaler is required for "
                      f"{INCREMENTAL}", "set enableInTreeAutoscaling: true, or use another upgrade type")
    options = dig(spec, "upgradeStrategy", "clusterUpgradeOptions")
    if not isinstance(options, dict):
        return refuse(field, f"ClusterUpgradeOptions are required for {INCREMENTAL}", "set clusterUpgradeOptions")
    surge, step = as_int(options.get("maxSurgePercent"), 100), as_int(options.get("stepSizePercent"))
    interval = as_int(options.get("intervalSeconds"))
    if isinstance(surge, int) and not 0 <= surge <= 100:
        return refuse(f"{field}.maxSurgePercent", "maxSurgePercent must be between 0 and 100", "set it within 0-100")
    if options.get("stepSizePercent") is None or (isinstance(step, int) and not 0 <= step <= 100):
        return refuse(f"{field}.stepSizePercent", "stepSizePercent must be between 0 and 100", "set it within 0-100")
    if isinstance(step, int) and isinstance(surge, int) and step > surge:
        return refuse(f"{field}.stepSizePercent", "stepSizePercent must be less than or equal to maxSurgePercent",
                      "make stepSizePercent at most maxSurgePercent")
    if options.get("intervalSeconds") is None or (isinstance(interval, int) and interval <= 0):
        return refuse(f"{field}.intervalSeconds", "intervalSeconds must be greater than 0", "set it to 1 or more")
    if not options.get("gatewayClassName"):
        return refuse(f"{field}.gatewayClassName", f"gatewayClassName is required for {INCREMENTAL}",
                      "name the Gateway API GatewayClass to route traffic with")
    return []
