"""KubeRay's admission (policies/launchers/kuberay.py, kuberay_validation.py) against upstream's own table tests:
ray-project/kuberay v1.7.0 ray-operator/controllers/ray/utils/validation_test.go, each case named by its line range
there. `podTemplateSpec` (validation_test.go:687-703) and `createBasicRayClusterSpec` (2191-2197) are written out as
`template` and `basic`. An upstream test that sets a feature gate is run with the gates it sets; where it turns a gate
on that is off by default, the checks that gate guards are the ones this model leaves out (see kuberay_validation.py)
and only its admitted cases are ported. Expectations: "error" (the controller refuses it), "ok" (no finding at all),
"gate:<name>" (refused without that gate, off by default: a warning carrying it)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.kube.objects import ERROR, INFO, WARNING, Manifest
from policies.launchers import BY_ID, kuberay_validation as kv
from policies.launchers.base import Check
from policies.report import engine
from policies.rules.kit import Environment
from policies.schema import BuiltinValidator

from conftest import run_cli

TEST = "validation_test.go"
CONFORMANCE = sorted((Path(__file__).parent / "conformance" / "kuberay").glob("*.yaml"))


def template(env: list[dict[str, Any]] | None = None, restart: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"env": env} if env is not None else {}]}
    if restart:
        spec["restartPolicy"] = restart
    return {"spec": spec}


def basic(**kw: Any) -> dict[str, Any]:
    return {"headGroupSpec": {"template": template()}, **kw}


def worker(name: str = "worker-group-1", restart: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"groupName": name, "template": template(restart=restart), **kw}


def env(name: str, value: str) -> list[dict[str, Any]]:
    return [{"name": name, "value": value}]


V2 = {"version": "v2"}
R = kv.FT_ANNOTATION
RAY_V2 = kv.AUTOSCALER_V2_ENV
ROCKS = {"GCSFaultToleranceEmbeddedStorage": True}
OFF = {"RayJobDeletionPolicy": False}

# (lines, spec, annotations, gates, expected)
CLUSTER: list[tuple[str, dict[str, Any], dict[str, str] | None, dict[str, bool] | None, str]] = [
    # TestValidateRayClusterSpecGcsFaultToleranceOptions (99-300), run with GCSFaultToleranceEmbeddedStorage on.
    ("120-128", basic(gcsFaultToleranceOptions={}), {R: "false"}, ROCKS, "error"),
    ("129-137", basic(gcsFaultToleranceOptions={}), {R: "true"}, ROCKS, "error"),
    ("138-142", basic(gcsFaultToleranceOptions={"redisAddress": "redis:6379"}), None, ROCKS, "ok"),
    ("143-147", basic(), None, ROCKS, "ok"),
    ("149-162", {"headGroupSpec": {"template": template(env("RAY_REDIS_ADDRESS", "redis:6379"))}}, {R: "false"},
     ROCKS, "error"),
    ("163-174", {"headGroupSpec": {"template": template(env("RAY_REDIS_ADDRESS", "redis:6379"))},
                 "gcsFaultToleranceOptions": {}}, None, ROCKS, "error"),
    ("175-185", {"headGroupSpec": {"template": template(env("RAY_REDIS_ADDRESS", "redis:6379"))}}, None, ROCKS,
     "error"),
    ("186-198", {"headGroupSpec": {"template": template(env("RAY_REDIS_ADDRESS", "redis:6379"))}}, {R: "true"},
     ROCKS, "ok"),
    ("199-207", basic(gcsFaultToleranceOptions={"redisAddress": "redis:6379"}), {kv.EXTERNAL_STORAGE_ANNOTATION:
                                                                                 "myns"}, ROCKS, "error"),
    ("210-214", basic(gcsFaultToleranceOptions={"backend": "redis"}), None, ROCKS, "ok"),
    ("215-223", basic(gcsFaultToleranceOptions={"backend": "redis", "storage": {"size": "1Gi"}}), None, ROCKS,
     "error"),
    ("225-229", basic(gcsFaultToleranceOptions={"backend": "rocksdb"}), None, ROCKS, "ok"),
    ("230-237", basic(gcsFaultToleranceOptions={"backend": "rocksdb", "storage": {"size": "2Gi"}}), None, ROCKS,
     "ok"),
    # TestValidateRayClusterSpecEmbeddedGCSFeatureGate (305-320): the gate off refuses rocksdb, on admits it.
    ("313-316", basic(gcsFaultToleranceOptions={"backend": "rocksdb"}), None, None,
     "gate:GCSFaultToleranceEmbeddedStorage"),
    ("318-319", basic(gcsFaultToleranceOptions={"backend": "rocksdb"}), None, ROCKS, "ok"),
    # TestValidateRayClusterSpecRedisPassword (381-439).
    ("389-396", {"headGroupSpec": {"template": template(), "rayStartParams": {"redis-password": "password"}},
                 "gcsFaultToleranceOptions": {}}, None, None, "error"),
    ("397-407", {"headGroupSpec": {"template": template(env("REDIS_PASSWORD", "password"))},
                 "gcsFaultToleranceOptions": {}}, None, None, "error"),
    ("408-417", basic(gcsFaultToleranceOptions={"redisAddress": "redis:6379", "redisPassword": {"value": "password"}}),
     None, None, "ok"),
    # TestValidateRayClusterSpecRedisUsername (441-503).
    ("452-459", {"headGroupSpec": {"template": template(), "rayStartParams": {"redis-username": "username"}}}, None,
     None, "error"),
    ("460-470", {"headGroupSpec": {"template": template(env("REDIS_USERNAME", "username"))}}, None, None, "error"),
    ("471-480", basic(gcsFaultToleranceOptions={"redisAddress": "redis:6379", "redisUsername": {"value": "username"}}),
     None, None, "ok"),
    # TestValidateRayClusterSpecEmptyContainers (549-613).
    ("569-578", {"headGroupSpec": {"template": {"spec": {"containers": []}}}}, None, None, "error"),
    ("579-589", basic(workerGroupSpecs=[{"template": {"spec": {"containers": []}}, "minReplicas": 0,
                                         "maxReplicas": 5}]), None, None, "error"),
    ("590-599", basic(workerGroupSpecs=[worker(minReplicas=0, maxReplicas=5)]), None, None, "ok"),
    # TestValidateRayClusterSpecSuspendingWorkerGroup (615-685).
    ("634-645", basic(workerGroupSpecs=[worker(minReplicas=0, maxReplicas=5, suspend=True)]), None, OFF, "error"),
    ("646-656", basic(workerGroupSpecs=[worker(minReplicas=0, maxReplicas=5, suspend=True)]), None, None, "ok"),
    ("657-670", basic(workerGroupSpecs=[worker(minReplicas=0, maxReplicas=5, suspend=True)],
                      enableInTreeAutoscaling=True), None, None, "error"),
    # TestValidateRayClusterSpecAutoscaler (705-930), RayJobDeletionPolicy on.
    ("710-725", basic(enableInTreeAutoscaling=True, workerGroupSpecs=[worker(suspend=True)]), {}, None, "error"),
    ("726-739", {"enableInTreeAutoscaling": False, "headGroupSpec": {"template": template(env(RAY_V2, "1"))}}, {},
     None, "error"),
    ("740-753", {"enableInTreeAutoscaling": False, "headGroupSpec": {"template": template(env(RAY_V2, "true"))}}, {},
     None, "error"),
    ("754-770", {"enableInTreeAutoscaling": True, "autoscalerOptions": V2,
                 "headGroupSpec": {"template": template(env(RAY_V2, "true"))}}, {}, None, "error"),
    ("771-782", {"enableInTreeAutoscaling": True, "autoscalerOptions": V2,
                 "headGroupSpec": {"template": template(restart="Always")}}, {}, None, "error"),
    ("783-804", basic(enableInTreeAutoscaling=True, autoscalerOptions={"version": "v1"},
                      workerGroupSpecs=[worker(restart="Never"), worker("worker-group-2", restart="Always")]), {},
     None, "ok"),
    ("805-825", basic(enableInTreeAutoscaling=True, autoscalerOptions={"version": "v1"},
                      workerGroupSpecs=[worker(), worker("worker-group-2", restart="Never")]), {}, None, "ok"),
    ("826-847", {"enableInTreeAutoscaling": True, "autoscalerOptions": V2,
                 "headGroupSpec": {"template": template(restart="Never")},
                 "workerGroupSpecs": [worker(restart="Never"), worker("worker-group-2", restart="Always")]}, {},
     None, "error"),
    ("848-868", basic(enableInTreeAutoscaling=True, autoscalerOptions=V2,
                      workerGroupSpecs=[worker(), worker("worker-group-2", restart="Never")]), {}, None, "ok"),
    ("869-889", basic(enableInTreeAutoscaling=True, autoscalerOptions={
        "args": ["my-custom-autoscaler-cmd"], "env": env(kv.GEN_START_CMD, "ray kuberay-autoscaler")}), {}, None,
     "error"),
    ("890-911", basic(enableInTreeAutoscaling=True, autoscalerOptions={"env": env(kv.GEN_START_CMD, "x")}), {}, None,
     "error"),
    # TestValidateRayClusterSpec_Resources (932-1013).
    ("957-966", {"headGroupSpec": {"template": template(), "rayStartParams": {"num-cpus": "1"},
                                   "resources": {"CPU": "1"}},
                 "workerGroupSpecs": [worker("worker-group", minReplicas=0, maxReplicas=5)]}, None, None, "error"),
    ("968-977", basic(workerGroupSpecs=[worker("worker-group", minReplicas=0, maxReplicas=5,
                                               rayStartParams={"num-gpus": "1"}, resources={"GPU": "1"})]), None,
     None, "error"),
    ("979-990", {"headGroupSpec": {"template": template(), "rayStartParams": {
        "num-cpus": "2", "memory": "4G", "resources": '{"TPU": "8"}'}},
        "workerGroupSpecs": [worker("worker-group", minReplicas=0, maxReplicas=5)]}, None, None, "ok"),
    ("992-999", basic(workerGroupSpecs=[worker("worker-group", minReplicas=0, maxReplicas=5,
                                               resources={"CPU": "2", "memory": "4G", "TPU": "8"})]), None, None,
     "ok"),
    # TestValidateRayClusterSpec_Labels (1015-1102).
    ("1040-1048", {"headGroupSpec": {"template": template(), "rayStartParams": {
        "labels": "ray.io/node-group=worker-group-1"}}}, None, None, "error"),
    ("1050-1058", basic(workerGroupSpecs=[worker("worker-group", minReplicas=0, maxReplicas=5, rayStartParams={
        "labels": "ray.io/node-group=worker-group-1"})]), None, None, "error"),
    ("1060-1068", {"headGroupSpec": {"template": template(), "labels": {"ray.io/market-type": "on-demand"}},
                   "workerGroupSpecs": [worker("worker-group", minReplicas=0, maxReplicas=5,
                                               labels={"ray.io/accelerator-type": "TPU-V6E"})]}, None, None, "ok"),
    ("1070-1078", basic(workerGroupSpecs=[worker("worker-group", minReplicas=0, maxReplicas=5,
                                                 labels={"invalid_key!": "value"})]), None, None, "error"),
    ("1080-1088", {"headGroupSpec": {"template": template(), "labels": {"valid-key": "invalid/value"}}}, None, None,
     "error"),
    # TestValidateRayClusterSpecRayVersionForAuth (1104-1181).
    *[(lines, basic(rayVersion=version, authOptions={"mode": "token", "enableK8sTokenAuth": k8s}), None, None, want)
      for lines, version, k8s, want in (
          ("1113-1116", "2.52.0", False, "ok"), ("1118-1122", "2.52.0", True, "error"),
          ("1124-1128", "2.55.0", True, "ok"), ("1130-1133", "3.0.0", False, "ok"),
          ("1135-1139", "3.0.0", True, "ok"), ("1141-1145", "2.50.0", False, "error"),
          ("1147-1151", "invalid-version", False, "error"), ("1153-1157", "", False, "error"))],
    # TestValidateRayClusterSpec_IdleTimeoutSeconds (2317-2544): enableInTreeAutoscaling true throughout.
    ("2333-2351", basic(enableInTreeAutoscaling=True, autoscalerOptions=V2, workerGroupSpecs=[
        worker(idleTimeoutSeconds=60, minReplicas=0, maxReplicas=10)]), None, None, "ok"),
    ("2352-2370", {"enableInTreeAutoscaling": True, "headGroupSpec": {"template": template(env(RAY_V2, "1"))},
                   "workerGroupSpecs": [worker(idleTimeoutSeconds=60, minReplicas=0, maxReplicas=10)]}, None, None,
     "ok"),
    ("2371-2389", basic(enableInTreeAutoscaling=True, autoscalerOptions=V2, workerGroupSpecs=[
        worker(idleTimeoutSeconds=0, minReplicas=0, maxReplicas=10)]), None, None, "ok"),
    ("2390-2408", basic(enableInTreeAutoscaling=True, autoscalerOptions=V2, workerGroupSpecs=[
        worker(idleTimeoutSeconds=-10, minReplicas=0, maxReplicas=10)]), None, None, "error"),
    ("2409-2424", basic(enableInTreeAutoscaling=True, workerGroupSpecs=[
        worker(idleTimeoutSeconds=60, minReplicas=0, maxReplicas=10)]), None, None, "error"),
    ("2425-2443", {"enableInTreeAutoscaling": True, "headGroupSpec": {"template": template(env(RAY_V2, "false"))},
                   "workerGroupSpecs": [worker(idleTimeoutSeconds=60, minReplicas=0, maxReplicas=10)]}, None, None,
     "error"),
    ("2444-2458", basic(enableInTreeAutoscaling=True, workerGroupSpecs=[worker(minReplicas=0, maxReplicas=10)]),
     None, None, "ok"),
    ("2461-2471", basic(enableInTreeAutoscaling=True, autoscalerOptions={"version": "v2", "idleTimeoutSeconds": 120}),
     None, None, "ok"),
    ("2472-2482", basic(enableInTreeAutoscaling=True, autoscalerOptions={"version": "v1", "idleTimeoutSeconds": 120}),
     None, None, "ok"),
    ("2483-2492", basic(enableInTreeAutoscaling=True, autoscalerOptions={"idleTimeoutSeconds": 120}), None, None,
     "ok"),
    ("2493-2502", basic(enableInTreeAutoscaling=True, autoscalerOptions={"idleTimeoutSeconds": 0}), None, None, "ok"),
    ("2503-2512", basic(enableInTreeAutoscaling=True, autoscalerOptions={"idleTimeoutSeconds": -10}), None, None,
     "error"),
    ("2513-2522", basic(enableInTreeAutoscaling=True, autoscalerOptions={"version": "v1"}), None, None, "ok"),
    ("2523-2530", basic(enableInTreeAutoscaling=True), None, None, "ok"),
    # TestValidateRayClusterSpec_Priority (2546-2740): rayVersion 2.56.0 and autoscaling on unless the case says.
    ("2562-2580", basic(rayVersion="2.56.0", enableInTreeAutoscaling=True, autoscalerOptions=V2, workerGroupSpecs=[
        worker(priority=1, minReplicas=0, maxReplicas=10)]), None, None, "ok"),
    ("2581-2599", {"rayVersion": "2.56.0", "enableInTreeAutoscaling": True,
                   "headGroupSpec": {"template": template(env(RAY_V2, "1"))},
                   "workerGroupSpecs": [worker(priority=1, minReplicas=0, maxReplicas=10)]}, None, None, "ok"),
    ("2600-2615", basic(rayVersion="2.56.0", enableInTreeAutoscaling=True, workerGroupSpecs=[
        worker(priority=0, minReplicas=0, maxReplicas=10)]), None, None, "ok"),
    ("2616-2631", basic(rayVersion="2.56.0", enableInTreeAutoscaling=True, workerGroupSpecs=[
        worker(minReplicas=0, maxReplicas=10)]), None, None, "ok"),
    ("2632-2647", basic(rayVersion="2.56.0", enableInTreeAutoscaling=True, workerGroupSpecs=[
        worker(priority=1, minReplicas=0, maxReplicas=10)]), None, None, "error"),
    ("2648-2666", {"rayVersion": "2.56.0", "enableInTreeAutoscaling": True,
                   "headGroupSpec": {"template": template(env(RAY_V2, "false"))},
                   "workerGroupSpecs": [worker(priority=2, minReplicas=0, maxReplicas=10)]}, None, None, "error"),
    *[(lines, basic(rayVersion=version, enableInTreeAutoscaling=True, autoscalerOptions=V2, workerGroupSpecs=[
        worker(priority=1, minReplicas=0, maxReplicas=10)]), None, None, "error")
      for lines, version in (("2667-2686", ""), ("2687-2706", "invalid"), ("2707-2726", "2.55.0"))],
    # TestValidateRayClusterSpec_WorkerGroupReplicaValidation (3155-3319), enableInTreeAutoscaling false.
    ("3172-3187", basic(enableInTreeAutoscaling=False, workerGroupSpecs=[
        worker("worker-group-3", minReplicas=5, maxReplicas=3)]), None, None, "error"),
    ("3189-3205", basic(enableInTreeAutoscaling=False, workerGroupSpecs=[
        worker("worker-group-3", replicas=1, minReplicas=2, maxReplicas=5)]), None, None, "ok"),
    # 3207-3256: upstream refuses minReplicas or maxReplicas unset with autoscaling off ("must set both"), but the
    # CRD defaults them (0, 2147483647) before the controller reads an applied object: admitted here.
    ("3207-3222", basic(enableInTreeAutoscaling=False, workerGroupSpecs=[worker("worker-group-3", maxReplicas=5)]),
     None, None, "ok"),
    ("3224-3239", basic(enableInTreeAutoscaling=False, workerGroupSpecs=[worker("worker-group-3", minReplicas=1)]),
     None, None, "ok"),
    ("3241-3256", basic(enableInTreeAutoscaling=False, workerGroupSpecs=[worker("worker-group-3")]), None, None,
     "ok"),
    ("3258-3273", basic(enableInTreeAutoscaling=True, workerGroupSpecs=[worker("worker-group-3", minReplicas=-1)]),
     None, None, "error"),
    ("3275-3290", basic(enableInTreeAutoscaling=True, workerGroupSpecs=[worker("worker-group-3", maxReplicas=-1)]),
     None, None, "error"),
    ("3292-3305", basic(enableInTreeAutoscaling=True, workerGroupSpecs=[worker("worker-group-3")]), None, None, "ok"),
    # TestValidateRayClusterSpec_Auth (3321-3386): rayVersion 2.55.0, one worker group of 1.
    *[(lines, basic(rayVersion="2.55.0", authOptions=auth, workerGroupSpecs=[
        worker("worker-group", minReplicas=1, maxReplicas=1)]), None, None, want)
      for lines, auth, want in (
          ("3329-3337", {"mode": "token", "enableK8sTokenAuth": True, "secretName": "my-secret"}, "error"),
          ("3339-3345", {"mode": "token", "enableK8sTokenAuth": True}, "ok"),
          ("3347-3353", {"mode": "token", "secretName": "my-secret"}, "ok"))],
    # The feature-gate tests: 3560-3583 (networkPolicy), 3777-3790 (tlsOptions), 3792-3821 (historyServerOptions).
    ("3560-3583", basic(networkPolicy={"mode": "DenyAll"}, workerGroupSpecs=[
        worker("worker-group", minReplicas=1, maxReplicas=1)]), None, None, "gate:RayClusterNetworkPolicy"),
    ("3777-3790", basic(tlsOptions={"enabled": True}), None, None, "gate:RayClusterMTLS"),
    ("3792-3821", basic(historyServerOptions={"collectorOptions": {
        "image": "quay.io/kuberay/collector:latest", "env": env("STORAGE_BACKEND", "GCS") + env("GCS_BUCKET", "b")}},
        workerGroupSpecs=[worker("worker-group", minReplicas=1, maxReplicas=1)]), None, None,
     "gate:RayClusterHistoryServer"),
]


def judge(checks: list[Check], want: str, where: str) -> None:
    errors = [c.message for c in checks if c.severity is None]
    if want == "ok":
        assert not checks, f"{where}: upstream admits it, found {[c.message for c in checks]}"
    elif want == "error":
        assert errors, f"{where}: upstream refuses it, found no error ({[c.message for c in checks]})"
        assert all(c.endswith(tuple(kv.REFUSED.values())) for c in errors), errors
    else:
        gate = want.removeprefix("gate:")
        gated = [c for c in checks if c.gate == (kv.LAUNCHER_ID, gate)]
        assert gated and all(c.severity == WARNING for c in gated), f"{where}: {[c.message for c in checks]}"
        assert not errors, errors


@pytest.mark.parametrize("lines,spec,annotations,gates,want", CLUSTER, ids=[c[0] for c in CLUSTER])
def test_ray_cluster_spec(lines: str, spec: dict[str, Any], annotations: dict[str, str] | None,
                          gates: dict[str, bool] | None, want: str) -> None:
    judge(kv.cluster_spec(spec, annotations, "spec", "RayCluster", gates), want, f"{TEST}:{lines}")


def name(kind: str, text: str) -> list[Check]:
    return kv.name_checks({"name": text}, kind)


@pytest.mark.parametrize("lines,kind,text,want", [
    # TestValidateRayClusterSpecNames (505-547), TestValidateRayJobMetadata (2025-2040).
    ("512-519", "RayCluster", "a" * 54, "error"), ("520-526", "RayCluster", "a" * 53, "ok"),
    ("527-534", "RayCluster", "1" * 53, "error"),
    ("2026-2029", "RayJob", "j" * 48, "error"), ("2031-2034", "RayJob", "1" * 47, "error"),
    ("2036-2039", "RayJob", "j" * 47, "ok")], ids=lambda v: v if isinstance(v, str) and "-" in v else None)
def test_names(lines: str, kind: str, text: str, want: str) -> None:
    judge(name(kind, text), want, f"{TEST}:{lines}")


def test_generate_name_counts_the_five_characters_the_api_server_adds() -> None:
    assert not kv.name_checks({"generateName": "rayjob-pytorch-"}, "RayJob")
    assert kv.name_checks({"generateName": "j" * 43}, "RayJob")  # 43 + 5 > 47
    assert not kv.name_checks({"generateName": "j" * 42}, "RayJob")


def test_an_object_named_by_generate_name_is_shown_by_it() -> None:
    """KubeRay's RayJob samples (ray-job.kueue-toy-sample.yaml, pytorch-text-classifier) name themselves with
    metadata.generateName alone: each line about them named `RayJob/`, which says no object; now the names the API
    server may give, `RayJob/<generateName>*`."""
    m = Manifest(yaml.safe_load((Path(__file__).parent / "corpus/rayjob/kuberay-pytorch-text-classifier.yaml")
                                .read_text()), "f.yaml")
    assert m.ref == "RayJob/pytorch-text-classifier-*" and m.name == ""
    assert Manifest({"kind": "Job", "metadata": {"namespace": "ns", "generateName": "s-"}}, "f").ref == "Job/ns/s-*"
    assert Manifest({"kind": "Job", "metadata": {}}, "f").ref == "Job/"
    # make plan names such a workload alike (its table and its JSON)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "ddp-"}, "spec": {
        "completionMode": "Indexed", "completions": 1, "parallelism": 1, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "t", "image": "busybox:1.37",
                                                       "command": ["torchrun", "--nnodes=1", "train.py"]}]}}}}
    out = run_cli("plan", "--format", "json", "-", stdin=json.dumps(job))
    assert [w["object"] for o in json.loads(out.stdout)["overlays"] for w in o["workloads"]] == ["Job/ddp-*"], out


@pytest.mark.parametrize("lines,strategy,maker,want", [
    # TestValidateRayClusterUpgradeOptions (3057-3153).
    ("3065-3069", None, None, "ok"), ("3070-3077", "None", "RayCluster", "ok"),
    ("3078-3085", "Recreate", "RayCluster", "ok"), ("3086-3094", "Recreate", "RayJob", "error"),
    ("3095-3103", "Recreate", "RayService", "error"), ("3104-3112", "InvalidStrategy", "RayCluster", "error")],
    ids=lambda v: v if isinstance(v, str) and v[:1].isdigit() else None)
def test_upgrade_strategy(lines: str, strategy: str | None, maker: str | None, want: str) -> None:
    obj: dict[str, Any] = {"metadata": {"name": "test-cluster", "labels": {kv.ORIGINATED_FROM: maker} if maker else {}},
                           "spec": basic(**({"upgradeStrategy": {"type": strategy}} if strategy else {}))}
    judge(kv.upgrade_checks(obj), want, f"{TEST}:{lines}")


def rule(policy: str, ttl: int, status: str | None = "SUCCEEDED", deployment: str | None = None) -> dict[str, Any]:
    condition: dict[str, Any] = {"ttlSeconds": ttl}
    if status:
        condition["jobStatus"] = status
    if deployment:
        condition["jobDeploymentStatus"] = deployment
    return {"policy": policy, "condition": condition}


def legacy(success: str | None, failure: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if success is not None:
        out["onSuccess"] = {"policy": success} if success else {}
    if failure is not None:
        out["onFailure"] = {"policy": failure} if failure else {}
    return out


SEL = {"key": "value"}
JOB: list[tuple[str, dict[str, Any], dict[str, bool] | None, str]] = [
    # TestValidateRayJobSpec (1236-1448).
    ("1242-1246", {}, None, "error"),
    ("1247-1254", {"suspend": True, "shutdownAfterJobFinishes": False}, None, "error"),
    ("1255-1263", {"suspend": True, "shutdownAfterJobFinishes": True, "rayClusterSpec": basic()}, None, "ok"),
    ("1264-1274", {"suspend": True, "shutdownAfterJobFinishes": True, "clusterSelector": SEL}, None, "error"),
    ("1275-1282", {"runtimeEnvYAML": "invalid_yaml_str", "rayClusterSpec": basic()}, None, "error"),
    ("1283-1290", {"backoffLimit": -1, "rayClusterSpec": basic()}, None, "error"),
    ("1291-1299", {"backoffLimit": 1, "submissionMode": "InteractiveMode", "rayClusterSpec": basic()}, None, "error"),
    ("1300-1308", {"backoffLimit": 0, "submissionMode": "InteractiveMode", "rayClusterSpec": basic()}, None, "ok"),
    ("1309-1317", {"submissionMode": "InteractiveMode", "rayClusterSpec": basic()}, None, "ok"),
    ("1318-1326", {"shutdownAfterJobFinishes": False, "ttlSecondsAfterFinished": 5, "rayClusterSpec": basic()},
     None, "error"),
    ("1327-1335", {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 5, "rayClusterSpec": basic()},
     None, "ok"),
    ("1336-1344", {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": -5, "rayClusterSpec": basic()},
     None, "error"),
    ("1345-1352", {"submissionMode": "SidecarMode", "rayClusterSpec": basic()}, None, "ok"),
    ("1353-1362", {"submissionMode": "SidecarMode", "submitterPodTemplate": {"spec": {}}}, None, "error"),
    ("1363-1372", {"submissionMode": "SidecarMode", "submitterConfig": {"backoffLimit": 1}}, None, "error"),
    ("1373-1384", {"submissionMode": "SidecarMode", "rayClusterSpec": {"headGroupSpec": {
        "template": template(restart="Always")}}}, None, "error"),
    ("1385-1392", {"submissionMode": "SidecarMode", "clusterSelector": {"ray.io/cluster": "ray-cluster"}}, None,
     "error"),
    ("1393-1399", {"clusterSelector": {}}, None, "error"),
    ("1400-1406", {"clusterSelector": {"ray.io/cluster": ""}}, None, "error"),
    ("1407-1413", {"clusterSelector": {"ray.io/cluster": "ray-cluster"}}, None, "ok"),
    ("1414-1421", {"clusterSelector": {"ray.io/cluster": "ray-cluster"}, "backoffLimit": 1}, None, "error"),
    ("1422-1433", {"rayClusterSpec": {"authOptions": {"mode": "token", "enableK8sTokenAuth": True}}}, None, "error"),
    # TestValidateRayJobSpecWithFeatureGate (1450-2023), RayJobDeletionPolicy on (its default).
    ("1462-1474", {"deletionStrategy": legacy("DeleteCluster", "DeleteCluster"), "clusterSelector": SEL}, None,
     "error"),
    ("1476-1488", {"deletionStrategy": legacy("DeleteWorkers", "DeleteWorkers"), "clusterSelector": SEL}, None,
     "error"),
    ("1490-1505", {"deletionStrategy": legacy("DeleteWorkers", "DeleteWorkers"),
                   "rayClusterSpec": basic(enableInTreeAutoscaling=True)}, None, "error"),
    ("1507-1520", {"deletionStrategy": legacy("DeleteCluster", "DeleteCluster"), "shutdownAfterJobFinishes": True,
                   "rayClusterSpec": basic()}, None, "ok"),
    ("1522-1529", {"shutdownAfterJobFinishes": True, "rayClusterSpec": basic()}, None, "ok"),
    ("1531-1544", {"deletionStrategy": legacy("DeleteNone", "DeleteNone"), "shutdownAfterJobFinishes": True,
                   "rayClusterSpec": basic()}, None, "error"),
    ("1546-1556", {"deletionStrategy": legacy(None, "DeleteNone"), "shutdownAfterJobFinishes": True,
                   "rayClusterSpec": basic()}, None, "error"),
    ("1558-1568", {"deletionStrategy": legacy("", "DeleteNone"), "shutdownAfterJobFinishes": True,
                   "rayClusterSpec": basic()}, None, "error"),
    ("1570-1580", {"deletionStrategy": legacy("DeleteNone", None), "shutdownAfterJobFinishes": True,
                   "rayClusterSpec": basic()}, None, "error"),
    ("1582-1593", {"deletionStrategy": legacy("DeleteNone", ""), "shutdownAfterJobFinishes": True,
                   "rayClusterSpec": basic()}, None, "error"),
    ("1595-1602", {"rayClusterSpec": {"headGroupSpec": {}}}, None, "error"),
    ("1605-1621", {"deletionStrategy": {"deletionRules": [rule("DeleteSelf", 10)]}, "rayClusterSpec": basic()},
     None, "ok"),
    ("1623-1640", {"shutdownAfterJobFinishes": True, "deletionStrategy": {"deletionRules": [rule("DeleteSelf", 10)]},
                   "rayClusterSpec": basic()}, None, "error"),
    ("1642-1661", {"deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"},
                                        "deletionRules": [rule("DeleteSelf", 10)]}, "rayClusterSpec": basic()},
     None, "error"),
    ("1663-1669", {"deletionStrategy": {}, "rayClusterSpec": basic()}, None, "error"),
    ("1671-1679", {"deletionStrategy": {"deletionRules": []}, "rayClusterSpec": basic()}, None, "error"),
    ("1681-1704", {"deletionStrategy": {"deletionRules": [rule("DeleteSelf", 10), rule("DeleteSelf", 20)]},
                   "rayClusterSpec": basic()}, None, "error"),
    ("1706-1722", {"deletionStrategy": {"deletionRules": [rule("DeleteSelf", -10)]}, "rayClusterSpec": basic()},
     None, "error"),
    ("1724-1740", {"clusterSelector": SEL, "deletionStrategy": {"deletionRules": [rule("DeleteWorkers", 10)]}},
     None, "error"),
    ("1742-1758", {"clusterSelector": SEL, "deletionStrategy": {"deletionRules": [rule("DeleteCluster", 10)]}},
     None, "error"),
    ("1760-1779", {"deletionStrategy": {"deletionRules": [rule("DeleteWorkers", 10)]},
                   "rayClusterSpec": basic(enableInTreeAutoscaling=True)}, None, "error"),
    ("1781-1804", {"deletionStrategy": {"deletionRules": [rule("DeleteWorkers", 20), rule("DeleteCluster", 10)]},
                   "rayClusterSpec": basic()}, None, "error"),
    ("1806-1829", {"deletionStrategy": {"deletionRules": [rule("DeleteCluster", 20), rule("DeleteSelf", 10)]},
                   "rayClusterSpec": basic()}, None, "error"),
    ("1831-1868", {"deletionStrategy": {"deletionRules": [
        rule("DeleteWorkers", 10), rule("DeleteCluster", 20), rule("DeleteSelf", 30),
        rule("DeleteSelf", 0, "FAILED")]}, "rayClusterSpec": basic()}, None, "ok"),
    ("1870-1893", {"deletionStrategy": {"deletionRules": [rule("DeleteCluster", 10, None, "Failed"),
                                                          rule("DeleteSelf", 20, None, "Failed")]},
                   "rayClusterSpec": basic()}, None, "ok"),
    ("1894-1912", {"deletionStrategy": {"deletionRules": [rule("DeleteCluster", 10, "FAILED", "Failed")]},
                   "rayClusterSpec": basic()}, None, "error"),
    ("1913-1929", {"deletionStrategy": {"deletionRules": [rule("DeleteCluster", 10, None)]},
                   "rayClusterSpec": basic()}, None, "error"),
    ("1931-1954", {"deletionStrategy": {"deletionRules": [rule("DeleteCluster", 10, None, "Failed"),
                                                          rule("DeleteCluster", 20, None, "Failed")]},
                   "rayClusterSpec": basic()}, None, "error"),
    ("1956-1979", {"deletionStrategy": {"deletionRules": [rule("DeleteWorkers", 10, "FAILED"),
                                                          rule("DeleteCluster", 20, None, "Failed")]},
                   "rayClusterSpec": basic()}, None, "ok"),
    ("1981-2004", {"deletionStrategy": {"deletionRules": [rule("DeleteWorkers", 20, None, "Failed"),
                                                          rule("DeleteCluster", 10, None, "Failed")]},
                   "rayClusterSpec": basic()}, None, "error"),
]


@pytest.mark.parametrize("lines,spec,gates,want", JOB, ids=[c[0] for c in JOB])
def test_ray_job_spec(lines: str, spec: dict[str, Any], gates: dict[str, bool] | None, want: str) -> None:
    judge(kv.job_spec({"metadata": {"name": "job"}, "spec": spec}, gates), want, f"{TEST}:{lines}")


def test_deletion_strategy_needs_its_gate_where_it_is_off() -> None:
    """validation.go:763-765: with RayJobDeletionPolicy off (on by default) any deletionStrategy is refused."""
    spec = {"deletionStrategy": {"deletionRules": [rule("DeleteSelf", 10)]}, "rayClusterSpec": basic()}
    assert not kv.job_spec({"spec": spec})
    assert [c.field for c in kv.job_spec({"spec": spec}, OFF)] == ["spec.deletionStrategy"]


@pytest.mark.parametrize("version,parsed", [("2.52.0", (2, 52, 0)), ("v2.9", (2, 9)), ("2.52.0rc1", (2, 52, 0)),
                                            ("2", None), ("invalid-version", None), ("02.1", None), ("", None)])
def test_parse_generic(version: str, parsed: tuple[int, ...] | None) -> None:
    """k8s.io/apimachinery v0.36.0 version.ParseGeneric: two or more numbers, no leading zero in the first."""
    assert kv.parse_generic(version) == parsed


# --- through the pipeline: TOPO011 errors and gated warnings, TOPO012's line, the security rules, no torchrun rules

def validate(objs: list[dict[str, Any]], env: Environment | None = None) -> engine.Unit:
    unit = engine.Unit("ray.yaml", "file", [Manifest(o, "ray.yaml", i) for i, o in enumerate(objs)])
    unit.environment = env
    engine.validate([unit], BuiltinValidator())
    return unit


def cluster_obj(**spec: Any) -> dict[str, Any]:
    container = {"name": "ray-head", "image": "rayproject/ray:2.52.0"}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "raycluster"},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": [container]}}}, **spec}}


def test_a_refused_cluster_is_a_topo011_error_and_the_world_is_said_unchecked() -> None:
    unit = validate([cluster_obj(enableInTreeAutoscaling=True, autoscalerOptions={"idleTimeoutSeconds": -1})])
    errors = [p for p in unit.problems if p.severity == ERROR]
    assert [(p.rule, p.field) for p in errors] == [("TOPO011", "spec.autoscalerOptions.idleTimeoutSeconds")]
    said = [p for p in unit.problems if p.rule == "TOPO012"]
    assert len(said) == 1 and said[0].severity == INFO and "not by torchrun" in said[0].message
    # a cluster that runs no Ray Train (KubeRay's ray-job.kueue-toy-sample.yaml) is not said to hold such a world
    assert "and any Ray Train world over them" in said[0].message
    assert not [p for p in unit.problems if p.rule == "MODEL"]
    # the security rules still read the head's template
    assert any(p.rule.startswith("SEC") and p.field.startswith("spec.headGroupSpec.template") for p in unit.problems)


def test_no_torchrun_rule_reads_ray_pods() -> None:
    head = {"name": "ray-head", "image": "rayproject/ray:2.52.0",
            "command": ["torchrun", "--nnodes=4", "train.py"]}
    obj = cluster_obj()
    obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"] = [head]
    unit = validate([obj])
    assert not unit.workloads
    assert not [p for p in unit.problems if p.rule.startswith(("TOPO00", "RDZV", "ELASTIC", "NCCL"))]


@pytest.mark.parametrize("gates,severity", [(None, WARNING), ({"RayClusterNetworkPolicy": False}, ERROR),
                                            ({"RayClusterNetworkPolicy": True}, None)])
def test_a_gate_off_by_default_is_a_warning_an_error_where_declared_off(gates: dict[str, bool] | None,
                                                                        severity: str | None) -> None:
    env = Environment("ray-env", "test", feature_gates={"kuberay": gates}) if gates is not None else None
    unit = validate([cluster_obj(networkPolicy={"mode": "DenyAll"})], env)
    found = [p for p in unit.problems if p.rule == "TOPO011"]
    assert [p.severity for p in found] == ([severity] if severity else [])
    assert BY_ID["kuberay"].feature_gates["RayClusterNetworkPolicy"] is False


def test_another_controller_s_object_is_not_validated_here() -> None:
    unit = validate([cluster_obj(managedBy="kueue.x-k8s.io/multikueue", tlsOptions={"enabled": True})])
    assert not [p for p in unit.problems if p.rule == "TOPO011"]
    said = [p.message for p in unit.problems if p.rule == "TOPO012"]
    assert len(said) == 1 and "KubeRay skips" in said[0]


def test_duplicate_worker_group_names_are_the_webhook_s_warning() -> None:
    group = {"groupName": "g", "minReplicas": 1, "maxReplicas": 1,
             "template": {"spec": {"containers": [{"name": "w", "image": "rayproject/ray:2.52.0"}]}}}
    unit = validate([cluster_obj(workerGroupSpecs=[group, dict(group)])])
    found = [p for p in unit.problems if p.rule == "TOPO011"]
    assert [(p.severity, p.field) for p in found] == [(WARNING, "spec.workerGroupSpecs[1].groupName")]


def test_a_ray_job_an_appwrapper_creates_is_checked_and_reported_against_the_appwrapper() -> None:
    """An AppWrapper's component is a child checked by its own launcher: KubeRay's refusals of a RayJob component
    are TOPO011 errors on the AppWrapper, at the component's field (launchers.expand, engine.to_parents)."""
    path = Path(__file__).parent / "conformance" / "appwrapper" / \
        "accept-podsets-are-inferred-for-pytorchjobs-rayclusters-and-rayjobs.yaml"
    objs = yaml.safe_load(path.read_text())["input"]
    ray = next(c["template"] for o in objs for c in o["spec"]["components"] if c["template"]["kind"] == "RayJob")
    assert not [p for p in validate(objs).problems if "KubeRay controller" in p.message]
    ray["spec"]["rayClusterSpec"]["autoscalerOptions"] = {"idleTimeoutSeconds": -1}
    found = [p for p in validate(objs).problems if "KubeRay controller" in p.message]
    assert [(p.rule, p.severity, p.obj, p.field) for p in found] == [
        ("TOPO011", ERROR, "AppWrapper/default/aw-test",
         "spec.components[1].template.spec.rayClusterSpec.autoscalerOptions.idleTimeoutSeconds")]


@pytest.mark.parametrize("path", CONFORMANCE, ids=[p.name for p in CONFORMANCE])
def test_conformance_fixture_by_topo011(path: Path) -> None:
    """Each tests/conformance/kuberay/ case: refused ones get a TOPO011 error (not only a schema one), admitted ones
    no error and no TOPO011 finding at all."""
    doc = yaml.safe_load(path.read_text())
    unit = validate(doc["input"])
    errors = [p for p in unit.problems if p.severity == ERROR]
    if doc["expect"].get("rejected"):
        assert any(p.rule == "TOPO011" for p in errors), json.dumps([p.line() for p in unit.problems])
    else:
        assert not errors and not [p for p in unit.problems if p.rule == "TOPO011"], [p.line() for p in errors]


# ------------------------------------------------- the Ray container's command as KubeRay builds the pod (IMG003)

def _cluster(kind: str, command: list[str] | None, object_note: str | None = None,
             template_note: str | None = None) -> Manifest:
    container: dict[str, Any] = {"name": "ray-head", "image": "rayproject/ray:2.52.0"}
    if command is not None:
        container["command"] = command
    group: dict[str, Any] = {"template": {"spec": {"containers": [container, {"name": "side", "image": "x:1",
                                                                             "command": ["sleep 1"]}]}}}
    if template_note is not None:
        group["template"]["metadata"] = {"annotations": {"ray.io/overwrite-container-cmd": template_note}}
    spec: dict[str, Any] = {"headGroupSpec": group}
    meta: dict[str, Any] = {"name": "c"}
    if object_note is not None:
        meta["annotations"] = {"ray.io/overwrite-container-cmd": object_note}
    body = {"RayCluster": spec, "RayJob": {"rayClusterSpec": spec}, "RayService": {"rayClusterConfig": spec}}[kind]
    return Manifest({"apiVersion": "ray.io/v1", "kind": kind, "metadata": meta, "spec": body}, "x.yaml", 0)


def _head(m: Manifest) -> dict[str, Any]:
    from policies import launchers

    [(field, template)] = [(f, t) for f, t in launchers.pod_templates(m) if f.endswith("headGroupSpec.template")]
    return template["spec"]["containers"][0]


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob", "RayService"])
def test_the_ray_container_runs_its_command_through_bash_as_kuberay_builds_it(kind: str) -> None:
    """common/pod.go 878-912 at v1.7.0: the Ray container's command and args become words of one bash line before
    KubeRay's own `ray start`; the template as written is unchanged, and other containers keep theirs."""
    m = _cluster(kind, ["echo 123"])
    head = _head(m)
    assert head["command"] == ["/bin/bash", "-c", "--"]
    assert head["args"] == [" echo 123  && ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start"]
    assert "/bin/bash" not in json.dumps(m.obj)  # the manifest as written is unchanged
    assert not _head(_cluster(kind, None))["args"][0].startswith(" ")  # no command: KubeRay's line alone


@pytest.mark.parametrize("kind, object_note, template_note, kept", [
    ("RayCluster", "true", None, True), ("RayCluster", "TRUE", None, True), ("RayJob", "true", None, True),
    ("RayCluster", None, "true", True), ("RayService", None, "true", True), ("RayCluster", "false", None, False),
    ("RayService", "true", None, True),  # copied to its RayCluster: rayservice_controller.go 1511-1536
    ("RayJob", None, None, False),
])
def test_overwrite_container_cmd_keeps_the_command(kind: str, object_note: str | None, template_note: str | None,
                                                   kept: bool) -> None:
    head = _head(_cluster(kind, ["echo 1"], object_note, template_note))
    assert (head["command"] == ["echo 1"]) is kept


def test_a_command_that_starts_ray_itself_is_kept() -> None:
    """BuildPod leaves a command containing `ray start` as it is: one word with spaces is then IMG003's error."""
    head = _head(_cluster("RayCluster", ["ray start --head --block"]))
    assert head["command"] == ["ray start --head --block"] and "args" not in head
