"""Argo CD sees the run: every kind the validator models has a health check (the expected kinds are read from the
launcher registry, policies/launchers REGISTRY, less the few listed in NO_HEALTH_CHECK with the reason, so a kind the
validator comes to model fails test_every_training_kind_has_a_health_check until it has a check or a line there);
each health check, and the suspend/resume actions, return on their fixtures what their health_test.yaml and
action_test.yaml say, run in a real Lua 5.1 as Argo CD v3.5.1 runs a script from argocd-cm (tests/argocd_lua.py);
argocd-cm.yaml carries the files' text; docs/gitops.md shows what they return."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from argocd_lua import action, health
from conftest import REPO
from policies.argocd import custom as argocd_custom, identity
from policies.launchers import REGISTRY

HEALTH = argocd_custom.HEALTH
ACTIONS = argocd_custom.ACTIONS
# The kinds the validator models (policies/launchers' registry) that get no health check here, and why. Every other
# modelled kind gets one: Argo CD v3.5.1's resource_customizations/ has no kubeflow.org, trainer.kubeflow.org,
# jobset.x-k8s.io, leaderworkerset.x-k8s.io, ray.io, batch.volcano.sh or workload.codeflare.dev folder, and an object
# without a health check shows Healthy.
NO_HEALTH_CHECK = {
    ("batch", "Job"): "Argo CD's own check (gitops-engine pkg/health)",
    ("apps", "StatefulSet"): "Argo CD's own check (gitops-engine pkg/health)",
    ("trainer.kubeflow.org", "TrainingRuntime"): "a template TrainJobs name: it starts no pods",
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): "a template TrainJobs name: it starts no pods",
    ("ray.io", "RayCronJob"): "a schedule: its status holds only lastScheduleTime (kuberay v1.7.0 raycronjob_types.go), "
                              "nothing that tells a failed run; each RayJob it makes has the RayJob check",
}
TRAINING_KINDS = set(REGISTRY) - set(NO_HEALTH_CHECK)
# Health states a kind's fixtures do not show, and why (every other kind's show Progressing, Healthy, Degraded and
# Suspended).
NOT_SHOWN = {
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): ({"Degraded", "Suspended"}, "the LWS controller writes no failed "
                                                      "or suspended state (its health.lua says why)"),
    ("kubeflow.org", "Experiment"): ({"Suspended"}, "Katib v0.19.0's Experiment has no suspend"),
    ("ray.io", "RayCluster"): ({"Degraded"}, "its one failure, ReplicaFailure, has a two-line message (errors.Join) "
                                             "a docs table row cannot hold: test_a_raycluster_replica_failure_is_degraded"),
}
# gitops-engine's HealthStatusCode values (isValidHealthStatusCode, util/lua/lua.go at v3.5.1).
ARGO_STATUSES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}


def _load(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _health_cases():
    for folder in argocd_custom.health_folders():
        for test in _load(folder / "health_test.yaml")["tests"]:
            yield pytest.param(folder, test, id=f"{folder.name}/{Path(test['inputPath']).stem}")


def lua_outcome(folder: Path, test: dict) -> tuple[str, str]:
    got = health((folder / "health.lua").read_text(encoding="utf-8"), _load(folder / test["inputPath"]))
    return got["status"], got["message"]


def test_lupa_is_a_real_lua_51():
    import lupa
    import lupa.lua51

    assert lupa.__version__ == "2.8"
    assert lupa.lua51.LuaRuntime().eval("_VERSION") == "Lua 5.1"


def test_every_training_kind_has_a_health_check():
    assert set(NO_HEALTH_CHECK) <= set(REGISTRY), "NO_HEALTH_CHECK names a kind the validator no longer models"
    assert {argocd_custom.group_kind(f) for f in argocd_custom.health_folders()} == TRAINING_KINDS


@pytest.mark.parametrize("folder, test", list(_health_cases()))
def test_health_check_returns_what_its_fixture_expects(folder, test):
    want = test["healthStatus"]
    assert want["status"] in ARGO_STATUSES
    assert lua_outcome(folder, test) == (want["status"], want["message"])


@pytest.mark.parametrize("folder", argocd_custom.health_folders(), ids=lambda f: f.name)
def test_every_fixture_is_tested_and_shows_the_kind(folder):
    tests = _load(folder / "health_test.yaml")["tests"]
    listed = sorted(t["inputPath"] for t in tests)
    assert listed == sorted(f"testdata/{p.name}" for p in (folder / "testdata").glob("*.yaml"))
    group, kind = argocd_custom.group_kind(folder)
    for path in listed:
        obj = _load(folder / path)
        assert obj["kind"] == kind and obj["apiVersion"].split("/")[0] == group, path
        assert argocd_custom.stage(folder / path), f"{path}: the first comment line names the stage"
    statuses = {t["healthStatus"]["status"] for t in tests}
    not_shown, _ = NOT_SHOWN.get((group, kind), (set(), ""))
    assert {"Progressing", "Healthy", "Degraded", "Suspended"} - not_shown <= statuses
    assert not statuses & not_shown, "NOT_SHOWN lists a state the fixtures show"


def test_scripts_cite_the_upstream_tag():
    for folder in argocd_custom.health_folders():
        head = (folder / "health.lua").read_text(encoding="utf-8").split("local ", 1)[0]
        assert re.search(r"\bv\d+\.\d+\.\d+\b", head) and ".go" in head, folder.name


def test_a_raycluster_replica_failure_is_degraded_with_the_controllers_message():
    """KubeRay v1.7.0 sets ReplicaFailure when a Pod cannot be created or deleted, its message the reconcile error:
    errors.Join(utils.ErrFailedCreateWorkerPod, err), so the reason, a newline and the API server's error
    (raycluster_controller.go calculateStatus, utils/constant.go). Checked here on the ready fixture rather than as a
    fixture of its own, whose message would break its row of the docs table."""
    folder = HEALTH / "ray.io_RayCluster"
    obj = _load(folder / "testdata/ready.yaml")
    message = ('FailedCreateWorkerPod\npods "ddp-ray-workers-worker-7c9xk" is forbidden: exceeded quota: team-quota, '
               "requested: cpu=1, used: cpu=8, limited: cpu=8")
    obj["status"]["conditions"].append({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreateWorkerPod",
                                        "message": message, "lastTransitionTime": "2026-09-01T10:20:00Z"})
    got = health((folder / "health.lua").read_text(encoding="utf-8"), obj)
    assert got == {"status": "Degraded", "message": message}


@pytest.mark.parametrize("overlay, folder", [("pytorchjob", "kubeflow.org_PyTorchJob"),
                                             ("trainjob", "trainer.kubeflow.org_TrainJob")])
def test_the_repositorys_own_failed_run_reads_degraded_with_the_controllers_message(overlay, folder):
    """The failed fixture is the render of overlays/kind-cpu/<overlay> plus the status its controller writes."""
    from policies.report.engine import collect

    (unit,) = collect([str(REPO / "overlays/kind-cpu" / overlay)], REPO / "overlays")
    group, kind = argocd_custom.group_kind(HEALTH / folder)
    (rendered,) = [m.obj for m in unit.manifests if m.kind == kind]
    # The fixture is the template's render: a fork's make init put its own image repository where it says the
    # example's (tests/test_init.py); read the render as the template's before comparing.
    own = identity.load(REPO).image
    rendered = json.loads(json.dumps(rendered).replace(f'"{own}:', f'"{identity.EXAMPLE_IMAGE}:'))
    fixture = _load(HEALTH / folder / "testdata/failed.yaml")
    status = fixture.pop("status")
    fixture["metadata"].pop("namespace")  # the Application's destination namespace
    assert fixture == rendered
    (failed,) = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed["status"] == "True"
    got = health((HEALTH / folder / "health.lua").read_text(encoding="utf-8"),
                 _load(HEALTH / folder / "testdata/failed.yaml"))
    assert got == {"status": "Degraded", "message": failed["message"]}


# --- actions -----------------------------------------------------------------------------------------------------


def _empty_to_none(value):
    """Argo CD's luajson writes an empty table as [] and cleanReturnedObj restores {} where the input had one."""
    if isinstance(value, dict):
        return {k: _empty_to_none(v) for k, v in value.items()} or None
    if isinstance(value, list):
        return [_empty_to_none(v) for v in value] or None
    return value


def _action_cases(kind: str):
    for folder in argocd_custom.action_folders():
        for test in _load(folder / "action_test.yaml")[kind]:
            yield pytest.param(folder, test, id=f"{folder.name}/{test.get('action', 'discovery')}/"
                                                f"{Path(test['inputPath']).stem}")


@pytest.mark.parametrize("folder, test", list(_action_cases("discoveryTests")))
def test_action_discovery(folder, test):
    got = action((folder / "discovery.lua").read_text(encoding="utf-8"), _load(folder / test["inputPath"]))
    # Argo CD turns the returned map into a list of actions (ExecuteResourceActionDiscovery); order is not kept.
    listed = [] if got == [] else sorted(({"name": name, **fields} for name, fields in got.items()),
                                         key=lambda a: a["name"])
    assert listed == sorted(test["result"], key=lambda a: a["name"])
    for a in listed:
        assert (folder / a["name"] / "action.lua").is_file()


@pytest.mark.parametrize("folder, test", list(_action_cases("actionTests")))
def test_action_returns_the_modified_object(folder, test):
    got = action((folder / test["action"] / "action.lua").read_text(encoding="utf-8"), _load(folder / test["inputPath"]))
    assert _empty_to_none(got) == _empty_to_none(_load(folder / test["expectedOutputPath"]))


def test_argo_cds_built_in_actions_are_not_redefined():
    """Argo CD v3.5.1 ships suspend, resume and terminate for batch/Job (resource_customizations/batch/Job/actions);
    a resource.customizations.actions.batch_Job key would replace them (mergeBuiltinActions is false by default)."""
    assert "batch_Job" not in [f.name for f in argocd_custom.action_folders()]


# --- argocd-cm.yaml carries the files ------------------------------------------------------------------------------


def test_argocd_cm_carries_exactly_the_files():
    data = _load(argocd_custom.CONFIGMAP)["data"]
    keys = {k for k in data if k.startswith("resource.customizations.")}
    want = {f"resource.customizations.health.{f.name}" for f in argocd_custom.health_folders()}
    want |= {f"resource.customizations.actions.{f.name}" for f in argocd_custom.action_folders()}
    assert keys == want
    for folder in argocd_custom.health_folders():
        assert data[f"resource.customizations.health.{folder.name}"] == (folder / "health.lua").read_text("utf-8")
    for folder in argocd_custom.action_folders():
        actions = yaml.safe_load(data[f"resource.customizations.actions.{folder.name}"])
        assert actions["discovery.lua"] == (folder / "discovery.lua").read_text(encoding="utf-8")
        assert {d["name"]: d["action.lua"] for d in actions["definitions"]} == {
            name: (folder / name / "action.lua").read_text(encoding="utf-8") for name in argocd_custom.action_names(folder)}
        assert "mergeBuiltinActions" not in actions
    assert not any(k.startswith("resource.customizations.useOpenLibs") for k in data)  # the scripts need no string lib
    assert not argocd_custom.update_configmap(write=False), "run `make docs`"


# --- docs/gitops.md shows what the scripts return --------------------------------------------------------------------


def test_the_docs_table_is_what_the_scripts_return():
    text = (REPO / "docs/gitops.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- generated by make docs: argocd-health -->\n(.*?)<!-- end of generated: argocd-health -->",
                  text, re.S)
    assert m, "docs/gitops.md has no argocd-health block"
    assert m.group(1) == argocd_custom.health_table(lua_outcome)


# --- notifications: opt-in ---------------------------------------------------------------------------------------------


def test_notifications_are_opt_in_and_send_templates_they_define():
    path = REPO / "argocd/notifications/argocd-notifications-cm.yaml"
    kustomization = _load(REPO / "argocd/kustomization.yaml")
    assert not any("notifications" in r for r in kustomization["resources"])
    cm = _load(path)
    assert (cm["kind"], cm["metadata"]["name"]) == ("ConfigMap", "argocd-notifications-cm")
    data = cm["data"]
    triggers = {k.split(".", 1)[1]: yaml.safe_load(v) for k, v in data.items() if k.startswith("trigger.")}
    templates = {k.split(".", 1)[1]: yaml.safe_load(v) for k, v in data.items() if k.startswith("template.")}
    assert set(triggers) == {"on-training-run-failed", "on-training-run-finished"}
    wanted = {"on-training-run-failed": "'Degraded'", "on-training-run-finished": "'Healthy'"}
    for name, conditions in triggers.items():
        (cond,) = conditions
        assert wanted[name] in cond["when"] and "app.status.health.status" in cond["when"]
        assert cond["oncePer"] and set(cond["send"]) <= set(templates)
    for template in templates.values():
        assert "{{.app.metadata.name}}" in template["message"]
    assert "docs/gitops.md#notifications-opt-in" in path.read_text(encoding="utf-8")
    assert "### Notifications (opt-in)" in (REPO / "docs/gitops.md").read_text(encoding="utf-8")
