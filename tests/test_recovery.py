"""How many pod losses a world survives (policies/model/recovery.py), counted as its controller counts them: the
repository's own overlays, a PyTorchJob whose lost pod restarts every pod, the elastic job's worker 0, and the lines
`make validate` and `make plan` print. Unit level: no process starts (the runs are in tests/test_simulate_faults.py)."""
from __future__ import annotations

import copy
import functools
import json

import pytest

from conftest import REPO, run_cli
from policies.model import recovery
from policies.report.engine import Unit, check_policies, collect, validate
from policies.kube.objects import Manifest


@functools.lru_cache(maxsize=None)
def overlay_unit(overlay: str) -> Unit:
    units = collect([str(REPO / "overlays" / overlay)], REPO / "overlays")
    validate(units, None)
    return units[0]


def survives(overlay: str):
    (survival,) = [s for _, s in overlay_unit(overlay).recovery]
    return survival


# What every workload of the repository survives, and what its environment asks (components/*/policy.yaml podLosses).
EXPECTED = {
    "kind-cpu/indexed-job": 0, "kind-cpu/trainjob": 0, "kind-cpu/pytorchjob": 1, "kind-cpu/pytorchjob-elastic": 1,
    "kind-cpu/statefulset": None, "kind-cpu/statefulset-etcd": 0,
    "gke-t4/indexed-job": 0, "gke-t4/pytorchjob": 1, "gke-t4/trainjob": 1, "gke-t4/statefulset": None,
    "64x8-h100/indexed-job": 0, "64x8-h100/pytorchjob": 1, "64x8-h100/trainjob": 1, "64x8-h100/statefulset": None,
    "64x8-h100/statefulset-lm": None,
}


FOUND = sorted(str(p.parent.relative_to(REPO / "overlays")) for p in (REPO / "overlays").glob("*/*/kustomization.yaml"))


@pytest.mark.parametrize("overlay", FOUND)
def test_the_repositorys_worlds_survive(overlay):
    """The table's count for the template's overlays; an environment `make new-env` made is modelled (whether it
    survives what its declaration asks is RESTART007's, which test_overlays.py runs on every overlay)."""
    s = survives(overlay)
    assert s.modelled, s.why
    if overlay in EXPECTED:
        assert s.losses == EXPECTED[overlay], s.why


def test_every_overlay_of_the_template_is_in_the_table():
    """Every overlay of the template's example environments has its count in the table (a fork's own environments
    are checked against their declaration above)."""
    examples = {o for o in FOUND if o.split("/")[0] in {e.split("/")[0] for e in EXPECTED}}
    assert examples == set(EXPECTED) & set(FOUND)


def test_a_lost_pod_restarts_every_pod_of_a_static_world():
    """gke-t4's PyTorchJob before this change: 4 pods and backoffLimit 3. One lost pod ends every pod's torchrun, each
    pod's container restarts and the operator counts them all (pkg/core/job.go line 132): the job fails at the first
    loss, which `restarts()` alone (any backoffLimit above 0 recovers) did not see."""
    unit = overlay_unit("gke-t4/pytorchjob")
    manifests = [Manifest(copy.deepcopy(m.obj), m.source, m.index) for m in unit.manifests]
    job = next(m for m in manifests if m.kind == "PyTorchJob")
    job.obj["spec"]["runPolicy"]["backoffLimit"] = 3
    again = Unit("mutated", "file", manifests)
    check_policies(again)
    ((t, s),) = again.recovery
    assert s.losses == 0 and "every pod's torchrun ends (4 pods)" in s.why and "3 container restarts" in s.why, s.why
    assert t.workload.launcher.restarts(t.workload, None)  # what RESTART004 reads still says something restarts


def test_the_elastic_jobs_worker_0_costs_every_pod():
    """Losing worker 1 restarts its container alone (the others' torchrun restart their workers into a new round);
    losing worker 0, whose torchrun holds the c10d store, restarts all three."""
    t, _ = overlay_unit("kind-cpu/pytorchjob-elastic").recovery[0]
    bundle = overlay_unit("kind-cpu/pytorchjob-elastic")
    assert recovery.store_host(t) == 0 and recovery.torchrun_restarts(t) == 3
    from policies.launchers import Bundle
    b = Bundle.of(bundle.manifests)
    worker1 = recovery.replay(t, b, [recovery.Loss(1, recovery.KILLED)] * 3)
    assert worker1[0] == 3 and worker1[1] is None  # backoffLimit 4: three lost worker-1s, one restart each
    worker0 = recovery.replay(t, b, [recovery.Loss(0, recovery.KILLED)] * 2)
    assert worker0[0] == 1 and "4 container restarts reach the limit" in worker0[1].why


def test_validate_says_what_every_workload_survives():
    proc = run_cli("validate", "overlays/kind-cpu", "overlays/gke-t4/pytorchjob")
    assert proc.returncode == 0, proc.stdout
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("recovery ")]
    assert len(lines) == 7, lines
    assert "recovery overlays/gke-t4/pytorchjob: PyTorchJob/ddp-train-run-001 survives 1 pod loss" in lines
    assert "recovery overlays/kind-cpu/statefulset: StatefulSet/ddp-train-run-001 survives any number of pod losses" \
        in lines
    data = json.loads(run_cli("validate", "--format", "json", "overlays/gke-t4/pytorchjob").stdout)
    (rec,) = data["units"][0]["recovery"]
    assert rec["pod_losses_survived"] == 1 and rec["modelled"] and "backoffLimit 5" in rec["why"]


def test_plan_says_why():
    proc = run_cli("plan", "overlays/gke-t4/pytorchjob")
    assert "recovery: PyTorchJob/ddp-train-run-001 survives 1 pod loss: pod 0 killed: every pod's torchrun ends " \
           "(4 pods); at loss 2, " in proc.stdout, proc.stdout
    doc = json.loads(run_cli("plan", "--format", "json", "overlays/gke-t4/pytorchjob").stdout)
    (w,) = doc["overlays"][0]["workloads"]
    assert w["recovery"]["pod_losses_survived"] == 1


def test_a_huge_world_is_replayed_within_bounds():
    """A 100,000-pod static world: the replay stops at its bound of pod ends and says it could not work it out."""
    unit = overlay_unit("kind-cpu/statefulset")
    manifests = [Manifest(copy.deepcopy(m.obj), m.source, m.index) for m in unit.manifests]
    sts = next(m for m in manifests if m.kind == "StatefulSet")
    sts.obj["spec"]["replicas"] = 100_000
    big = Unit("big", "file", manifests)
    check_policies(big)
    ((_, s),) = big.recovery
    assert not s.modelled and "100000 pods" in s.why and s.words() == "pod losses survived: not worked out"


def test_a_crashed_worker_costs_what_its_torchrun_does():
    """kill-worker: in a static world the pod's torchrun exits 1 and so does every other (all restart, as a lost pod);
    on the elastic job's c10d rendezvous each torchrun restarts its workers itself (maxRestarts 3): nothing restarts
    until a torchrun has none left."""
    from policies.launchers import Bundle

    unit = overlay_unit("kind-cpu/pytorchjob")
    t, _ = unit.recovery[0]
    n, d, _ = recovery.replay(t, Bundle.of(unit.manifests), [recovery.Loss(1, recovery.WORKER)] * 2)
    assert n == 1 and "3 container restarts reach the limit" in d.why
    unit = overlay_unit("kind-cpu/pytorchjob-elastic")
    t, _ = unit.recovery[0]
    n, d, _ = recovery.replay(t, Bundle.of(unit.manifests), [recovery.Loss(1, recovery.WORKER)] * 4)
    assert n == 4 and d is None  # three restarted by torchrun, the fourth ends all three torchruns: 3 of 4 restarts


def _copy(unit: Unit, name: str, change=None) -> Unit:
    manifests = [Manifest(copy.deepcopy(m.obj), m.source, m.index) for m in unit.manifests]
    if change is not None:
        change(next(m for m in manifests if m.kind == "PyTorchJob").obj)
    again = Unit(name, "file", manifests)
    check_policies(again)
    return again


def test_a_world_met_again_is_replayed_once_and_a_changed_one_again():
    """The replay is worked out once per input (Context.inputs, the engine's digest of every object): the same
    objects in another unit reuse it; backoffLimit changed (to 3, or to 3.0, "5" or true, which the operator reads
    otherwise than 3 or 5) is another input."""
    unit = overlay_unit("gke-t4/pytorchjob")
    first, second = _copy(unit, "first"), _copy(unit, "second")
    assert first.recovery[0][1] is second.recovery[0][1] and first.recovery[0][1].losses == 1
    for limit, losses in ((3, 0), (3.0, None), ("5", None), (True, None)):
        def change(obj, limit=limit):
            obj["spec"]["runPolicy"]["backoffLimit"] = limit
        (_, s), = _copy(unit, f"backoffLimit {limit!r}", change).recovery
        assert s is not first.recovery[0][1], limit
        if losses is not None:
            assert s.losses == losses, (limit, s.why)
