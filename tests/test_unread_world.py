"""Pods of a distributed world that no launcher models are said to be unchecked (a MODEL info line naming the pod
spec), never passed in silence: a Deployment, CronJob or bare Pod whose container starts torchrun or sets what
env:// reads, and a kind nobody knows that holds pod specs (AWS's HyperPodPyTorchJob, found by shape). The shape
search is bounded on any input."""
from __future__ import annotations

import json

import pytest

from conftest import run_cli
from policies.kube.objects import Manifest
from policies.launchers import unmodelled

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer}
spec:
  replicas: 2
  selector: {matchLabels: {app: t}}
  template:
    metadata: {labels: {app: t}}
    spec:
      containers:
      - name: t
        image: example.com/t:v1
        command: [torchrun, --nnodes=2, --nproc-per-node=1, --rdzv-backend=c10d, --rdzv-endpoint=trainer-0.t:29400,
                  train.py]
"""
# The shape of sagemaker.amazonaws.com/v1 HyperPodPyTorchJob as aws-samples/awsome-distributed-training writes it
# (3.test_cases/pytorch/FSDP/kubernetes/llama3_1_8b-fsdp-hpto.yaml at 7217859f): its pods run AWS's `hyperpodrun`.
HYPERPOD = """apiVersion: sagemaker.amazonaws.com/v1
kind: HyperPodPyTorchJob
metadata: {name: llama3-1-8b-fsdp-hpto}
spec:
  nprocPerNode: "8"
  runPolicy: {jobMaxRetryCount: 10, cleanPodPolicy: All}
  replicaSpecs:
  - name: pods
    replicas: 4
    template:
      metadata: {labels: {job-name: llama3-1-8b-fsdp-hpto}}
      spec:
        containers:
        - name: pytorch
          image: 123456789012.dkr.ecr.us-west-2.amazonaws.com/fsdp:pytorch2.7.1
          command: [hyperpodrun, --nproc_per_node=8, --nnodes=4, /fsdp/train.py]
"""


def problems(text: str) -> list[dict]:
    out = run_cli("validate", "--format", "json", "-", stdin=text)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)["problems"]


def model_lines(text: str) -> list[dict]:
    return [p for p in problems(text) if p["rule"] == "MODEL"]


def test_a_deployment_running_torchrun_is_said_unchecked_not_passed():
    (line,) = model_lines(DEPLOYMENT)
    assert line["severity"] == "info" and line["object"] == "Deployment/trainer"
    assert line["field"] == "spec.template.spec"
    assert "its pods run torchrun (container 't')" in line["message"]
    assert "the world they form were not checked" in line["message"]


@pytest.mark.parametrize("container", [
    "{name: c, image: x:1, command: [sh, -c, 'python -m torch.distributed.run --nnodes=1 --nproc-per-node=2 t.py']}",
    "{name: c, image: x:1, command: [python, t.py], env: [{name: WORLD_SIZE, value: '2'}]}",
    "{name: c, image: x:1, command: [python, -c, 'import torch.distributed as d; d.init_process_group(\"gloo\")']}",
])
def test_a_cronjob_whose_pods_start_a_world(container):
    text = ("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec:\n  schedule: '0 1 * * *'\n"
            "  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n"
            f"          containers: [{container}]\n")
    (line,) = model_lines(text)
    assert line["field"] == "spec.jobTemplate.spec.template.spec"
    assert line["message"].startswith("a CronJob is not a launcher the model reads: its pods run ")


def test_a_bare_pod_running_torchrun():
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: single}\nspec:\n  containers:\n"
            "  - {name: t, image: x:1, command: [torchrun, --standalone, --nproc-per-node=2, train.py]}\n")
    (line,) = model_lines(text)
    assert line["field"] == "spec" and "a bare Pod is not a launcher the model reads: it runs torchrun" in line["message"]


def test_pods_that_start_no_world_get_no_line():
    web = DEPLOYMENT.replace("        command: [torchrun, --nnodes=2, --nproc-per-node=1, --rdzv-backend=c10d, "
                             "--rdzv-endpoint=trainer-0.t:29400,\n                  train.py]\n", "")
    assert "torchrun" not in web
    assert model_lines(web) == []
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x:1}]\n"
    assert model_lines(pod) == []


def test_a_modelled_launcher_gets_no_such_line():
    sts = DEPLOYMENT.replace("kind: Deployment", "kind: StatefulSet").replace("  replicas: 2\n",
                                                                           "  replicas: 2\n  serviceName: t\n")
    assert not any("not a launcher the model reads" in p["message"] for p in model_lines(sts))


def test_a_kind_nobody_knows_that_holds_pod_specs():
    (line,) = model_lines(HYPERPOD)
    assert line["object"] == "HyperPodPyTorchJob/llama3-1-8b-fsdp-hpto"
    assert line["field"] == "spec.replicaSpecs[0].template.spec"
    assert line["message"] == ("HyperPodPyTorchJob (sagemaker.amazonaws.com/v1) is not modelled: it holds this pod "
                               "spec; no check read it (security, images, how many pods start, any torchrun world "
                               "they form)")
    # Its schema is not here either: nothing was checked, and the report says so twice, never OK in silence.
    assert any(p["rule"] == "SCHEMA-MISSING" for p in problems(HYPERPOD))


def test_a_kind_nobody_knows_names_what_its_pods_run_and_how_many_specs():
    text = HYPERPOD.replace("command: [hyperpodrun,", "command: [torchrun,") + (
        "  - name: more\n    replicas: 1\n    template:\n      spec:\n        containers: [{name: c, image: x:1}]\n")
    (line,) = model_lines(text)
    assert "this pod spec (and 1 more pod specs), whose pods run torchrun (container 'pytorch'); no check read them" \
        in line["message"]


def test_an_inline_pod_spec_is_found_and_objects_without_one_are_left_alone():
    inline = ("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: s}\nspec:\n"
              "  predictor:\n    containers: [{name: c, image: x:1}]\n")
    (line,) = model_lines(inline)
    assert line["field"] == "spec.predictor"
    plain = "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\nspec: {containers: [a, b], size: 3}\n"
    assert model_lines(plain) == []


def test_the_shape_search_is_bounded():
    deep: dict = {"containers": [{"name": "c", "image": "x"}]}
    for _ in range(unmodelled.SHAPE_DEPTH + 5):
        deep = {"a": deep}
    m = Manifest({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": deep}, "t", 0)
    assert unmodelled.shaped_pod_specs(m) == []
    wide = {"items": [{"x": i} for i in range(200_000)] + [{"containers": [{"name": "c", "image": "x"}]}]}
    m = Manifest({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": wide}, "t", 0)
    assert unmodelled.shaped_pod_specs(m) == []  # the spec after SHAPE_VALUES values is not read
    m.obj["spec"]["items"] = m.obj["spec"]["items"][-2:]
    assert unmodelled.shaped_pod_specs(m) == [("spec.items[1]", {"containers": [{"name": "c", "image": "x"}]})]


@pytest.mark.parametrize("doc", [
    "apiVersion: x.io/v1\nkind: T\nmetadata: {name: d}\nspec: [1, {containers: 5}, {containers: [{image: 1, command: 7, "
    "env: 3}]}]\n",
    "apiVersion: x.io/v1\nkind: T\nmetadata: {name: d}\nspec: {template: {spec: {containers: [{image: x, command: [sh, "
    "-c, 'if then fi (((']}]}}}\n",
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: {spec: {containers: [{name: c, image: "
    "x, command: 'torchrun x.py', env: [{name: A}, {valueFrom: {}}, 5]}]}}}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: {a: b}}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 5, initContainers: [3, {name: x}]}\n",
    "apiVersion: v1\nkind: LimitRange\nmetadata: {name: l}\nspec: {limits: 5}\n---\napiVersion: v1\nkind: ResourceQuota\n"
    "metadata: {name: q}\nspec: {hard: {limits.cpu: '1'}, scopes: 3}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
    "spec: {containers: [{name: c, resources: {limits: [1]}}]}\n",
])
def test_malformed_pod_specs_are_no_internal_error(doc):
    """Without the schema stage (--schema none) the search reads whatever the object holds: at most a MODEL line."""
    out = run_cli("validate", "--schema", "none", "--format", "json", "-", stdin=doc)
    assert out.returncode in (0, 1) and "internal error" not in out.stderr, out.stderr
    assert not [p for p in json.loads(out.stdout)["problems"] if p["rule"] == "INTERNAL"]
