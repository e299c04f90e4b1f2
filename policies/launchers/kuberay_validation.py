"""What KubeRay's controller refuses in a RayCluster and a RayJob (ray-project/kuberay v1.7.0,
ray-operator/controllers/ray/utils/validation.go), ported check by check; kuberay.py says where they run.

Upstream returns the first error; each check here is one upstream would refuse alone, so all are reported. Checks
behind a feature gate follow the gate's default at v1.7.0 (pkg/features/features.go:106-116): a gate on by default
(RayJobDeletionPolicy) lets through what it guards; a field that needs a gate off by default is a warning carrying
the gate (an error where the environment declares KubeRay's gates without it, nothing where it turns it on), and
what upstream checks only once that gate is on (the rocksdb backend's fields, the network policy's rules, the TLS
env, the history server's collector) is not checked here."""
from __future__ import annotations

import re
from typing import Any

import yaml

from ..kube.objects import WARNING, created_name
from ..kube.values import DNS1035, as_int, dig, env_entry, listing, mapping
from .base import Check
from .core_validation import label_key_problem, label_value_problem

LAUNCHER_ID = "kuberay"
# pkg/features/features.go:106-116: KubeRay's feature gates and their defaults at v1.7.0.
FEATURE_GATES: dict[str, bool] = {
    "RayClusterStatusConditions": True, "RayJobDeletionPolicy": True, "RayMultiHostIndexing": True,
    "RayServiceIncrementalUpgrade": True, "RayCronJob": False, "SidecarSubmitterRestart": False,
    "RayClusterNetworkPolicy": False, "GCSFaultToleranceEmbeddedStorage": False, "RayClusterMTLS": False,
    "RayClusterHistoryServer": False, "KubernetesWAS": False}
# utils/constant.go:368, 372-381: the controller's own managedBy value; the longest names it accepts.
CONTROLLER = "ray.io/kuberay-operator"
MAX_CLUSTER_NAME = 53
MAX_JOB_NAME = MAX_CLUSTER_NAME - 6
# constant.go:59-60, 142-144, 158, 191; the key of a RayJob's clusterSelector (85).
FT_ANNOTATION = "ray.io/ft-enabled"
EXTERNAL_STORAGE_ANNOTATION = "ray.io/external-storage-namespace"
CLUSTER_SELECTOR_KEY = "ray.io/cluster"
AUTOSCALER_V2_ENV = "RAY_enable_autoscaler_v2"
GEN_START_CMD = "KUBERAY_GEN_AUTOSCALER_START_CMD"
# The suffix each refusal ends with: raycluster_controller.go:165-177 (a Warning event InvalidRayClusterMetadata or
# InvalidRayClusterSpec, then return: nothing is created); rayjob_controller.go:143-160, 466-483 (status
# ValidationFailed at every reconcile, before any RayCluster is created); rayservice_controller.go:156-171 (a Warning
# event, condition Ready False with reason ValidationFailed, nothing created); raycronjob_controller.go:77-82.
REFUSED = {"RayCluster": "the KubeRay controller refuses the RayCluster (a Warning event; no pods are created)",
           "RayJob": "the KubeRay controller fails the RayJob (ValidationFailed; no RayCluster is created)",
           "RayService": "the KubeRay controller fails the RayService (ValidationFailed; no RayCluster is created)",
           "RayCronJob": "the KubeRay controller refuses the RayCronJob (a Warning event; no RayJob is created)"}
HINT = "see KubeRay's RayCluster and RayJob reference (ray-project/kuberay v1.7.0 utils/validation.go)"
# k8s.io/apimachinery v0.36.0 pkg/util/version/version.go parse: version.ParseGeneric's pattern.
VERSION = re.compile(r"^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)$", re.S)


def parse_generic(text: str) -> tuple[int, ...] | None:
    """version.ParseGeneric: at least two dot-separated numbers (an optional leading v, anything after), the first
    without a leading zero; None where it refuses the string."""
    m = VERSION.match(text)
    if not m:
        return None
    parts = m.group(1).split(".")
    if len(parts) < 2 or (parts[0].startswith("0") and parts[0] != "0"):
        return None
    return tuple(int(p) for p in parts)


def less_than(version: tuple[int, ...], minimum: tuple[int, ...]) -> bool:
    """Version.LessThan: component by component, a missing component counting as 0."""
    n = max(len(version), len(minimum))
    return (version + (0,) * (n - len(version))) < (minimum + (0,) * (n - len(minimum)))


def env_named(container: Any, name: str) -> dict[str, Any] | None:
    """utils.EnvVarByName: the container's first env entry of that name."""
    return env_entry(container, name, first=True)


def autoscaling(spec: dict[str, Any]) -> bool:
    """utils.IsAutoscalingEnabled (util.go:751-754)."""
    return spec.get("enableInTreeAutoscaling") is True


def autoscaler_v2(spec: dict[str, Any]) -> bool:
    """utils.IsAutoscalingV2Enabled (util.go:756-758)."""
    return bool(dig(spec, "autoscalerOptions", "version") == "v2")


def v2_by_env(head: Any) -> bool:
    """The head container's RAY_enable_autoscaler_v2 set to 1 or true (validation.go:1021-1024, 1136-1139)."""
    e = env_named(head, AUTOSCALER_V2_ENV)
    return e is not None and e.get("value") in ("1", "true")


def name_checks(metadata: Any, kind: str) -> list[Check]:
    """ValidateRayClusterMetadata / ValidateRayJobMetadata (validation.go:32-40, 533-541): at most 53 (RayCluster) or
    47 (RayJob) characters, a DNS-1035 label. A generateName is read as the name the API server makes from it (five
    more characters)."""
    name, where = created_name(metadata)
    if not name:
        return []
    most = MAX_CLUSTER_NAME if kind == "RayCluster" else MAX_JOB_NAME
    if len(name) > most:
        return [Check(where, f"{kind} name should be no more than {most} characters (it is {len(name)}): "
                      f"{REFUSED[kind]}", f"shorten the name to at most {most} characters")]
    if not DNS1035.match(name):
        return [Check(where, f"{kind} name '{name}' should be a valid DNS-1035 label (lower case letters, digits and "
                      f"'-', starting with a letter): {REFUSED[kind]}", "rename it, e.g. in lower case")]
    return []


# constant.go:18: the label a RayCluster made by a RayJob or RayService carries (util.go:56-67 GetCRDType reads it).
ORIGINATED_FROM = "ray.io/originated-from-crd"


def upgrade_checks(obj: dict[str, Any]) -> list[Check]:
    """ValidateRayClusterUpgradeOptions (validation.go:42-57, called at raycluster_controller.go:203-208): an
    upgradeStrategy type of Recreate or None, and none on a RayCluster labelled as made by a RayJob or RayService."""
    kind = "RayCluster"
    strategy = dig(obj, "spec", "upgradeStrategy", "type")
    if strategy is None:
        return []
    if strategy not in ("Recreate", "None"):
        return [Check("spec.upgradeStrategy.type", f"upgradeStrategy.type {strategy} is invalid, valid options are "
                      f"Recreate or None: {REFUSED[kind]}", "set it to Recreate or None")]
    maker = mapping(dig(obj, "metadata", "labels")).get(ORIGINATED_FROM)
    if maker in ("RayJob", "RayService"):
        return [Check("spec.upgradeStrategy", f"upgradeStrategy cannot be set when the RayCluster is created by "
                      f"{maker} (label {ORIGINATED_FROM}): {REFUSED[kind]}", "leave upgradeStrategy out")]
    return []


def cluster_spec(spec: dict[str, Any], annotations: Any, prefix: str, kind: str,
                 gates: dict[str, bool] | None = None) -> list[Check]:
    """ValidateRayClusterSpec (validation.go:103-327) on the RayClusterSpec at `prefix`; `gates`: KubeRay's feature
    gates (their defaults where None)."""
    on = {**FEATURE_GATES, **(gates or {})}
    notes = {str(k): str(v) for k, v in mapping(annotations).items()}
    out: list[Check] = []

    def refuse(field: str, message: str, hint: str = HINT) -> None:
        out.append(Check(f"{prefix}.{field}", f"{message}: {REFUSED[kind]}", hint))

    def gated(field: str, what: str, gate: str) -> None:
        if not on[gate]:
            out.append(Check(f"{prefix}.{field}", f"{what} needs KubeRay's feature gate {gate} (alpha, off by default "
                             f"at v1.7.0): without it {REFUSED[kind]}", f"run the KubeRay operator with "
                             f"--feature-gates={gate}=true, or leave {field} out", severity=WARNING,
                             gate=(LAUNCHER_ID, gate)))

    head_group = mapping(spec.get("headGroupSpec"))
    head_containers = listing(dig(head_group, "template", "spec", "containers"))
    if not head_containers:
        refuse("headGroupSpec.template.spec.containers", "headGroupSpec should have at least one container",
               "give the head pod template its Ray container")
    head = mapping(head_containers[0]) if head_containers else {}
    head_params = {str(k): v for k, v in mapping(head_group.get("rayStartParams")).items()}
    out += group_checks("Head", head_group, "headGroupSpec", prefix, kind)
    scaling, v2 = autoscaling(spec), autoscaler_v2(spec)
    env_v2 = v2_by_env(head)
    for i, group in enumerate(listing(spec.get("workerGroupSpecs"))):
        group = mapping(group)
        where = f"workerGroupSpecs[{i}]"
        name = str(group.get("groupName", ""))
        if not listing(dig(group, "template", "spec", "containers")):
            refuse(f"{where}.template.spec.containers", "workerGroupSpec should have at least one container",
                   "give the worker pod template its Ray container")
        # minReplicas and maxReplicas unset are defaulted by the CRD (0 and 2147483647) before the controller reads
        # them, so validation.go:125-127 never refuses an applied object.
        low, high = as_int(group.get("minReplicas"), 0), as_int(group.get("maxReplicas"), 2**31 - 1)
        if isinstance(low, int) and low < 0:
            refuse(f"{where}.minReplicas", f"worker group {name} has negative minReplicas {low}", "set it to 0 or more")
        if isinstance(high, int) and high < 0:
            refuse(f"{where}.maxReplicas", f"worker group {name} has negative maxReplicas {high}", "set it to 0 or more")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            refuse(f"{where}.minReplicas", f"worker group {name} has minReplicas {low} greater than maxReplicas {high}",
                   "make minReplicas at most maxReplicas")
        out += group_checks(name, group, where, prefix, kind)
        idle = as_int(group.get("idleTimeoutSeconds"))
        if group.get("idleTimeoutSeconds") is not None and isinstance(idle, int):
            if idle < 0:
                refuse(f"{where}.idleTimeoutSeconds", f"worker group {name}: idleTimeoutSeconds must be "
                       f"non-negative, got {idle}", "set it to 0 or more")
            elif not v2 and not env_v2:
                refuse(f"{where}.idleTimeoutSeconds", f"worker group {name}: idleTimeoutSeconds is set, but "
                       "autoscaler v2 is not enabled", "set autoscalerOptions.version: v2, or leave "
                       "idleTimeoutSeconds out")
        out += priority_checks(group, name, f"{prefix}.{where}", spec, v2 or env_v2, kind)
        if group.get("suspend") is True and not on["RayJobDeletionPolicy"]:
            refuse(f"{where}.suspend", f"worker group {name} can be suspended only when the RayJobDeletionPolicy "
                   "feature gate is enabled", "leave suspend out")
        if group.get("suspend") is True and scaling:
            refuse(f"{where}.suspend", f"worker group {name} cannot be suspended with Autoscaler enabled",
                   "leave suspend out, or set enableInTreeAutoscaling: false")
        if scaling and v2:
            policy = dig(group, "template", "spec", "restartPolicy")
            if policy not in (None, "", "Never"):
                refuse(f"{where}.template.spec.restartPolicy", f"restartPolicy for worker group {name} should be "
                       f"Never or unset when using autoscaler V2 (it is {policy})", "set restartPolicy: Never")
    ft_options = spec.get("gcsFaultToleranceOptions")
    if notes.get(FT_ANNOTATION, "") != "" and ft_options is not None:
        refuse("gcsFaultToleranceOptions", f"the {FT_ANNOTATION} annotation and gcsFaultToleranceOptions are both "
               "set", f"use only gcsFaultToleranceOptions: remove the {FT_ANNOTATION} annotation")
    ft = notes.get(FT_ANNOTATION, "").lower() == "true" or ft_options is not None
    head_env = "headGroupSpec.template.spec.containers[0].env"
    if not ft and env_named(head, "RAY_REDIS_ADDRESS") is not None:
        refuse(head_env, "RAY_REDIS_ADDRESS is set in the head container, which implicitly enables GCS fault "
               "tolerance, but gcsFaultToleranceOptions is not set", "set gcsFaultToleranceOptions.redisAddress "
               "instead")
    if ft_options is not None:
        ft_options = mapping(ft_options)
        if str(head_params.get("redis-password") or ""):
            refuse("headGroupSpec.rayStartParams.redis-password", "cannot set `redis-password` in rayStartParams "
                   "when gcsFaultToleranceOptions is set", "use gcsFaultToleranceOptions.redisPassword instead")
        for env, instead in (("REDIS_PASSWORD", "redisPassword"), ("RAY_REDIS_ADDRESS", "redisAddress")):
            if env_named(head, env) is not None:
                refuse(head_env, f"cannot set `{env}` env var in head Pod when gcsFaultToleranceOptions is set",
                       f"use gcsFaultToleranceOptions.{instead} instead")
        if notes.get(EXTERNAL_STORAGE_ANNOTATION, ""):
            refuse("gcsFaultToleranceOptions", f"cannot set the `{EXTERNAL_STORAGE_ANNOTATION}` annotation when "
                   "gcsFaultToleranceOptions is set", "use gcsFaultToleranceOptions.externalStorageNamespace instead")
        if ft_options.get("backend") == "rocksdb":
            gated("gcsFaultToleranceOptions.backend", "the embedded RocksDB GCS fault tolerance backend",
                  "GCSFaultToleranceEmbeddedStorage")
        elif ft_options.get("storage") is not None:
            refuse("gcsFaultToleranceOptions.storage", "cannot set gcsFaultToleranceOptions.storage when backend is "
                   "'redis' (it only applies to the 'rocksdb' backend)", "leave storage out")
    if str(head_params.get("redis-username") or "") or env_named(head, "REDIS_USERNAME") is not None:
        refuse("headGroupSpec", "cannot set a redis username in rayStartParams (redis-username) or the head's env "
               "(REDIS_USERNAME)", "use gcsFaultToleranceOptions.redisUsername instead")
    v2_env = env_named(head, AUTOSCALER_V2_ENV)
    if not scaling and v2_env is not None and v2_env.get("value") in ("1", "true"):
        refuse(head_env, f"environment variable {AUTOSCALER_V2_ENV} cannot be set to '{v2_env.get('value')}' when "
               "enableInTreeAutoscaling is false", "set enableInTreeAutoscaling: true to use autoscaler v2")
    if scaling:
        if dig(spec, "autoscalerOptions", "version") is not None and v2_env is not None:
            refuse(head_env, f"both autoscalerOptions.version and head Pod env var {AUTOSCALER_V2_ENV} are set",
                   f"remove {AUTOSCALER_V2_ENV} from the head's env")
        if v2:
            policy = dig(head_group, "template", "spec", "restartPolicy")
            if policy not in (None, "", "Never"):
                refuse("headGroupSpec.template.spec.restartPolicy", "restartPolicy for head Pod should be Never or "
                       f"unset when using autoscaler V2 (it is {policy})", "set restartPolicy: Never")
    options = mapping(spec.get("autoscalerOptions"))
    idle = as_int(options.get("idleTimeoutSeconds"))
    if options.get("idleTimeoutSeconds") is not None and isinstance(idle, int) and idle < 0:
        refuse("autoscalerOptions.idleTimeoutSeconds", f"autoscalerOptions.idleTimeoutSeconds must be non-negative, "
               f"got {idle}", "set it to 0 or more")
    if env_named(options, GEN_START_CMD) is not None:
        refuse("autoscalerOptions.env", f"autoscalerOptions.env must not contain {GEN_START_CMD} (KubeRay injects it)",
               f"remove {GEN_START_CMD} from autoscalerOptions.env")
    if spec.get("historyServerOptions") is not None:
        gated("historyServerOptions", "historyServerOptions", "RayClusterHistoryServer")
    out += auth_checks(spec, prefix, kind)
    if spec.get("networkPolicy") is not None:
        gated("networkPolicy", "spec.networkPolicy", "RayClusterNetworkPolicy")
    if spec.get("tlsOptions") is not None:
        gated("tlsOptions", "spec.tlsOptions", "RayClusterMTLS")
    return out


def group_checks(group: str, spec: dict[str, Any], where: str, prefix: str, kind: str) -> list[Check]:
    """validateRayGroupResources and validateRayGroupLabels (validation.go:59-100) for one group."""
    params = {str(k): v for k, v in mapping(spec.get("rayStartParams")).items()}
    out: list[Check] = []
    if any(str(params.get(k) or "") for k in ("num-cpus", "num-gpus", "memory", "resources")) and \
            mapping(spec.get("resources")):
        out.append(Check(f"{prefix}.{where}.resources", f"resource fields should not be set in both rayStartParams "
                         f"and resources for {group} group: {REFUSED[kind]}", "use only one of them"))
    if "labels" in params:
        out.append(Check(f"{prefix}.{where}.rayStartParams.labels", f"rayStartParams['labels'] is not supported for "
                         f"{group} group: {REFUSED[kind]}", "use the group's top-level labels field instead"))
    for key, value in mapping(spec.get("labels")).items():
        for why in (label_key_problem(str(key)), label_value_problem(value)):
            if why:
                out.append(Check(f"{prefix}.{where}.labels", f"{why} in {group} group: {REFUSED[kind]}",
                                 "use at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
                                 "letter or digit"))
    return out


def priority_checks(group: dict[str, Any], name: str, where: str, spec: dict[str, Any], v2: bool,
                    kind: str) -> list[Check]:
    """validateWorkerGroupPriority (validation.go:1113-1142): a priority other than 0 needs rayVersion 2.56.0 or
    later and autoscaler v2."""
    priority = as_int(group.get("priority"))
    if not isinstance(priority, int) or priority == 0:
        return []
    field = f"{where}.priority"
    version = spec.get("rayVersion")
    if not version:
        return [Check(field, f"worker group {name}: priority is set, but rayVersion was not specified (2.56.0 or "
                      f"later is required): {REFUSED[kind]}", "set rayVersion to 2.56.0 or later")]
    parsed = parse_generic(str(version))
    if parsed is None:
        return [Check(field, f"worker group {name}: priority is set, but rayVersion '{version}' is not a version: "
                      f"{REFUSED[kind]}", "set rayVersion to 2.56.0 or later")]
    if less_than(parsed, (2, 56, 0)):
        return [Check(field, f"worker group {name}: priority is set, but the minimum Ray version is 2.56.0, got "
                      f"{version}: {REFUSED[kind]}", "set rayVersion to 2.56.0 or later, or leave priority out")]
    if not v2:
        return [Check(field, f"worker group {name}: priority is set to {priority}, but autoscaler v2 is not "
                      f"enabled: {REFUSED[kind]}", "set autoscalerOptions.version: v2, or leave priority out")]
    return []


def auth_checks(spec: dict[str, Any], prefix: str, kind: str) -> list[Check]:
    """validation.go:284-313: token auth needs rayVersion 2.52.0 or later, Kubernetes token auth 2.55.0 and no
    secretName, and Kubernetes token auth needs token mode."""
    auth = mapping(spec.get("authOptions"))
    k8s = auth.get("enableK8sTokenAuth") is True
    field = f"{prefix}.authOptions"
    if auth.get("mode") != "token":
        return [Check(f"{field}.enableK8sTokenAuth", f"authOptions.enableK8sTokenAuth is enabled but authOptions.mode "
                      f"is not 'token': {REFUSED[kind]}", "set authOptions.mode: token")] if k8s else []
    version = spec.get("rayVersion")
    if not version:
        return [Check(f"{prefix}.rayVersion", "authOptions.mode is 'token' but rayVersion was not specified (Ray "
                      f"2.52.0 or later is required): {REFUSED[kind]}", "set rayVersion to 2.52.0 or later")]
    parsed = parse_generic(str(version))
    if parsed is None:
        return [Check(f"{prefix}.rayVersion", f"authOptions.mode is 'token' but rayVersion '{version}' is not a "
                      f"version: {REFUSED[kind]}", "set rayVersion to 2.52.0 or later")]
    if less_than(parsed, (2, 52, 0)):
        return [Check(f"{prefix}.rayVersion", f"authOptions.mode is 'token' but the minimum Ray version is 2.52.0, got "
                      f"{version}: {REFUSED[kind]}", "set rayVersion to 2.52.0 or later")]
    if k8s and less_than(parsed, (2, 55, 0)):
        return [Check(f"{prefix}.rayVersion", "authOptions.enableK8sTokenAuth is enabled but the minimum Ray version "
                      f"is 2.55.0, got {version}: {REFUSED[kind]}", "set rayVersion to 2.55.0 or later")]
    if k8s and auth.get("secretName"):
        return [Check(f"{field}.secretName", "authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is "
                      f"also set: {REFUSED[kind]}", "leave secretName out")]
    return []


def job_spec(obj: dict[str, Any], gates: dict[str, bool] | None = None, kind: str = "RayJob") -> list[Check]:
    """ValidateRayJobSpec (validation.go:543-630) with the deletion rules it calls (752-966), on a RayJob as the
    API server stores it (the CRD defaults backoffLimit and ttlSecondsAfterFinished to 0, submissionMode to
    K8sJobMode; shutdownAfterJobFinishes and suspend unset are false); `kind` the object whose controller refuses it
    (a RayCronJob's jobTemplate: obj is then {"spec": the template}, and each field is said under spec.jobTemplate)."""
    on, at = {**FEATURE_GATES, **(gates or {})}, "spec.jobTemplate" if kind == "RayCronJob" else "spec"
    spec = mapping(obj.get("spec"))
    out: list[Check] = []

    def refuse(field: str, message: str, hint: str = HINT) -> None:
        out.append(Check(f"{at}.{field}" if field else at, f"{message}: {REFUSED[kind]}", hint))

    suspend, shutdown = spec.get("suspend") is True, spec.get("shutdownAfterJobFinishes") is True
    ttl = as_int(spec.get("ttlSecondsAfterFinished"), 0)
    backoff = as_int(spec.get("backoffLimit"), 0)
    mode = spec.get("submissionMode") or "K8sJobMode"
    selector = mapping(spec.get("clusterSelector"))
    cluster = spec.get("rayClusterSpec")
    if suspend and not shutdown:
        refuse("suspend", "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended",
               "set shutdownAfterJobFinishes: true, or leave suspend out")
    if isinstance(ttl, int) and ttl < 0:
        refuse("ttlSecondsAfterFinished", f"ttlSecondsAfterFinished must be a non-negative integer, got {ttl}",
               "set it to 0 or more")
    if not shutdown and isinstance(ttl, int) and ttl > 0:
        refuse("ttlSecondsAfterFinished", "a RayJob with shutdownAfterJobFinishes set to false cannot have "
               "ttlSecondsAfterFinished", "set shutdownAfterJobFinishes: true, or leave ttlSecondsAfterFinished out")
    if spec.get("deletionStrategy") is not None:
        out += deletion_checks(spec, bool(selector), on, at, kind)
    if suspend and selector:
        refuse("suspend", "the clusterSelector mode doesn't support the suspend operation", "leave suspend out")
    if cluster is None and not selector:
        refuse("", "one of rayClusterSpec or clusterSelector must be set", "describe the cluster in rayClusterSpec")
    if selector:
        if not str(selector.get(CLUSTER_SELECTOR_KEY) or ""):
            refuse("clusterSelector", f"the cluster name in clusterSelector ({CLUSTER_SELECTOR_KEY}) should not be "
                   "empty", f"name the RayCluster under {CLUSTER_SELECTOR_KEY}")
        if mode == "SidecarMode":
            refuse("submissionMode", "clusterSelector is not supported in SidecarMode", "use K8sJobMode or HTTPMode")
        if isinstance(backoff, int) and backoff > 0:
            refuse("backoffLimit", "backoffLimit is incompatible with clusterSelector mode", "set backoffLimit: 0")
    if mode == "InteractiveMode" and isinstance(backoff, int) and backoff > 0:
        refuse("backoffLimit", "backoffLimit is incompatible with InteractiveMode", "set backoffLimit: 0")
    if mode == "SidecarMode" and (cluster is not None or selector):
        if spec.get("submitterPodTemplate") is not None:
            refuse("submitterPodTemplate", "SidecarMode doesn't support submitterPodTemplate", "leave it out")
        if spec.get("submitterConfig") is not None:
            refuse("submitterConfig", "SidecarMode doesn't support submitterConfig", "leave it out")
        policy = dig(cluster, "headGroupSpec", "template", "spec", "restartPolicy")
        if not selector and policy not in (None, "", "Never"):
            refuse("rayClusterSpec.headGroupSpec.template.spec.restartPolicy", "restartPolicy for head Pod should "
                   f"be Never or unset when using SidecarMode (it is {policy})", "set restartPolicy: Never")
    if cluster is not None:
        if dig(cluster, "authOptions", "enableK8sTokenAuth") is True:
            refuse("rayClusterSpec.authOptions.enableK8sTokenAuth", "K8s token auth mode is currently not supported "
                   "for RayJob", "leave enableK8sTokenAuth out")
        out += cluster_spec(mapping(cluster), dig(obj, "metadata", "annotations"), f"{at}.rayClusterSpec", kind, on)
    runtime_env = spec.get("runtimeEnvYAML")
    if isinstance(runtime_env, str) and runtime_env.strip():
        why = runtime_env_problem(runtime_env)
        if why:
            refuse("runtimeEnvYAML", f"failed to unmarshal runtimeEnvYAML: {why}", "write runtimeEnvYAML as a YAML "
                   "mapping (pip: [...], env_vars: {...})")
    for key, what in (("activeDeadlineSeconds", "activeDeadlineSeconds"),
                      ("preRunningDeadlineSeconds", "preRunningDeadlineSeconds")):
        value = as_int(spec.get(key))
        if spec.get(key) is not None and isinstance(value, int) and value <= 0:
            refuse(key, f"{what} must be a positive integer, got {value}", f"set {key} to 1 or more")
    if isinstance(backoff, int) and backoff < 0:
        refuse("backoffLimit", f"backoffLimit must be a positive integer, got {backoff}", "set it to 0 or more")
    return out


def runtime_env_problem(text: str) -> str | None:
    """dashboardclient.UnmarshalRuntimeEnvYAML (dashboard_httpclient.go:382-388): the text unmarshalled into a
    map[string]interface{}; why it cannot be (not YAML, or YAML that is not a mapping), None where it can."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return f"not YAML ({str(exc).splitlines()[0]})"
    if value is not None and not isinstance(value, dict):
        return f"a YAML {type(value).__name__.replace('str', 'string')}, not a mapping"
    return None


# validation.go:894-898: the order in which the policies' TTLs must not decrease.
DELETION_ORDER = ("DeleteWorkers", "DeleteCluster", "DeleteSelf")


def deletion_checks(spec: dict[str, Any], selector: bool, on: dict[str, bool], at: str, kind: str) -> list[Check]:
    """validateDeletionConfiguration (validation.go:752-792), with validateDeletionRules (797-868),
    validateTTLConsistency (892-925) and validateLegacyDeletionPolicies (928-966)."""
    where = f"{at}.deletionStrategy"
    if not on["RayJobDeletionPolicy"]:
        return [Check(where, "the RayJobDeletionPolicy feature gate must be enabled to use "
                      f"deletionStrategy: {REFUSED[kind]}", "leave deletionStrategy out")]
    strategy = mapping(spec.get("deletionStrategy"))
    out: list[Check] = []

    def refuse(field: str, message: str, hint: str = HINT) -> None:
        out.append(Check(f"{where}.{field}" if field else where, f"{message}: {REFUSED[kind]}", hint))

    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    rules = listing(strategy.get("deletionRules"))
    shutdown = spec.get("shutdownAfterJobFinishes") is True
    scaling = autoscaling(mapping(spec.get("rayClusterSpec")))
    if rules and shutdown:
        refuse("deletionRules", "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually "
               "exclusive", "leave shutdownAfterJobFinishes out")
    if rules and legacy:
        refuse("", "cannot use both legacy onSuccess/onFailure fields and deletionRules", "use deletionRules only")
        return out
    if legacy:
        success, failure = strategy.get("onSuccess"), strategy.get("onFailure")
        if success is None or failure is None:
            refuse("", "both deletionStrategy.onSuccess and deletionStrategy.onFailure must be set when using the "
                   "legacy deletion policy fields", "set both, or use deletionRules")
            return out
        policies = {}
        for key in ("onSuccess", "onFailure"):
            policy = mapping(strategy.get(key)).get("policy")
            if policy is None:
                refuse(f"{key}.policy", f"the policy of deletionStrategy.{key} cannot be unset",
                       "set it to DeleteCluster, DeleteWorkers, DeleteSelf or DeleteNone")
            policies[key] = policy
        if out:
            return out
        for key, policy in policies.items():
            if selector and policy in ("DeleteCluster", "DeleteWorkers"):
                refuse(f"{key}.policy", f"the clusterSelector mode doesn't support deletionStrategy={policy} on "
                       f"{'success' if key == 'onSuccess' else 'failure'}", "use DeleteSelf or DeleteNone")
        if "DeleteWorkers" in policies.values() and scaling:
            refuse("", "deletionStrategy=DeleteWorkers currently does not support a RayCluster with autoscaling "
                   "enabled", "use DeleteCluster, or set enableInTreeAutoscaling: false")
        if shutdown and "DeleteNone" in policies.values():
            refuse("", "shutdownAfterJobFinishes is true while a deletion policy is DeleteNone",
                   "leave shutdownAfterJobFinishes out, or use another policy")
        return out
    if not rules:
        refuse("", "deletionStrategy requires either both onSuccess and onFailure, or deletionRules (not empty)",
               "add deletionRules")
        return out
    ttls: dict[tuple[str, str], dict[str, int]] = {}
    for i, rule in enumerate(rules):
        rule = mapping(rule)
        at = f"deletionRules[{i}]"
        condition = mapping(rule.get("condition"))
        status, deployment = condition.get("jobStatus"), condition.get("jobDeploymentStatus")
        if status is not None and deployment is not None:
            refuse(f"{at}.condition", f"{at}: cannot set both jobStatus and jobDeploymentStatus", "keep one")
            continue
        if status is None and deployment is None:
            refuse(f"{at}.condition", f"{at}: exactly one of jobStatus and jobDeploymentStatus must be set",
                   "set jobStatus or jobDeploymentStatus")
            continue
        ttl = as_int(condition.get("ttlSeconds"), 0)
        if isinstance(ttl, int) and ttl < 0:
            refuse(f"{at}.condition.ttlSeconds", f"{at}: ttlSeconds must be non-negative", "set it to 0 or more")
            continue
        policy = str(rule.get("policy"))
        if selector and policy in ("DeleteCluster", "DeleteWorkers"):
            refuse(f"{at}.policy", f"{at}: policy '{policy}' is not supported when clusterSelector is set",
                   "use DeleteSelf or DeleteNone")
            continue
        if scaling and policy == "DeleteWorkers":
            refuse(f"{at}.policy", f"{at}: policy 'DeleteWorkers' is not supported with autoscaling enabled",
                   "use DeleteCluster")
            continue
        on_status = ("jobStatus", str(status)) if status is not None else ("jobDeploymentStatus", str(deployment))
        seen = ttls.setdefault(on_status, {})
        if policy in seen:
            refuse(f"{at}", f"{at}: duplicate rule for policy '{policy}' and {on_status[0]} '{on_status[1]}'",
                   "keep one rule per policy and condition")
            continue
        seen[policy] = ttl if isinstance(ttl, int) else 0
    for (what, value), seen in ttls.items():
        previous: tuple[str, int] | None = None
        for policy in DELETION_ORDER:
            if policy not in seen:
                continue
            if previous is not None and seen[policy] < previous[1]:
                refuse("deletionRules", f"for {what} '{value}': {policy} TTL ({seen[policy]}) must be >= "
                       f"{previous[0]} TTL ({previous[1]})", "order the TTLs DeleteWorkers <= DeleteCluster <= "
                       "DeleteSelf")
            previous = (policy, seen[policy])
    return out
