"""KubeRay's RayService and RayCronJob admission (policies/launchers/kuberay_service.py, kuberay_cron.py) against
upstream's own table tests: ray-project/kuberay v1.7.0 ray-operator/controllers/ray/utils/validation_test.go, each
case named by its line range there; and ARGO002 on a RayJob, which only a DeleteSelf policy deletes
(rayjob_controller.go:420-444, 1413-1573). Expectations as in test_kuberay.py: "error", "ok", "gate:<name>"."""
from __future__ import annotations

import os
import subprocess
import sys

from typing import Any

import pytest

from conftest import REPO
from policies.kube.objects import ERROR, WARNING, Manifest
from policies import launchers
from policies.launchers import kuberay_cron as kc, kuberay_service as ks
from policies.rules.kit import Environment
from test_kuberay import basic, judge, template, validate

TEST = "validation_test.go"
ON = {"RayCronJob": True}  # the RayCronJob controller runs only with its gate (main.go:353-359)


def service(spec: dict[str, Any], name: str = "rayservice", annotations: dict[str, str] | None = None,
            ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta, "spec": spec}


def head() -> dict[str, Any]:
    return {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head",
                                                                    "image": "rayproject/ray:2.52.0"}]}}}}


@pytest.mark.parametrize("lines,spec,want", [
    # TestValidateRayServiceSpec (2042-2122).
    ("2051-2065", {"rayClusterConfig": {"headGroupSpec": {"headService": {"metadata": {"name": "my-head-service"}}}}},
     "error"),
    ("2066-2072", {"rayClusterConfig": basic()}, "ok"),
    ("2073-2082", {"upgradeStrategy": {"type": "invalidStrategy"}, "rayClusterConfig": basic()}, "error"),
    ("2083-2087", {}, "error"),
    ("2088-2095", {"rayClusterConfig": basic(), "rayClusterDeletionDelaySeconds": -1}, "error"),
    ("2096-2107", {"rayClusterConfig": {"authOptions": {"mode": "token", "enableK8sTokenAuth": True}}}, "error"),
    # The upgrade types validation.go:693-700 admits.
    ("693-700 NewCluster", {"upgradeStrategy": {"type": "NewCluster"}, "rayClusterConfig": basic()}, "ok"),
    ("693-700 None", {"upgradeStrategy": {"type": "None"}, "rayClusterConfig": basic()}, "ok"),
], ids=lambda v: v if isinstance(v, str) and v[:1].isdigit() else None)
def test_ray_service_spec(lines: str, spec: dict[str, Any], want: str) -> None:
    judge(ks.service_checks(service(spec)), want, f"{TEST}:{lines}")


def test_the_ray_cluster_config_is_validated_as_a_ray_cluster_spec_with_the_service_s_annotations() -> None:
    """validation.go:685-687: ValidateRayClusterSpec(&rayService.Spec.RayClusterSpec, rayService.Annotations)."""
    found = ks.service_checks(service({"rayClusterConfig": basic(gcsFaultToleranceOptions={})},
                                      annotations={"ray.io/ft-enabled": "true"}))
    assert [c.field for c in found] == ["spec.rayClusterConfig.gcsFaultToleranceOptions"]
    assert found[0].message.endswith("the KubeRay controller fails the RayService (ValidationFailed; no RayCluster "
                                     "is created)")
    gated = ks.service_checks(service({"rayClusterConfig": basic(tlsOptions={"enabled": True})}))
    assert [(c.severity, c.gate) for c in gated] == [(WARNING, ("kuberay", "RayClusterMTLS"))]


@pytest.mark.parametrize("lines,name,timeout,want", [
    # TestValidateRayServiceMetadata (2124-2189).
    ("2125-2128", "j" * 48, None, "error"), ("2130-2133", "1" * 47, None, "error"),
    ("2135-2138", "j" * 47, None, "ok"), ("2141-2147", "valid-service", "5m", "ok"),
    ("2149-2155", "valid-service", "300", "ok"), ("2158-2164", "invalid-service", "0", "error"),
    ("2166-2172", "invalid-service", "-100", "error"), ("2174-2180", "invalid-service", "-5m", "error"),
    ("2182-2188", "invalid-service", "invalid", "error"),
], ids=lambda v: v if isinstance(v, str) and v[:1].isdigit() else None)
def test_ray_service_metadata(lines: str, name: str, timeout: str | None, want: str) -> None:
    notes = {ks.INITIALIZING_TIMEOUT: timeout} if timeout is not None else None
    judge(ks.service_checks(service({"rayClusterConfig": basic()}, name, notes)), want, f"{TEST}:{lines}")


@pytest.mark.parametrize("text,want", [
    ("5m", "positive"), ("300", "positive"), ("0", "must be a positive duration"), ("-100", "positive integer"),
    ("-5m", "must be a positive duration"), ("invalid", "invalid format"), ("1h30m", "positive"), ("1.5h", "positive"),
    (".5s", "positive"), ("5", "positive"), ("5 m", "invalid format"), ("m", "invalid format"), ("", "positive")])
def test_initializing_timeout_reads_go_durations_and_seconds(text: str, want: str) -> None:
    """validateInitializingTimeout (validation.go:651-678): time.ParseDuration first, then strconv.Atoi."""
    why = ks.timeout_problem({ks.INITIALIZING_TIMEOUT: text})
    assert (why is None) if want == "positive" else (why is not None and want in why), why


def upgrade(surge: int | None = 50, step: int | None = 50, interval: int | None = 10, gateway: str = "istio",
            scaling: bool = True, options: bool = True) -> dict[str, Any]:
    """TestValidateClusterUpgradeOptions's RayService (2278-2305): the basic cluster, autoscaling as given, the type
    NewClusterWithIncrementalUpgrade with the options set (none where the case sets none)."""
    given = {k: v for k, v in (("maxSurgePercent", surge), ("stepSizePercent", step), ("intervalSeconds", interval),
                               ("gatewayClassName", gateway)) if v}
    strategy: dict[str, Any] = {"type": ks.INCREMENTAL, **({"clusterUpgradeOptions": given} if options else {})}
    return {"rayClusterConfig": basic(enableInTreeAutoscaling=scaling), "upgradeStrategy": strategy}


@pytest.mark.parametrize("lines,spec,want", [
    # TestValidateClusterUpgradeOptions (2199-2315).
    ("2210-2218", upgrade(), "ok"), ("2219-2227", upgrade(scaling=False), "error"),
    ("2228-2232", upgrade(options=False), "error"), ("2233-2241", upgrade(surge=200), "error"),
    ("2242-2249", upgrade(step=None), "error"), ("2250-2258", upgrade(step=75), "error"),
    ("2259-2267", upgrade(interval=0), "error"), ("2268-2275", upgrade(gateway=""), "error"),
    # maxSurgePercent unset: the CRD defaults it to 100 (validation.go:727).
    ("727 default", upgrade(surge=None), "ok"),
], ids=lambda v: v if isinstance(v, str) and v[:1].isdigit() else None)
def test_cluster_upgrade_options(lines: str, spec: dict[str, Any], want: str) -> None:
    judge(ks.service_checks(service(spec)), want, f"{TEST}:{lines}")


def test_incremental_upgrade_is_checked_only_with_its_gate() -> None:
    """utils.IsIncrementalUpgradeEnabled (util.go:917-923): with RayServiceIncrementalUpgrade off (on by default)
    the options are not read."""
    spec = upgrade(scaling=False)
    assert ks.service_checks(service(spec)) and not ks.service_checks(service(spec), {
        "RayServiceIncrementalUpgrade": False})


# --- RayCronJob

def cron(name: str = "test-cronjob", schedule: str = "*/5 * * * *", zone: str | None = None,
         job: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedule": schedule, "jobTemplate": job if job is not None else {
        "entrypoint": "python test.py", "rayClusterSpec": head()}}
    if zone is not None:
        spec["timeZone"] = zone
    return {"apiVersion": "ray.io/v1", "kind": "RayCronJob", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize("lines,obj,want", [
    # TestValidateRayCronJobSpec (2742-3056), run with the RayCronJob gate on (its controller needs it).
    ("2749-2778", cron(), "ok"), ("2779-2809", cron(schedule="invalid cron"), "error"),
    ("2810-2825", cron(job={}), "error"),
    ("2826-2851", cron(job={"entrypoint": "python test.py", "rayClusterSpec": {"headGroupSpec": {"template": {
        "spec": {"containers": []}}}}}), "error"),
    ("2852-2882", cron(schedule="0 9 * * *", zone="Asia/Taipei"), "ok"),
    ("2883-2913", cron(schedule="0 0 * * *", zone="UTC"), "ok"),
    ("2914-2945", cron(zone="Invalid/Zone"), "error"), ("2946-2976", cron(schedule="TZ=UTC */5 * * * *"), "error"),
    ("2977-3007", cron(schedule="CRON_TZ=UTC */5 * * * *"), "error"), ("3008-3038", cron(name="a" * 37), "error"),
    # validation.go:984-987: an empty timeZone (the CRD's minLength refuses it too).
    ("984-987", cron(zone=""), "error"),
], ids=lambda v: v if isinstance(v, str) and v[:1].isdigit() else None)
def test_ray_cron_job_spec(lines: str, obj: dict[str, Any], want: str) -> None:
    judge(kc.cron_checks(obj, ON), want, f"{TEST}:{lines}")


def test_without_its_gate_a_ray_cron_job_is_a_warning_carrying_it() -> None:
    found = kc.cron_checks(cron())
    assert [(c.field, c.severity, c.gate) for c in found] == [("kind", WARNING, ("kuberay", "RayCronJob"))]


def test_the_job_template_is_refused_as_the_ray_cron_job_s() -> None:
    """validation.go:993-1000: ValidateRayJobSpec on the template (no annotations); its refusals are said under
    spec.jobTemplate and end with what the RayCronJob controller does."""
    found = kc.cron_checks(cron(job={"suspend": True, "rayClusterSpec": basic(), "deletionStrategy": {
        "deletionRules": [{"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED", "ttlSeconds": -1}}]}}), ON)
    assert [c.field for c in found] == ["spec.jobTemplate.suspend",
                                        "spec.jobTemplate.deletionStrategy.deletionRules[0].condition.ttlSeconds"]
    assert all(c.message.endswith("refuses the RayCronJob (a Warning event; no RayJob is created)") for c in found)


def test_a_name_that_makes_no_dns_1035_ray_job_name_is_refused() -> None:
    """The RayJobs are named <name>-<minutes> (raycronjob_controller.go:166-168); the RayJob controller fails one whose
    name is no DNS-1035 label (ValidateRayJobMetadata, validation.go:533-541)."""
    assert [c.field for c in kc.cron_checks(cron(name="1nightly"), ON)] == ["metadata.name"]
    assert [c.field for c in kc.cron_checks(cron(name="a.b"), ON)] == ["metadata.name"]
    assert not kc.cron_checks(cron(name="a" * 36), ON)


def test_a_time_zone_this_machine_cannot_look_up_is_said_not_checked(monkeypatch) -> None:
    """Go's controller carries its time zone database (validation.go:9 imports time/tzdata); a machine without one
    cannot tell a zone's name: an info line, never a silent pass or a claimed refusal."""
    import zoneinfo

    def missing(name: str) -> None:
        raise zoneinfo.ZoneInfoNotFoundError(name)

    monkeypatch.setattr(zoneinfo, "ZoneInfo", missing)
    monkeypatch.setattr(zoneinfo, "available_timezones", set)
    [said] = [c for c in kc.cron_checks(cron(zone="Asia/Taipei"), ON) if c.field == "spec.timeZone"]
    assert said.severity == "info" and "was not checked" in said.message
    assert not [c for c in kc.cron_checks(cron(zone="UTC"), ON) if c.field == "spec.timeZone"]


def test_without_the_machine_s_time_zones_the_declared_tzdata_still_checks_them(tmp_path) -> None:
    """python:3.11-slim on Debian trixie has no /usr/share/zoneinfo: zoneinfo then reads the tzdata package, which
    the package declares (pyproject.toml, requirements.txt). With the machine's database hidden (PYTHONTZPATH
    empty, tzdata's own path), a zone is still told from a name that is none."""
    script = ("import zoneinfo, sys; from policies.launchers import kuberay_cron as kc; "
              "assert zoneinfo.TZPATH == (), zoneinfo.TZPATH; "
              "print(kc.time_zone_known('Asia/Taipei'), kc.time_zone_known('Invalid/Zone'))")
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONTZPATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False"]


def test_a_generate_name_is_read_as_the_name_the_api_server_makes() -> None:
    obj = cron()
    obj["metadata"] = {"generateName": "a" * 32}  # 37 characters once the API server adds its 5
    assert [c.field for c in kc.cron_checks(obj, ON)] == ["metadata.generateName"]
    obj["metadata"] = {"generateName": "nightly-"}
    assert not kc.cron_checks(obj, ON)


@pytest.mark.parametrize("schedule,ok", [
    ("*/5 * * * *", True), ("0 9 * * 1-5", True), ("0 0 1 jan,JUL *", True), ("0 0 * * sun", True),
    ("@daily", True), ("@every 1h30m", True), ("? * * * *", True), ("5/15 * * * *", True), ("1,,2 * * * *", True),
    ("", False), ("invalid cron", False), ("* * * *", False), ("* * * * * *", False), ("60 * * * *", False),
    ("* 24 * * *", False), ("* * 0 * *", False), ("* * * 13 *", False), ("* * * * 7", False),
    ("5-1 * * * *", False), ("*/0 * * * *", False), ("1-2-3 * * * *", False), ("1/2/3 * * * *", False),
    ("@every 1d", False), ("@fortnightly", False), ("-1 * * * *", False), ("x * * * *", False)])
def test_schedule_as_robfig_cron_parses_it(schedule: str, ok: bool) -> None:
    """cron.ParseStandard (robfig/cron v3.0.1): five fields within minute 0-59, hour 0-23, day 1-31, month 1-12
    (or jan-dec), weekday 0-6 (or sun-sat), or a descriptor."""
    assert (kc.schedule_problem(schedule) is None) is ok, kc.schedule_problem(schedule)


# --- through the pipeline

def test_a_refused_ray_service_is_a_topo011_error() -> None:
    obj = service({"rayClusterConfig": head(), "rayClusterDeletionDelaySeconds": 5,
                   "upgradeStrategy": {"type": "Rolling"}})
    unit = validate([obj])
    found = [(p.rule, p.severity, p.field) for p in unit.problems if p.rule == "TOPO011"]
    assert found == [("TOPO011", ERROR, "spec.upgradeStrategy.type")]
    assert not [p for p in unit.problems if p.rule == "MODEL"]  # modelled now: no "not modelled" line
    assert [p for p in unit.problems if p.rule == "TOPO012"]


def test_a_ray_service_another_controller_manages_is_not_validated_here() -> None:
    obj = service({"rayClusterConfig": head(), "managedBy": "kueue.x-k8s.io/multikueue",
                   "upgradeStrategy": {"type": "Rolling"}})
    assert not [p for p in validate([obj]).problems if p.rule == "TOPO011"]


@pytest.mark.parametrize("gates,severity", [(None, WARNING), ({"RayCronJob": False}, ERROR), ({"RayCronJob": True}, None)])
def test_a_ray_cron_job_s_gate_under_the_environment(gates: dict[str, bool] | None, severity: str | None) -> None:
    env = Environment("ray-env", "test", feature_gates={"kuberay": gates}) if gates is not None else None
    found = [p for p in validate([cron()], env).problems if p.rule == "TOPO011"]
    assert [p.severity for p in found] == ([severity] if severity else [])


def test_a_ray_cron_job_s_templates_reach_the_pod_rules() -> None:
    m = Manifest(cron(job={"rayClusterSpec": head(), "submitterPodTemplate": template()}), "x.yaml", 0)
    fields = [f for f, t in launchers.pod_templates(m) if t is not None]
    assert fields == ["spec.jobTemplate.rayClusterSpec.headGroupSpec.template",
                      "spec.jobTemplate.submitterPodTemplate"]
    unit = validate([cron()])
    assert any(p.rule.startswith("SEC") and p.field.startswith("spec.jobTemplate.rayClusterSpec.headGroupSpec")
               for p in unit.problems)


def test_a_ray_cron_job_s_own_overwrite_annotation_does_not_reach_its_ray_jobs() -> None:
    """constructRayJob (raycronjob_controller.go:170-191) gives each RayJob only KubeRay's own annotation."""
    obj = cron(job={"rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": [
        {"name": "ray-head", "image": "rayproject/ray:2.52.0", "command": ["echo 1"]}]}}}}})
    obj["metadata"]["annotations"] = {"ray.io/overwrite-container-cmd": "true"}
    [(_, t)] = [(f, t) for f, t in launchers.pod_templates(Manifest(obj, "x.yaml", 0)) if f.endswith("headGroupSpec"
                                                                                                   ".template")]
    assert t["spec"]["containers"][0]["command"] == ["/bin/bash", "-c", "--"]


# --- ARGO002: only a RayJob that deletes itself

def ray_job(**spec: Any) -> Manifest:
    body = {"entrypoint": "python train.py", "rayClusterSpec": head(), **spec}
    return Manifest({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job"}, "spec": body},
                    "x.yaml", 0)


def rule(policy: str, ttl: int | None = 30) -> dict[str, Any]:
    return {"policy": policy, "condition": {"jobStatus": "SUCCEEDED", **({"ttlSeconds": ttl} if ttl is not None
                                                                           else {})}}


@pytest.mark.parametrize("spec,found", [
    ({"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 600}, None),  # deletes the RayCluster only
    ({}, None),
    ({"deletionStrategy": {"deletionRules": [rule("DeleteCluster"), rule("DeleteSelf", 60)]}},
     ("spec.deletionStrategy.deletionRules[1].condition.ttlSeconds", 60)),
    ({"deletionStrategy": {"deletionRules": [rule("DeleteSelf", None)]}},
     ("spec.deletionStrategy.deletionRules[0].condition.ttlSeconds", 0)),
    ({"deletionStrategy": {"deletionRules": [rule("DeleteCluster"), rule("DeleteWorkers", 10)]}}, None),
    ({"ttlSecondsAfterFinished": 120, "deletionStrategy": {"onSuccess": {"policy": "DeleteSelf"},
                                                           "onFailure": {"policy": "DeleteNone"}}},
     ("spec.ttlSecondsAfterFinished", 120)),
    ({"ttlSecondsAfterFinished": 120, "deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"},
                                                           "onFailure": {"policy": "DeleteCluster"}}}, None),
    ({"clusterSelector": {"ray.io/cluster": "c"}, "deletionStrategy": {"deletionRules": [rule("DeleteSelf")]}},
     None),  # rayjob_controller.go:429-432: nothing is deleted with a clusterSelector
])
def test_a_ray_job_s_finished_ttl_is_where_it_deletes_itself(spec: dict[str, Any],
                                                             found: tuple[str, int] | None) -> None:
    got = launchers.finished_ttl(ray_job(**spec))
    assert (got[:2] if got else None) == found
