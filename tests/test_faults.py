"""What the kubelet and each controller do after a pod ends (Launcher.after_exit), on the kind-cpu overlays and
on their settings changed one at a time; FAULT= parsing and refusals; the step accounting of metrics.jsonl. Unit
level: no process starts (the runs are in tests/test_simulate_faults.py)."""
from __future__ import annotations

import copy
import functools
import json
import sys

import pytest

from conftest import REPO
from policies.simulate import faults as F
from policies.report.engine import collect
from policies.launchers import Bundle, workloads
from policies.launchers.lifecycle import (FAIL, RECREATE_ALL, RECREATE_POD, RESTART_CONTAINER, SUCCEEDED, PodExit,
                                          RestartCount)
from policies.kube.objects import Manifest

KILLED, TERMINATED, PEER_LOST = 137, 143, 1


@functools.lru_cache(maxsize=None)
def rendered(overlay: str):
    (unit,) = collect([str(REPO / "overlays/kind-cpu" / overlay)], REPO / "overlays")
    return unit.manifests


def workload(overlay: str, mutate=None):
    manifests = [Manifest(copy.deepcopy(m.obj), m.source, m.index) for m in rendered(overlay)]
    if mutate:
        for m in manifests:
            mutate(m.obj)
    bundle = Bundle.of(manifests)
    (w,) = [w for w in workloads(bundle) if w.pods > 1]
    return w, bundle


def decide(overlay, ended, count=None, mutate=None):
    w, bundle = workload(overlay, mutate)
    return w.launcher.after_exit(w, bundle, ended, count or RestartCount())


# --- the overlays as they are -------------------------------------------------------------------------------------

def test_indexed_job_fails_on_a_killed_pod():
    d = decide("indexed-job", PodExit(1, KILLED))
    assert d.action == FAIL and "podFailurePolicy rule 0 FailJob matches exit code 137" in d.why
    assert "pod_failure_policy.go" in d.source


def test_statefulset_restarts_in_place_and_recreates_a_deleted_pod():
    d = decide("statefulset", PodExit(1, KILLED))
    assert d.action == RESTART_CONTAINER and d.delay == 0 and "kubelet.go" in d.source
    # the kubelet's back-off: at once, then 10 s doubling to 300 s
    assert decide("statefulset", PodExit(1, KILLED), RestartCount({1: 1})).delay == 10
    assert decide("statefulset", PodExit(1, KILLED), RestartCount({1: 3})).delay == 40
    assert decide("statefulset", PodExit(1, KILLED), RestartCount({1: 12})).delay == 300
    d = decide("statefulset", PodExit(1, TERMINATED, deleted=True))
    assert d.action == RECREATE_POD and "same name" in d.why


def test_pytorchjob_on_failure_counts_restarts_against_backoff_limit():
    assert decide("pytorchjob", PodExit(1, KILLED), RestartCount({0: 1})).action == RESTART_CONTAINER  # 2 of 3
    d = decide("pytorchjob", PodExit(1, KILLED), RestartCount({0: 1, 1: 1}))  # the third restart reaches 3
    assert d.action == FAIL and "PastBackoffLimit" in d.source


def test_trainjob_fails_through_its_jobset_without_failure_policy():
    d = decide("trainjob", PodExit(1, KILLED))
    assert d.action == FAIL and "no failurePolicy -> JobSet failed" in d.why and "failure_policy.go:53" in d.source


# --- one setting changed ------------------------------------------------------------------------------------------

def no_failure_policy(backoff):
    def mutate(obj):
        if obj["kind"] == "Job":
            obj["spec"].pop("podFailurePolicy", None)
            obj["spec"]["backoffLimit"] = backoff
    return mutate


def test_job_backoff_limit_recreates_then_fails():
    d = decide("indexed-job", PodExit(1, KILLED), mutate=no_failure_policy(2))
    assert d.action == RECREATE_POD and d.delay == 10 and "backoffLimit 2" in d.why
    d = decide("indexed-job", PodExit(1, KILLED), RestartCount(failed_pods={1: 1}), mutate=no_failure_policy(2))
    assert d.action == RECREATE_POD and d.delay == 20
    d = decide("indexed-job", PodExit(1, KILLED), RestartCount(failed_pods={0: 1, 1: 1}), no_failure_policy(2))
    assert d.action == FAIL and "BackoffLimitExceeded" in d.why


def test_job_ignore_rule_on_disruption_is_not_counted():
    def mutate(obj):
        if obj["kind"] == "Job":
            obj["spec"]["podFailurePolicy"]["rules"].insert(0, {
                "action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]})
    d = decide("indexed-job", PodExit(1, TERMINATED, deleted=True), mutate=mutate)
    assert d.action == RECREATE_POD and not d.counted and "Ignore" in d.why
    # a pod killed without being deleted has no DisruptionTarget: the FailJob rule still ends the Job
    assert decide("indexed-job", PodExit(1, KILLED), mutate=mutate).action == FAIL


def test_job_backoff_limit_per_index():
    def mutate(obj):
        if obj["kind"] == "Job":
            obj["spec"].pop("podFailurePolicy", None)
            obj["spec"].pop("backoffLimit", None)
            obj["spec"]["backoffLimitPerIndex"] = 1
    assert decide("indexed-job", PodExit(1, KILLED), mutate=mutate).action == RECREATE_POD
    d = decide("indexed-job", PodExit(1, KILLED), RestartCount(failed_pods={1: 1}), mutate=mutate)
    assert d.action == FAIL and "backoffLimitPerIndex 1" in d.why
    # another index's failures do not count against this one
    assert decide("indexed-job", PodExit(1, KILLED), RestartCount(failed_pods={0: 1}), mutate=mutate).action == \
        RECREATE_POD


def on_failure(backoff):
    def mutate(obj):
        if obj["kind"] == "Job":
            obj["spec"].pop("podFailurePolicy", None)
            obj["spec"]["backoffLimit"] = backoff
            obj["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    return mutate


# kubernetes v1.36.0 pkg/controller/job/job_controller_test.go TestJobBackoffForOnFailure: (backoffLimit, the
# restartCounts of the Job's pods once the last restart happened, whether the Job failed). The controller sums them and
# fails at `>=` (pastBackoffLimitOnFailure); the last pod listed is the one whose restart is decided here.
JOB_ON_FAILURE = {
    "backoffLimit 1 with restartCount 1": (1, [1], True),
    "too many job failures - single pod": (2, [2], True),
    "too many job failures - multiple pods": (2, [1, 1], True),
    "not enough failures": (3, [1, 1], False),
    "backoffLimit 0 fails at the first restart": (0, [1], True),
}


@pytest.mark.parametrize("case", sorted(JOB_ON_FAILURE))
def test_job_on_failure_fails_when_the_restarts_reach_the_backoff_limit(case):
    backoff, counts, failed = JOB_ON_FAILURE[case]
    before = {i: c for i, c in enumerate(counts)}
    last = len(counts) - 1
    before[last] -= 1
    d = decide("indexed-job", PodExit(last, KILLED), RestartCount({i: c for i, c in before.items() if c}),
               mutate=on_failure(backoff))
    assert (d.action == FAIL) == failed, d.why
    assert d.action in (FAIL, RESTART_CONTAINER)
    if failed:
        assert "pastBackoffLimitOnFailure" in d.source and "BackoffLimitExceeded" in d.why


def test_job_on_failure_counts_only_the_pods_that_exist():
    """A pod the controller replaced starts at restartCount 0: its old restarts leave the sum."""
    count = RestartCount({0: 1})
    count.record(decide("indexed-job", PodExit(0, TERMINATED, deleted=True), count, mutate=on_failure(3)), 0)
    assert count.container_restarts == {} and count.failed_pods == {0: 1}
    assert decide("indexed-job", PodExit(1, KILLED), count, mutate=on_failure(2)).action == RESTART_CONTAINER


def test_jobset_max_restarts_recreates_everything_then_fails():
    def mutate(obj):
        if obj["kind"] == "ClusterTrainingRuntime":
            obj["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 1}
    d = decide("trainjob", PodExit(1, KILLED), mutate=mutate)
    assert d.action == RECREATE_ALL and "maxRestarts 1 (restart 1 of 1)" in d.why
    d = decide("trainjob", PodExit(1, KILLED), RestartCount(workload_restarts=1), mutate=mutate)
    assert d.action == FAIL and "ReachedMaxRestarts" in d.why and "failure_policy.go:226" in d.source


def test_jobset_fail_rule_on_pod_failure_policy():
    def mutate(obj):
        if obj["kind"] == "ClusterTrainingRuntime":
            obj["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 3, "rules": [
                {"name": "stop", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]}
    d = decide("trainjob", PodExit(1, KILLED), mutate=mutate)
    assert d.action == FAIL and "rule stop: FailJobSet" in d.why


@pytest.mark.parametrize("policy, code, action", [
    ("ExitCode", KILLED, RECREATE_POD),       # >= 128: retryable, pod deleted and created again
    ("ExitCode", PEER_LOST, FAIL),            # 1: permanent
    ("Never", KILLED, FAIL),
])
def test_pytorchjob_restart_policies(policy, code, action):
    def mutate(obj):
        if obj["kind"] == "PyTorchJob":
            for rs in obj["spec"]["pytorchReplicaSpecs"].values():
                rs["restartPolicy"] = policy
    d = decide("pytorchjob", PodExit(1, code), mutate=mutate)
    assert d.action == action, d.why
    assert "training-operator v1.9.4" in d.source


def _elastic_workers_only(obj):
    if obj["kind"] == "PyTorchJob":
        specs = obj["spec"]["pytorchReplicaSpecs"]
        specs["Worker"]["replicas"] = specs["Worker"].get("replicas", 1) + 1
        del specs["Master"]
        obj["spec"]["elasticPolicy"] = {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 4}


def test_a_pytorchjob_ends_when_its_master_or_an_elastic_worker_succeeds():
    """training-operator v1.9.4 UpdateJobStatus: the Master's success ends the job (pytorchjob_controller.go:390);
    without a Master every Worker's does, or any one's where elasticPolicy is set (409)."""
    master = decide("pytorchjob", PodExit(0, 0))
    assert master.action == SUCCEEDED and master.ends_job and "the Master succeeded" in master.ends_job
    assert "pytorchjob_controller.go:390" in master.ends_job
    worker = decide("pytorchjob", PodExit(1, 0))
    assert worker.action == SUCCEEDED and worker.ends_job is None  # the Master decides
    elastic = decide("pytorchjob", PodExit(1, 0), mutate=_elastic_workers_only)
    assert elastic.action == SUCCEEDED and "pytorchjob_controller.go:409" in (elastic.ends_job or "")
    assert decide("pytorchjob", PodExit(1, PEER_LOST), mutate=_elastic_workers_only).ends_job is None


def test_a_simulated_pod_that_fails_after_its_workload_succeeded_fails_nothing():
    """A fault run stops deciding for a workload once a pod's success ended it: a Worker that fails afterwards is
    left to its kubelet, the PyTorchJob stays succeeded (it was failed at backoffLimit before)."""
    from types import SimpleNamespace
    from policies.simulate.fault_run import FaultRun
    w, bundle = workload("pytorchjob", _elastic_workers_only)
    said: list[str] = []
    run = FaultRun.__new__(FaultRun)  # its state only: no process runs
    run.sim, run.faults = SimpleNamespace(bundle=bundle, say=said.append), []
    run.decisions, run.outcome, run.ended = [], None, {}

    def pod(index: int, code: int) -> SimpleNamespace:
        return SimpleNamespace(name=f"ddp-train-worker-{index}", workload=w, pod=w.pod(index), exit_code=code,
                               deleting=False, node_lost=False, done=False, fault_note=None)
    first, second = pod(0, 0), pod(1, PEER_LOST)
    count = RestartCount(container_restarts={1: 10})  # past any backoffLimit
    run._decide(first, count, 0.0)
    assert first.done and "pytorchjob_controller.go:409" in run.ended[id(w)], run.ended
    run._decide(second, count, 0.0)
    assert second.done and run.outcome is None, run.outcome
    assert run.decisions == [f"pod ddp-train-worker-1 exited 1 after {w.manifest.ref} succeeded: its controller acts "
                             "on it no more (the kubelet may restart its container; the workload stays succeeded)"]
    assert any("PyTorchJob succeeded" in line for line in said), said


# --- FAULT= ------------------------------------------------------------------------------------------------------

def test_parse_faults():
    fs = F.parse("kill:1@step=6, term:ddp-train-run-001-0@epoch=1 partition=20:1@t=30 delay=5:0 kill-worker:1@step=2")
    assert [(f.action, f.pod, f.when, f.at, f.seconds) for f in fs] == [
        ("kill", "1", "step", 6, None), ("term", "ddp-train-run-001-0", "epoch", 1, None),
        ("partition", "1", "t", 30, 20), ("delay", "0", None, None, 5), ("kill-worker", "1", "step", 2, None)]


@pytest.mark.parametrize("spec, message", [
    ("explode:1@step=3", "unknown fault 'explode'"),
    ("kill:1", "say when"),
    ("kill:1@step=0", "whole number from 1"),
    ("kill:1@minute=3", "unknown time 'minute'"),
    ("partition:1@t=3", "partition needs its seconds"),
    ("delay=3:1@t=2", "takes no @<when>"),
    ("kill 1", "expected <action>:<pod>@<when>"),
    ("", "FAULT is empty"),
])
def test_bad_faults_are_one_line(spec, message):
    with pytest.raises(F.FaultError, match=message):
        F.parse(spec)


PODS = [("w-0", "w-0"), ("w-1", "w-1"), ("w-2", "w-2")]


def test_a_return_needs_a_pod_taken_away_before_it():
    fs = F.parse("kill:1@step=6 return:1@step=8")
    F.resolve(fs, PODS)
    assert [(f.action, f.target, f.at) for f in fs] == [("kill", 1, 6), ("return", 1, 8)]
    for spec, message in (("return:1@step=8", "nothing takes pod 1 away first"),
                          ("kill:2@step=6 return:1@step=8", "nothing takes pod 1 away first"),
                          ("kill:1@step=6 return:1@step=6", "would fire before pod 1 is taken away"),
                          ("term:1@epoch=2 return:1@epoch=1", "would fire before pod 1 is taken away")):
        with pytest.raises(F.FaultError, match=message):
            F.resolve(F.parse(spec), PODS)
    with pytest.raises(F.FaultError, match="return takes no seconds"):
        F.parse("kill:1@step=6 return=3:1@step=8")


# --- steps from metrics.jsonl -------------------------------------------------------------------------------------

def metrics(tmp_path, records):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_account_of_a_kill_after_a_checkpoint(tmp_path):
    recs = [{"event": "start"}] + [{"event": "train", "step": s} for s in range(1, 5)] + [
        {"event": "epoch", "step": 4, "checkpoint": "epoch-0001.pt"}, {"event": "train", "step": 5},
        {"event": "train", "step": 6}, {"event": "start"}, {"event": "resume", "step": 4}] + [
        {"event": "train", "step": s} for s in range(5, 13)] + [{"event": "done", "steps": 12}]
    acc = F.account(metrics(tmp_path, recs))
    assert acc.finished and acc.final_step == 12 and acc.resumes == [(6, 4, 4)]
    assert acc.repeated == 2 and acc.beyond_checkpoint == 0 and acc.intact(12)
    assert "reached step 6, resumed at step 4 (the last checkpoint): 2 steps done again" in acc.lines(12)[0]


def test_account_of_a_restart_from_scratch(tmp_path):
    """A restart that found no checkpoint starts at step 0: the steps before the last checkpoint are done again."""
    recs = [{"event": "start"}, {"event": "train", "step": 4}, {"event": "checkpoint", "step": 4},
            {"event": "train", "step": 5}, {"event": "start"}, {"event": "train", "step": 12},
            {"event": "done", "steps": 12}]
    acc = F.account(metrics(tmp_path, recs))
    assert acc.resumes == [(5, 0, 4)] and acc.beyond_checkpoint == 4 and not acc.intact(12)


def test_the_fault_table_rows_have_the_scripts_format():
    """docs/simulate.md's table is the script's output: header, one row per overlay and fault, each row parsed back
    into the script's own columns (the runs themselves: tests/test_simulate_faults.py)."""
    sys.path.insert(0, str(REPO / "scripts"))
    import fault_table
    text = (REPO / "docs/simulate.md").read_text()
    assert fault_table.BEGIN in text and fault_table.END in text
    rows = fault_table.documented()
    assert [fault_table.key(r) for r in rows] == [(f"`{o.removeprefix('overlays/')}`", f"`{f}`")
                                                  for o, f in fault_table.runs()]
    body = text[text.index(fault_table.BEGIN):text.index(fault_table.END) + len(fault_table.END)]
    assert body == fault_table.table(rows)
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert len(cells) == 6 and cells[2] in ("finished", "failed", "hung"), r
        assert (cells[3] != "-") == (cells[2] == "finished"), r


def test_no_documented_fault_row_disagrees_with_the_rules():
    """A disagreement is a bug in the run or the rules: the table shows none; the etcd variant, which cannot come
    back (its rendezvous stays closed in etcd), is predicted to fail through RESTART005."""
    sys.path.insert(0, str(REPO / "scripts"))
    import fault_table
    rows = [[c.strip() for c in r.strip("|").split("|")] for r in fault_table.documented()]
    assert not [r for r in rows if "DISAGREES" in r[5]]
    etcd = [r for r in rows if r[0] == "`kind-cpu/statefulset-etcd`"]
    assert etcd and all(r[5] == "fails (RESTART005)" and r[2] != "finished" for r in etcd), etcd


def test_a_recovery_blocking_rule_turns_the_prediction_to_fails():
    from policies.model import recovery
    assert [b.__name__ for b in recovery.BLOCKERS] == ["etcd_closes", "shared_store"]
    sys.path.insert(0, str(REPO / "scripts"))
    import fault_table
    out = ("outcome: hung: a crash loop\nthe rules predicted: fails (a StatefulSet restarts its pods, but RESTART005: "
           "the world does not re-form); findings: 1\n")
    assert fault_table.row("overlays/kind-cpu/x", "kill:1@step=6", out).endswith("| fails (RESTART005) |")


# --- exit 0 and a lost node ---------------------------------------------------------------------------------------

def test_a_statefulset_restarts_a_container_that_completed():
    """restartPolicy Always (the only one a StatefulSet takes): the kubelet starts a container that exited 0 again,
    which would train a finished run again (the repository's trainer waits instead: AFTER_DONE=wait)."""
    d = decide("statefulset", PodExit(1, 0))
    assert d.action == RESTART_CONTAINER and "after it completed (exit 0)" in d.why
    for overlay in ("pytorchjob", "indexed-job", "trainjob"):  # OnFailure or Never: the pod succeeded
        assert decide(overlay, PodExit(1, 0)).action == SUCCEEDED, overlay


def test_the_repositorys_statefulsets_wait_once_their_run_is_complete():
    w, _ = workload("statefulset")
    assert w.pod(0).env.get("AFTER_DONE") == "wait"


def test_a_pod_on_a_lost_node_comes_back_only_once_the_node_is_gone():
    """kubernetes/kubernetes#54368: a StatefulSet never runs two pods of one identity, so a pod on a lost node is
    created again only once the Node object is deleted or the pod force-deleted; the PyTorchJob operator keeps the
    index's pod (training-operator v1.9.4 pod.go:312) alike. The kubelet is gone with the node: nothing restarts in
    place."""
    for overlay in ("statefulset", "pytorchjob"):
        d = decide(overlay, PodExit(1, KILLED, node_lost=True))
        assert d.action == RECREATE_POD and d.awaits_node and "lost node" in d.why, (overlay, d.why)
    # a Job with a podFailurePolicy (podReplacementPolicy Failed): the replacement waits for the node too
    def ignore_disruption(obj):
        if obj["kind"] == "Job":
            obj["spec"]["podFailurePolicy"]["rules"].insert(0, {
                "action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]})
    d = decide("indexed-job", PodExit(1, KILLED, node_lost=True), mutate=ignore_disruption)
    assert d.action == RECREATE_POD and not d.counted and d.awaits_node and "lost node" in d.why


def test_node_lost_is_a_fault_of_its_own():
    fs = F.parse("node-lost:1@step=6 return:1@step=9")
    F.resolve(fs, PODS)
    assert [(f.action, f.target) for f in fs] == [("node-lost", 1), ("return", 1)]
