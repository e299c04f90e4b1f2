"""AppWrapper (policies/launchers/appwrapper.py): the webhook's refusals come out as TOPO011 for the reason upstream
gives, each component's object is made as the controller makes it (the AppWrapper's namespace and label) and is
checked by its own launcher, every problem about it reported against the AppWrapper at the field that holds it.

The webhook cases are tests/conformance/appwrapper/ (ported from project-codeflare/appwrapper v1.2.1
internal/webhook/appwrapper_webhook_test.go); the builders below are that test's fixtures
(internal/webhook/appwrapper_fixtures_test.go: deployment, jobSet and the *ForInference ones) for the unit tests of
PodSet inference."""
from __future__ import annotations

import copy

import pytest
import yaml

from policies.report import engine
from policies.launchers import appwrapper
from policies.kube.objects import ERROR, Manifest

from conftest import REPO

CORPUS = yaml.safe_load((REPO / "tests/corpus/appwrapper/kueue-appwrapper-pytorch.yaml").read_text())
BUSYBOX = "quay.io/project-codeflare/busybox:1.36"


def container(cpu: str = "100m", name: str = "busybox") -> dict:
    return {"name": name, "image": BUSYBOX, "command": ["sh", "-c", "sleep 10"], "resources": {"requests": {"cpu": cpu}}}


# appwrapper_fixtures_test.go, as YAML there, as dicts here.
def deployment(replicas: int, declared: bool = True) -> dict:
    comp = {"template": {"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": "deployment-a", "labels": {"app": "test"}},
                         "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "test"}},
                                  "template": {"metadata": {"labels": {"app": "test"}},
                                               "spec": {"terminationGracePeriodSeconds": 0,
                                                        "containers": [container()]}}}}}
    if declared:
        comp["podSets"] = [{"replicas": replicas, "path": "template.spec.template"}]
    return comp


def job_set(workers: int) -> dict:
    def rjob(name: str, n: int) -> dict:
        return {"name": name, "template": {"spec": {"parallelism": n, "completions": n, "backoffLimit": 0,
                                                    "template": {"spec": {"containers": [container(name="sleep")]}}}}}
    return {"podSets": [{"path": "template.spec.replicatedJobs[0].template.spec.template"},
                        {"replicas": workers, "path": "template.spec.replicatedJobs[1].template.spec.template"}],
            "template": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "jobset-a"},
                         "spec": {"replicatedJobs": [rjob("driver", 1), rjob("workers", workers)]}}}


def job_for_inference(parallelism: int, completions: int) -> dict:
    return {"template": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"job-{parallelism}"},
                         "spec": {"parallelism": parallelism, "completions": completions,
                                  "template": {"spec": {"restartPolicy": "Never", "containers": [container()]}}}}}


def pytorchjob_for_inference(workers: int) -> dict:
    def rspec(replicas: int | None) -> dict:
        out = {"restartPolicy": "OnFailure",
               "template": {"spec": {"containers": [{"name": "pytorch", "image":
                                                     "docker.io/kubeflowkatib/pytorch-mnist-cpu:v1beta1-fc858d1",
                                                     "command": ["python3", "/opt/pytorch-mnist/mnist.py",
                                                                 "--epochs=1"],
                                                     "resources": {"requests": {"cpu": "100m"}}}]}}}
        if replicas is not None:
            out["replicas"] = replicas
        return out
    return {"template": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pytorch-job-a"},
                         "spec": {"pytorchReplicaSpecs": {"Master": rspec(None), "Worker": rspec(workers)}}}}


def to_appwrapper(*components: dict) -> dict:
    return {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
            "metadata": {"name": "aw-test", "namespace": "default"}, "spec": {"components": list(components)}}


def validate(objs: list[dict]) -> engine.Unit:
    unit = engine.Unit("aw.yaml", "file", [Manifest(o, "aw.yaml", i) for i, o in enumerate(objs)])
    engine.check_policies(unit)
    return unit


def refusals(unit: engine.Unit) -> list:
    return [p for p in unit.problems if p.rule == "TOPO011" and "AppWrapper webhook refuses" in p.message]


CASES = sorted((REPO / "tests" / "conformance" / appwrapper.LAUNCHER.conformance_folder).glob("*.yaml"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_upstream_case_for_its_reason(path):
    """A refused case is refused by the AppWrapper webhook's model, for upstream's reason (not by some other rule);
    an admitted one is not refused."""
    doc = yaml.safe_load(path.read_text())
    found = refusals(validate(doc["input"]))
    if doc["expect"].get("rejected"):
        assert [p for p in found if doc["expect"]["reason"] in p.message], [p.line() for p in found]
        assert all(p.severity == ERROR and p.obj.startswith("AppWrapper/") for p in found)
        assert all(p.field.startswith("spec.components") for p in found)
    else:
        assert not found, [p.line() for p in found]


def test_inferred_podsets_are_upstreams():
    """utils.go InferPodSets: a Job's pods are min(parallelism, completions); a JobSet's replicas x pods per Job; a
    PyTorchJob's Master and Worker each a PodSet (replicas 1 where not written)."""
    assert appwrapper.infer_podsets(job_for_inference(8, 4)["template"]) == [("template.spec.template", 4)]
    assert appwrapper.infer_podsets(job_set(3)["template"]) == [
        ("template.spec.replicatedJobs[0].template.spec.template", 1),
        ("template.spec.replicatedJobs[1].template.spec.template", 3)]
    assert appwrapper.infer_podsets(pytorchjob_for_inference(4)["template"]) == [
        ("template.spec.pytorchReplicaSpecs.Master.template", 1), ("template.spec.pytorchReplicaSpecs.Worker.template", 4)]
    # A kind upstream does not know has no inferred PodSets (the declared ones stand).
    assert appwrapper.infer_podsets({"apiVersion": "example.com/v1", "kind": "Thing", "spec": {}}) == []


def test_declared_replicas_must_match_inferred():
    comp = deployment(4)
    comp["podSets"][0]["replicas"] = 3
    (p,) = refusals(validate([to_appwrapper(comp)]))
    assert "replica count 3 differs from inferred count 4" in p.message and p.field == "spec.components[0].podSets"


def test_component_is_made_as_the_controller_makes_it():
    """resource_management.go:41-54, 217-255: the AppWrapper's namespace, its label on the object and on each pod
    template, the labels written there kept first; the world is the wrapped PyTorchJob's."""
    aw = copy.deepcopy(CORPUS)
    aw["metadata"]["namespace"] = "team-a"
    unit = validate([aw])
    (w,) = unit.workloads
    assert w.manifest.kind == "PyTorchJob" and w.manifest.namespace == "team-a"
    assert w.manifest.obj["metadata"]["labels"] == {appwrapper.LABEL: "sample-appwrapper-pytorch-job"}
    assert w.pod(0).labels[appwrapper.LABEL] == "sample-appwrapper-pytorch-job"
    (t,) = unit.topologies
    assert (t.pods, t.world_size) == (2, 2)
    # The AppWrapper in the file is left as it was written.
    assert "namespace" not in aw["spec"]["components"][0]["template"]["metadata"]
    assert not [p for p in unit.problems if p.severity == ERROR], [p.line() for p in unit.problems]


def test_a_broken_world_inside_is_reported_at_the_appwrapper():
    """A wrapped PyTorchJob whose pods run plain python with nprocPerNode 2 (the operator counts WORLD_SIZE in
    processes but starts one per pod): the finding names the AppWrapper and the component's field (a warning: the
    sample's own script might start two processes itself; an error for the repository's trainer, test_rules)."""
    aw = copy.deepcopy(CORPUS)
    aw["spec"]["components"][0]["template"]["spec"]["nprocPerNode"] = "2"
    unit = validate([aw])
    bad = [p for p in unit.problems if p.rule == "TOPO011"]
    assert bad, [p.line() for p in unit.problems]
    assert all(p.obj == "AppWrapper/sample-appwrapper-pytorch-job" for p in bad)
    assert all(p.field.startswith("spec.components[0].template") for p in bad)
    assert all(p.message.startswith("in the AppWrapper's component 0 (PyTorchJob): ") for p in bad)


def test_not_said_unmodelled_any_more():
    unit = validate([CORPUS])
    assert not [p for p in unit.problems if p.rule == "MODEL"]


def test_an_mcad_v1beta1_appwrapper_is_not_read_as_a_v1beta2_one():
    """MCAD's AppWrapper (multi-cluster-app-dispatcher v1.38.1 pkg/apis/controller/v1beta1/appwrapper.go 55-79), in
    the same group, wraps spec.resources.GenericItems. Read as a v1beta2 one it was refused for 'components contains
    no podspecs' (TOPO011) on 8 MCAD doc and test files of the fourth sweep; now SCHEMA-MISSING warns the pinned CRD
    does not serve v1beta1 and the model says, in one info line, that it did not read it."""
    obj = {"apiVersion": "workload.codeflare.dev/v1beta1", "kind": "AppWrapper", "metadata": {"name": "aw"},
           "spec": {"resources": {"GenericItems": [{"replicas": 1, "generictemplate": deployment(2)["template"]}]}}}
    unit = engine.Unit("t.yaml", "file", [Manifest(obj, "t.yaml", 0)])
    engine.check_policies(unit)
    assert not [p.line() for p in unit.problems if p.severity == ERROR]
    assert [p.rule for p in unit.problems if p.rule == "MODEL"] == ["MODEL"]
