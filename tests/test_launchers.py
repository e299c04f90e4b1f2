"""The launcher model: the pods, names, labels and env each controller gives them (DESIGN.md section 1)."""
from __future__ import annotations

from pathlib import Path

import pytest

import yaml

from policies.launchers import Bundle, workloads
from policies.kube.objects import Manifest


def bundle(text: str) -> Bundle:
    return Bundle.of([Manifest(o, "t.yaml", i) for i, o in enumerate(yaml.safe_load_all(text)) if o])


PYTORCHJOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pj}
spec:
  nprocPerNode: "4"
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: x
            ports: [{name: pytorchjob-port, containerPort: 23457}]
    Worker:
      replicas: 3
      template:
        spec:
          containers: [{name: pytorch, image: x}]
"""


def test_pytorchjob_operator_env():
    (w,) = workloads(bundle(PYTORCHJOB))
    assert w.pods == 4
    p0, p3 = w.pod(0), w.pod(3)
    assert p0.name == "pj-master-0" and p3.name == "pj-worker-2"
    assert p0.env["PET_NNODES"] == "4" and p0.env["PET_NPROC_PER_NODE"] == "4"
    assert p0.env["WORLD_SIZE"] == "16"  # replicas x nprocPerNode when it is an integer
    assert p3.env["RANK"] == "3" and p3.env["PET_NODE_RANK"] == "3"
    assert p3.env["MASTER_ADDR"] == "pj-master-0" and p3.env["MASTER_PORT"] == "23457"
    assert p3.labels["training.kubeflow.org/replica-type"] == "worker"


def test_pytorchjob_elastic_worker_only():
    text = PYTORCHJOB.replace("  nprocPerNode: \"4\"\n", "  elasticPolicy: {minReplicas: 1, maxReplicas: 3}\n")
    text = text.replace("    Master:\n      replicas: 1\n      template:\n        spec:\n          containers:\n"
                        "          - name: pytorch\n            image: x\n"
                        "            ports: [{name: pytorchjob-port, containerPort: 23457}]\n", "")
    (w,) = workloads(bundle(text))
    p = w.pod(0)
    assert p.env["PET_NNODES"] == "1:3" and p.env["PET_RDZV_BACKEND"] == "c10d"
    assert p.env["PET_RDZV_ENDPOINT"] == "pj-worker-0:23456"
    assert "MASTER_ADDR" not in p.env and "WORLD_SIZE" not in p.env and p.env["PET_NPROC_PER_NODE"] == "auto"


def test_controller_env_values_expand_the_variables_before_them():
    """The operator appends elasticPolicy.rdzvId as PET_RDZV_ID to the container's env; the kubelet expands a
    `$(VAR)` in it against the variables listed before it, as in any env value."""
    text = PYTORCHJOB.replace("  nprocPerNode: \"4\"\n", "  elasticPolicy: {rdzvId: $(RUN_ID)-$(NOPE), maxReplicas: 3}\n")
    text = text.replace("          containers: [{name: pytorch, image: x}]",
                        "          containers: [{name: pytorch, image: x, env: [{name: RUN_ID, value: run-007}]}]")
    (w,) = workloads(bundle(text))
    assert w.pod(1).env["PET_RDZV_ID"] == "run-007-$(NOPE)"  # an undefined one stays as written
    assert w.pod(0).env["PET_RDZV_ID"] == "$(RUN_ID)-$(NOPE)"  # the Master's container has no RUN_ID


def test_indexed_job_downward_api_and_hostnames():
    text = """
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns}
spec:
  completionMode: Indexed
  completions: 3
  parallelism: 3
  template:
    metadata: {labels: {app: t}}
    spec:
      subdomain: svc
      containers:
      - name: c
        image: x
        env:
        - {name: A, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
        - {name: B, valueFrom: {fieldRef: {fieldPath: "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}
        - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: ADDR, value: "$(NS)-x"}
        - {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
        args: ["--rank=$(JOB_COMPLETION_INDEX)", "$$(A)"]
"""
    (w,) = workloads(bundle(text))
    p = w.pod(2)
    assert (p.hostname, p.subdomain) == ("j-2", "svc")
    assert p.env["A"] == p.env["B"] == p.env["JOB_COMPLETION_INDEX"] == "2"
    assert p.env["ADDR"] == "ns-x" and p.env["IP"] is None
    assert p.labels["job-name"] == "j" and p.labels["app"] == "t"
    assert p.argv()[0] == ["--rank=2", "$(A)"]


def test_statefulset_pod_index():
    text = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s}
spec:
  serviceName: h
  replicas: 2
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
      - name: c
        image: x
        env: [{name: R, valueFrom: {fieldRef: {fieldPath: "metadata.labels['apps.kubernetes.io/pod-index']"}}}]
"""
    (w,) = workloads(bundle(text))
    p = w.pod(1)
    assert (p.hostname, p.subdomain, p.env["R"]) == ("s-1", "h", "1")


def test_trainjob_through_its_runtime():
    text = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 3
    numProcPerNode: 2
    command: [torchrun, t.py]
    env: [{name: X, value: "1"}]
"""
    (w,) = workloads(bundle(text))
    assert w.pods == 3 and w.notes and "assumed upstream" in w.notes[0]
    p = w.pod(2)
    assert p.hostname == "tj-node-0-2" and p.subdomain == "tj"
    assert p.env["PET_NNODES"] == "3" and p.env["PET_NPROC_PER_NODE"] == "2" and p.env["PET_NODE_RANK"] == "2"
    assert p.env["PET_MASTER_ADDR"] == "tj-node-0-0.tj" and p.env["PET_MASTER_PORT"] == "29500"
    assert p.container["command"] == ["torchrun", "t.py"] and p.env["X"] == "1"
    assert p.container["image"].startswith("pytorch/pytorch")  # the runtime's image, since the TrainJob sets none


def test_jobset_child_jobs():
    text = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js}
spec:
  network: {subdomain: net}
  replicatedJobs:
  - name: w
    replicas: 2
    template:
      spec:
        completionMode: Indexed
        completions: 2
        parallelism: 2
        template: {spec: {containers: [{name: c, image: x}]}}
"""
    (w,) = workloads(bundle(text))
    assert w.pods == 4
    assert [w.pod(i).hostname for i in range(4)] == ["js-w-0-0", "js-w-0-1", "js-w-1-0", "js-w-1-1"]
    assert w.pod(3).subdomain == "net" and w.pod(3).env["JOB_COMPLETION_INDEX"] == "1"


def test_a_modelled_kind_in_another_api_group_is_said_not_modelled():
    """Trainer v1.9.2 shipped its pre-release runtimes as kubeflow.org/v2alpha1 (manifests/v2/base/runtimes/
    pre-training/torch-distributed.yaml); no launcher reads that group, so the engine says so in one info line
    instead of passing it in silence (tests/corpus/trainjob/runtime-v2alpha1-torch-distributed.yaml)."""
    from policies.report import engine
    from policies.kube.objects import INFO

    text = """
apiVersion: kubeflow.org/v2alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {numNodes: 1, torch: {numProcPerNode: auto}}
  template:
    spec:
      replicatedJobs:
      - name: trainer-node
        template: {spec: {template: {spec: {containers: [{name: trainer, image: x}]}}}}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: modelled}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template: {spec: {template: {spec: {containers: [{name: node, image: x}]}}}}
"""
    objs = [o for o in yaml.safe_load_all(text) if o]
    unit = engine.Unit("t.yaml", "file", [Manifest(o, "t.yaml", i) for i, o in enumerate(objs)])
    engine.check_policies(unit)
    said = [p for p in unit.problems if p.rule == "MODEL"]
    assert len(said) == 1 and said[0].severity == INFO, [p.line() for p in said]
    assert said[0].message.startswith("ClusterTrainingRuntime is not modelled in apiVersion kubeflow.org/v2alpha1")
    assert "trainer.kubeflow.org" in said[0].message and "torch-distributed" in said[0].obj


def test_an_mpijob_of_the_first_api_is_not_read_as_v2beta1():
    """kubeflow.org/v1alpha1 MPIJobs (mpi-operator v0.3.0 examples/v1alpha1/, kubeflow/examples tensorflow-horovod)
    hold spec.gpus or spec.replicas and one spec.template, no mpiReplicaSpecs (pkg/apis/kubeflow/v1alpha1/types.go
    40-98). Read as v2beta1 they were refused for 'no replica specs' (TOPO011) and 'creates no pods' (TOPO012): two
    errors about an API they are not written in. The schema layer's SCHEMA-MISSING warning says the pinned CRD does
    not serve v1alpha1; the model says it did not read the object (one info line), and v1 stays modelled."""
    from policies.report import engine
    from policies.kube.objects import INFO
    from policies import launchers

    text = """
apiVersion: kubeflow.org/v1alpha1
kind: MPIJob
metadata: {name: tensorflow-benchmarks-16}
spec:
  gpus: 16
  template:
    spec:
      containers:
      - {name: tensorflow-benchmarks, image: mpioperator/tensorflow-benchmarks:latest, command: [mpirun, python, b.py]}
"""
    objs = [o for o in yaml.safe_load_all(text) if o]
    manifests = [Manifest(o, "t.yaml", i) for i, o in enumerate(objs)]
    assert launchers.of(manifests[0]) is None
    assert launchers.of(Manifest(dict(objs[0], apiVersion="kubeflow.org/v1"), "t.yaml", 0)) is not None
    unit = engine.Unit("t.yaml", "file", manifests)
    engine.check_policies(unit)
    assert not [p.line() for p in unit.problems if p.rule in ("TOPO011", "TOPO012")]
    said = [p for p in unit.problems if p.rule == "MODEL"]
    assert len(said) == 1 and said[0].severity == INFO, [p.line() for p in said]
    assert "(only in kubeflow.org at other versions)" in said[0].message


def test_a_pytorchjob_of_the_first_api_is_not_read_as_v1():
    """pytorch-operator v0.3.0 examples/smoke-dist/v1alpha1/pytorch_job_sendrecv.yaml: kubeflow.org/v1alpha1 holds a
    list spec.replicaSpecs (replicaType MASTER, WORKER; pkg/apis/pytorch/v1alpha1/types.go 47-70). Read as v1 it was
    said to create no pods (TOPO012, an error) on three files of the fourth sweep; now one MODEL info line."""
    from policies.report import engine
    from policies.kube.objects import INFO

    obj = {"apiVersion": "kubeflow.org/v1alpha1", "kind": "PyTorchJob", "metadata": {"name": "sendrecv"},
           "spec": {"backend": "tcp", "masterPort": "23456", "replicaSpecs": [
               {"replicas": 1, "replicaType": "MASTER",
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "x:1"}]}}},
               {"replicas": 3, "replicaType": "WORKER",
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "x:1"}]}}}]}}
    unit = engine.Unit("t.yaml", "file", [Manifest(obj, "t.yaml", 0)])
    engine.check_policies(unit)
    assert not [p.line() for p in unit.problems if p.rule in ("TOPO011", "TOPO012")]
    said = [p for p in unit.problems if p.rule == "MODEL"]
    assert len(said) == 1 and said[0].severity == INFO, [p.line() for p in said]


@pytest.mark.parametrize("obj", [
    # katib v0.9.0 examples/v1alpha3/random-example.yaml, cut down: trialTemplate.goTemplate, no trialSpec.
    {"apiVersion": "kubeflow.org/v1alpha3", "kind": "Experiment", "metadata": {"name": "random-example"},
     "spec": {"objective": {"type": "maximize", "objectiveMetricName": "Validation-accuracy"},
              "algorithm": {"algorithmName": "random"}, "maxTrialCount": 12,
              "parameters": [{"name": "--lr", "parameterType": "double",
                              "feasibleSpace": {"min": "0.01", "max": "0.03"}}],
              "trialTemplate": {"goTemplate": {"rawTemplate": "apiVersion: batch/v1\nkind: Job\n"}}}},
    # jobset v0.1.2 examples/pytorch/mnist.yaml, cut down: MASTER_ADDR on v0.1.x's subdomain <jobset>-<rjob>.
    {"apiVersion": "jobset.x-k8s.io/v1alpha1", "kind": "JobSet", "metadata": {"name": "pytorch"},
     "spec": {"replicatedJobs": [{"name": "workers", "network": {"enableDNSHostnames": True}, "template": {"spec": {
         "parallelism": 2, "completions": 2, "template": {"spec": {"containers": [{
             "name": "pytorch", "image": "x:1", "env": [{"name": "MASTER_ADDR",
                                                          "value": "pytorch-workers-0-0.pytorch-workers"}],
             "command": ["bash", "-xc", "torchrun --nnodes=2 --nproc_per_node=1 --node_rank=0 "
                                        "--master_addr=$MASTER_ADDR --master_port=3389 mnist.py"]}]}}}}}]}},
], ids=["katib-v1alpha3", "jobset-v1alpha1"])
def test_an_older_api_of_another_shape_is_not_read(obj):
    """Katib's v1alpha3 Experiment (v0.9.0 experiment_types.go 189-203: trialTemplate.goTemplate) got three v1beta1
    webhook refusals (TOPO011) on five katib v0.9.0 examples; jobset v0.1.x's v1alpha1 JobSet, whose pods take the
    subdomain <jobset>-<replicatedJob> (jobset_controller.go 575-577), got a false TOPO003 on its own mnist example.
    Neither version is served by the pinned CRD (SCHEMA-MISSING warns); the model says it did not read them."""
    from policies.report import engine
    from policies.kube.objects import ERROR, INFO

    unit = engine.Unit("t.yaml", "file", [Manifest(obj, "t.yaml", 0)])
    engine.check_policies(unit)
    assert not [p.line() for p in unit.problems if p.severity == ERROR]
    said = [p for p in unit.problems if p.rule == "MODEL"]
    assert len(said) == 1 and said[0].severity == INFO, [p.line() for p in said]


def test_jobset_webhook_names_failure_rules_before_the_schema_check():
    """jobset v0.12.0 jobset_webhook.go Default names an unnamed rule failurePolicyRule<i>; the CRD requires name."""
    from policies.launchers import jobset
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
           "spec": {"failurePolicy": {"rules": [{"action": "FailJobSet"}, {"name": "mine", "action": "RestartJobSet"},
                                                {"name": "", "action": "FailJobSet"}]}}}
    out = jobset.LAUNCHER.defaulted(obj)
    assert [r["name"] for r in out["spec"]["failurePolicy"]["rules"]] == ["failurePolicyRule0", "mine",
                                                                          "failurePolicyRule2"]
    assert "name" not in obj["spec"]["failurePolicy"]["rules"][0], "the object as written is left alone"


def test_job_validation_accepts_what_the_api_server_defaults_or_never_limits():
    """Kubernetes v1.36.0: SetDefaults_Job sets completions and parallelism to 1 where both are unset, so an Indexed
    Job with neither is accepted (a JobSet's replicated Job often is one); validateJobSpec caps an Indexed Job's
    parallelism at 100000, not its completions (TestValidateJob "valid parallelism and maxFailedIndexes for unlimited
    completions when backoffLimitPerIndex is used"). A conformance fixture cannot show this: an accepted fixture is
    checked for schema problems and pods only."""
    from policies.launchers import job_validation as indexed_job
    pod = {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "abc", "image": "image"}]}}}
    assert indexed_job.job_validation({"completionMode": "Indexed", **pod}, "spec") == []
    unlimited = {"completionMode": "Indexed", "completions": 1_000_000_000, "parallelism": 10_000,
                 "maxFailedIndexes": 10_000, "backoffLimitPerIndex": 1, **pod}
    assert indexed_job.job_validation(unlimited, "spec") == []
    refused = indexed_job.job_validation({"completionMode": "Indexed", "parallelism": 2, **pod}, "spec")
    assert [c.field for c in refused] == ["spec.completions"]


_NEVER_POD = {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}}


@pytest.mark.parametrize("spec, fields", [
    # TestValidateJob (pkg/apis/batch/validation/validation_test.go, v1.36.0) error cases: above completionsSoftLimit
    # with backoffLimitPerIndex, maxFailedIndexes is required and it and parallelism are at most 10,000.
    ({"completions": 100_001, "backoffLimitPerIndex": 1}, ["spec.maxFailedIndexes"]),
    ({"completions": 100_001, "backoffLimitPerIndex": 1, "maxFailedIndexes": 10_001, "parallelism": 10_001},
     ["spec.parallelism", "spec.maxFailedIndexes"]),
    ({"completions": 1_000_000, "backoffLimitPerIndex": 1, "maxFailedIndexes": 100_001},
     ["spec.maxFailedIndexes", "spec.maxFailedIndexes"]),  # above the 100,000 of any Indexed Job, and the 10,000
    # At the soft limit itself, or without backoffLimitPerIndex, none of that applies (the success cases).
    ({"completions": 100_000, "parallelism": 100_000, "maxFailedIndexes": 100_000, "backoffLimitPerIndex": 1}, []),
    ({"completions": 1_000_000, "parallelism": 20_000}, []),
    # validatePodFailurePolicy: at most 20 rules, 255 exit codes and 20 condition patterns a rule; supported
    # actions, operators and statuses; at least one exit code.
    ({"completions": 2, "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}] * 21}}, ["spec.podFailurePolicy.rules"]),
    ({"completions": 2, "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
        "operator": "In", "values": list(range(1, 257))}}]}}, ["spec.podFailurePolicy.rules[0].onExitCodes.values"]),
    ({"completions": 2, "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
        "operator": "In", "values": list(range(1, 256))}}]}}, []),
    ({"completions": 2, "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
        "operator": "In", "values": []}}]}}, ["spec.podFailurePolicy.rules[0].onExitCodes.values"]),
    ({"completions": 2, "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
        "operator": "Exists", "values": [1]}}]}}, ["spec.podFailurePolicy.rules[0].onExitCodes.operator"]),
    ({"completions": 2, "podFailurePolicy": {"rules": [{"action": "UnknownAction", "onExitCodes": {
        "operator": "In", "values": [1]}}]}}, ["spec.podFailurePolicy.rules[0].action"]),
    ({"completions": 2, "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "Yes"}]}]}}, ["spec.podFailurePolicy.rules[0].onPodConditions[0].status"]),
    ({"completions": 2, "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "Bad Type", "status": "True"}]}]}}, ["spec.podFailurePolicy.rules[0].onPodConditions[0].type"]),
    ({"completions": 2, "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}] * 21}]}}, ["spec.podFailurePolicy.rules[0].onPodConditions"]),
    # validateSuccessPolicy: at most 20 rules, succeededIndexes at most 64 KiB.
    ({"completions": 30, "successPolicy": {"rules": [{"succeededCount": 1}] * 21}}, ["spec.successPolicy.rules"]),
    ({"completions": 30, "successPolicy": {"rules": [{"succeededIndexes": "0," * 40_000 + "1"}]}},
     ["spec.successPolicy.rules[0].succeededIndexes"]),
])
def test_job_validation_limits_as_the_api_server(spec, fields):
    from policies.launchers import job_validation as indexed_job

    found = indexed_job.job_validation({"completionMode": "Indexed", **_NEVER_POD, **spec}, "spec")
    assert [c.field for c in found] == fields, [c.message for c in found]
    assert all("refuses" in c.message for c in found)


def test_statefulset_validation_names_the_api_servers_reason():
    """kubernetes v1.36.0 ValidateStatefulSet: the name is a DNS-1123 label (TestValidateStatefulSet "name-with-dots",
    "long name"); the conformance fixtures for those cases are also caught by ARGO003 (the pods' hostnames), so this
    pins that the StatefulSet model itself gives upstream's reason."""
    from policies.launchers import statefulset
    spec = {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}}}
    assert statefulset.validation(spec, name="abc") == []
    for bad in ("abc.123", "a" * 64):
        assert [c.field for c in statefulset.validation(spec, name=bad)] == ["metadata.name"]


def test_jobset_alpha_feature_gates_warn():
    """RestartJob actions and InPlaceRestart need alpha gates that are off by default (jobset v0.12.0
    pkg/features/features.go): a cluster may turn them on, so a warning, not an error."""
    from policies.launchers import jobset
    spec = {"failurePolicy": {"restartStrategy": "InPlaceRestart",
                              "rules": [{"name": "a", "action": "RestartJob", "targetReplicatedJobs": ["w"]},
                                        {"name": "b", "action": "RestartJobSet"}]},
            "replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {"containers": []}}}}}]}
    checks = jobset.validation("js", spec)
    assert [(c.field, c.severity) for c in checks] == [("spec.failurePolicy.rules[0].action", "warning"),
                                                       ("spec.failurePolicy.restartStrategy", "warning")]


def test_lws_rollout_percentages_scale_like_upstream():
    """lws v0.10.0 generalValidate scales maxSurge rounding up and maxUnavailable rounding down
    (intstr.GetScaledValueFromIntOrPercent) before refusing both 0."""
    from policies.launchers.leaderworkerset import rollout_validation

    def fields(roll, replicas=4):
        return [c.field.rsplit(".", 1)[1] for c in
                rollout_validation({"rolloutStrategy": {"rollingUpdateConfiguration": roll}}, replicas)]
    assert fields({"maxUnavailable": 0, "maxSurge": "10%"}) == []
    assert fields({"maxUnavailable": "10%", "maxSurge": 0}) == ["maxUnavailable"]
    assert fields({"maxUnavailable": 0}, replicas=0) == []
    assert fields({"maxUnavailable": -1, "partition": -2}) == ["maxUnavailable", "partition"]
    assert fields({}) == []


def test_a_runtime_without_a_torch_policy_is_admitted_not_an_error():
    """Trainer v2.3.0 admits a runtime whose mlPolicy has no torch (plain ML, MPI): it injects no PET_* env, which
    breaks nothing by itself (a warning where the trainer starts torchrun, an info line where it does not)."""
    from policies.report import engine
    from policies.kube.objects import ERROR, INFO, WARNING

    text = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: plain}
spec:
  mlPolicy: {numNodes: 1}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec:
            template:
              spec:
                containers: [{name: node, image: x:1, command: [python, train.py]}]
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: one-node}
spec:
  runtimeRef: {name: plain, kind: TrainingRuntime}
"""
    def notice(command):
        objs = [o for o in yaml.safe_load_all(text.replace("[python, train.py]", command)) if o]
        unit = engine.Unit("t.yaml", "file", [Manifest(o, "t.yaml", i) for i, o in enumerate(objs)])
        engine.check_policies(unit)
        assert not [p.line() for p in unit.problems if p.severity == ERROR]
        (p,) = [p for p in unit.problems if "not mlPolicy.torch" in p.message]
        assert "has no mlPolicy source" in p.message and "nothing but spec.trainer's own env" in p.message
        return p.severity
    assert notice("[python, train.py]") == INFO
    assert notice("[torchrun, --nproc-per-node=1, train.py]") == WARNING


def test_the_mpijob_launchers_pod_carries_its_jobs_name_labels():
    """Issue 33 item 4: the launcher pod is a batch Job's (mpi-operator v0.8.0 newLauncherJob, named <name>-launcher),
    so the API server labels it job-name and batch.kubernetes.io/job-name (what a Service or NetworkPolicy selecting
    the launcher by its Job can use); the workers are the operator's own pods and get neither."""
    from policies.launchers import Bundle, workloads
    from policies.kube.objects import Manifest
    tmpl = {"spec": {"containers": [{"name": "c", "image": "mpioperator/mpi-pi:openmpi"}]}}
    obj = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi"},
           "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": tmpl},
                                        "Worker": {"replicas": 2, "template": tmpl}}}}
    [w] = workloads(Bundle.of([Manifest(obj, "t.yaml", 0)]))
    pods = {p.labels["training.kubeflow.org/job-role"]: p for p in w.every_pod(10)}
    launcher, worker = pods["launcher"], pods["worker"]
    assert launcher.labels["batch.kubernetes.io/job-name"] == launcher.labels["job-name"] == "pi-launcher"
    assert launcher.labels["training.kubeflow.org/job-role"] == "launcher"
    assert "job-name" not in worker.labels and "batch.kubernetes.io/job-name" not in worker.labels


DEEPSPEED_RUNTIME = Path(__file__).parent / "corpus" / "trainjob" / "runtime-deepspeed_distributed.yaml"


def mpi_unit(trainer: str):
    from policies.report import engine
    objs = [yaml.safe_load(DEEPSPEED_RUNTIME.read_text()), yaml.safe_load(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: ds}\nspec:\n"
        "  runtimeRef: {name: deepspeed-distributed}\n  trainer: " + trainer)]
    unit = engine.Unit("t.yaml", "file", [Manifest(o, "t.yaml", i) for i, o in enumerate(objs)])
    engine.check_policies(unit)
    return unit


def test_an_mpi_trainjob_has_its_hostfile_world_and_mpirun_is_checked_against_it():
    """mpi.go (kubeflow/trainer v2.3.0): with runLauncherAsNode numNodes 3 is 2 node pods and the launcher; the
    hostfile lists the 3 hosts with slots = numProcPerNode, 12 ranks; mpirun -np above that cannot start, below it
    leaves slots idle; the runtime's notice names the MPI plugin's env, not PET_*."""
    from policies.report import plan
    from policies.kube.objects import ERROR, INFO, WARNING

    unit = mpi_unit("{numNodes: 3, numProcPerNode: 4, command: [mpirun, -np, '16', python, train.py]}")
    (w,) = [w for w in plan.unit_doc(unit)["workloads"] if w["object"] == "TrainJob/ds"]
    assert w["pod_count"] == 3
    errors = [p for p in unit.problems if p.severity == ERROR]
    assert [p.field for p in errors] == ["spec.trainer.command[0]"], [p.line() for p in unit.problems]
    assert "mpirun -np 16 but the Trainer's hostfile has 12 slots (3 hosts x slots=4)" in errors[0].message
    (notice,) = [p for p in unit.problems if "not mlPolicy.torch" in p.message]
    assert notice.severity == INFO and "mlPolicy.mpi" in notice.message and "OMPI_*" in notice.message
    (tw,) = [x for x in unit.workloads if x.manifest.kind == "TrainJob"]
    assert list(tw.mpi_hosts) == ["ds-node-0-0.ds", "ds-node-0-1.ds", "ds-launcher-0-0.ds"]
    assert any("3 hosts x slots=4 = 12 ranks" in n for n in tw.notes)
    assert "note: TrainJob/ds (3 pods): MPI: hostfile /etc/mpi/hostfile" in plan.text([unit])[0]
    fewer = mpi_unit("{numNodes: 3, numProcPerNode: 4, command: [mpirun, -np, '8', python, train.py]}")
    assert [p.severity for p in fewer.problems if "mpirun -np 8" in p.message] == [WARNING]
    exact = mpi_unit("{numNodes: 3, numProcPerNode: 4, command: [mpirun, -np, '12', python, train.py]}")
    assert not [p for p in exact.problems if "mpirun -np" in p.message]


def test_torchrun_under_mpirun_is_one_agent_per_rank():
    """`mpirun ... torchrun ...` (issue 33): mpirun starts one torchrun agent per rank over the hostfile's hosts x
    slots; each agent reads its own --nnodes (default 1:1), --node-rank (default 0) and rendezvous, never
    OMPI_COMM_WORLD_RANK (torch 2.13 torch/distributed/run.py 426-429, 620-624, 988-991). The deepspeed runtime
    (runLauncherAsNode) with numNodes 2 is 2 hosts x slots=1: 2 agents."""
    from policies.kube.objects import ERROR, INFO, WARNING

    def topo011(command: str) -> list[tuple[str, str]]:
        unit = mpi_unit("{numNodes: 2, numProcPerNode: 1, command: " + command + "}")
        return [(p.severity, p.message) for p in unit.problems if p.rule == "TOPO011" and p.severity != INFO]

    c10d = "--rdzv-backend=c10d, --rdzv-endpoint=ds-node-0-0.ds:29400, train.py]"
    assert topo011("[mpirun, -np, '2', torchrun, --nnodes=2, " + c10d) == []
    assert topo011("[mpirun, torchrun, --nnodes=2, " + c10d) == []  # (no -np: the hostfile's 2 slots)
    [(sev, msg)] = topo011("[mpirun, -np, '2', torchrun, --nnodes=3, " + c10d)
    assert sev == ERROR and "--nnodes 3 but mpirun starts 2 ranks" in msg and "never completes" in msg
    [(sev, msg)] = topo011("[mpirun, -np, '2', torchrun, --nnodes=1:1, " + c10d)
    assert sev == WARNING and "admits at most 1, and the other 1 wait" in msg
    [(sev, msg)] = topo011("[mpirun, -np, '2', torchrun, train.py]")
    assert sev == ERROR and "--nnodes 1:1 (torchrun's default): each agent forms a world of one" in msg
    [(sev, msg)] = topo011("[mpirun, -np, '2', torchrun, --standalone, train.py]")
    assert sev == ERROR and "--standalone" in msg and "world of its own" in msg
    [(sev, msg)] = topo011("[mpirun, -np, '2', torchrun, --nnodes=2, --master-addr=ds-node-0-0.ds, train.py]")
    assert sev == ERROR and "--node-rank 0 (torchrun's default)" in msg and "OMPI_COMM_WORLD_RANK" in msg
    # A node rank the shell computes is not claimed; 4 ranks on 2 hosts put two agents on one host.
    assert topo011("[mpirun, -np, '2', torchrun, --nnodes=2, '--node-rank=$OMPI_COMM_WORLD_RANK', "
                   "--master-addr=ds-node-0-0.ds, train.py]") == []
    assert topo011("[mpirun, -np, '2', bash, -c, 'torchrun --nnodes=2 --node-rank=$OMPI_COMM_WORLD_RANK "
                   "--master-addr=ds-node-0-0.ds train.py']") == []
    [(sev, msg)] = topo011("[mpirun, -np, '2', python, -m, torch.distributed.run, --nnodes=3, " + c10d)
    assert sev == ERROR and "--nnodes 3 but mpirun starts 2 ranks" in msg
    found = topo011("[mpirun, -np, '4', --oversubscribe, torchrun, --nnodes=4, " + c10d)
    assert [s for s, m in found if "several torchrun agents on one host" in m] == [WARNING], found


def test_mpirun_host_list_on_an_mpi_trainjob_counts_its_own_hosts_and_slots():
    """`mpirun -H host:slots,...` on a TrainJob's MPI launcher: with a default hostfile set (the Trainer's
    OMPI_MCA_orte_default_hostfile), Open MPI's -H filters its hosts (orte_hosts(7)), so the ranks are -np, else the
    slots -H lists, over -H's hosts, as on an MPIJob. Counted from the hostfile (2 hosts x slots=2) both of these were
    wrong: a torchrun agent per -H slot was 4 agents (two false warnings), and -np 3 over 2 listed slots only a
    warning."""
    from policies.kube.objects import ERROR, INFO

    def topo011(command: str) -> list[tuple[str, str]]:
        unit = mpi_unit("{numNodes: 2, numProcPerNode: 2, command: " + command + "}")
        return [(p.severity, p.message) for p in unit.problems if p.rule == "TOPO011" and p.severity != INFO]

    hosts = "-H, 'ds-launcher-0-0.ds:1,ds-node-0-0.ds:1'"
    assert topo011(f"[mpirun, {hosts}, torchrun, --nnodes=2, --nproc-per-node=2, --rdzv-backend=c10d, "
                   "--rdzv-endpoint=ds-launcher-0-0.ds:29400, train.py]") == []
    [(sev, msg)] = topo011(f"[mpirun, {hosts}, torchrun, --nnodes=3, --rdzv-backend=c10d, "
                           "--rdzv-endpoint=ds-launcher-0-0.ds:29400, train.py]")
    assert sev == ERROR and "--nnodes 3 but mpirun starts 2 ranks" in msg
    [(sev, msg)] = topo011(f"[mpirun, {hosts}, -np, '3', python, train.py]")
    assert sev == ERROR and "mpirun -np 3 but -H lists 2 slots" in msg
    assert topo011(f"[mpirun, {hosts}, -np, '2', python, train.py]") == []
    # another hostfile than the Trainer's: its slots are TOPO012's "not checked", not counted from /etc/mpi/hostfile
    assert topo011("[mpirun, --hostfile, /tmp/hosts, -np, '5', python, train.py]") == []


def test_torchrun_under_mpirun_gets_one_accurate_info_line():
    """TOPO012 says what mpirun starts without claiming torchrun takes its rank from OMPI_COMM_WORLD_RANK, and does
    not tell a command that already starts torchrun to start torchrun; an MPIJob's says the same."""
    from policies.kube.objects import INFO
    from test_rules import problems_of
    from conftest import FIXTURES

    unit = mpi_unit("{numNodes: 2, command: [mpirun, -np, '2', torchrun, --nnodes=2, --rdzv-backend=c10d, "
                    "--rdzv-endpoint=ds-node-0-0.ds:29400, train.py]}")
    for problems in (unit.problems, problems_of(FIXTURES / "rules/TOPO011/pass/mpijob-mpirun-torchrun-c10d.yaml")):
        [line] = [p for p in problems if p.rule == "TOPO012"]
        assert line.severity == INFO and "each running its own torchrun agent" in line.message, line.line()
        assert "taking its rank from" not in line.message and "start the script with torchrun" not in line.hint
        assert "not checked" in line.message


def test_an_empty_mpi_implementation_is_admitted_but_never_reconciled():
    """The CRD's enum admits mpiImplementation "" (its default fills only an unset field); mpi.go EnforceMLPolicy
    208-226 (v2.3.0) returns an error for anything but OpenMPI, so the TrainJob never gets its JobSet."""
    from policies.report import engine
    from policies.kube.objects import ERROR
    runtime = yaml.safe_load(DEEPSPEED_RUNTIME.read_text())
    runtime["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = ""
    job = yaml.safe_load("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: ds}\n"
                         "spec: {runtimeRef: {name: deepspeed-distributed}}")
    unit = engine.Unit("t.yaml", "file", [Manifest(o, "t.yaml", i) for i, o in enumerate([runtime, job])])
    engine.check_policies(unit)
    assert ["mpiImplementation is" in p.message for p in unit.problems if p.severity == ERROR] == [True]


def test_an_open_mpi_hostfile_is_read_as_mpirun_reads_it():
    """mpirun(1) "Specifying Host Nodes": `host [slots=N] [max_slots=M]` a line, `#` comments; a line without
    slots= has the node's processor cores (Open MPI's "not enough slots" help text), unknown here: None."""
    from policies.launchers.mpirun import hostfile_hosts

    text = "# two pods\nddp-0.ddp slots=2 max_slots=4\n\n  ddp-1.ddp   # no slots\n"
    assert hostfile_hosts(text) == [("ddp-0.ddp", 2), ("ddp-1.ddp", None)]


def test_hydra_hosts_are_not_held_to_open_mpis_slots():
    """`mpiexec.hydra -hosts a:1 -np 4` (MPICH, Intel MPI) places more ranks than slots; only Open MPI's -H and
    --hostfile spellings are held to them."""
    from policies.launchers.mpirun import find_mpirun, np_within_hosts

    hydra = find_mpirun(["mpiexec", "-hosts", "a.s:1", "-np", "4", "python", "t.py"], ["f"] * 7)
    assert hydra is not None and hydra.host_option == "-hosts"
    ompi = find_mpirun(["mpirun", "-H", "a.s:1", "-np", "4", "python", "t.py"], ["f"] * 7)
    assert ompi is not None and ompi.host_option == "-H"
    assert np_within_hosts(ompi, "OpenMPI") and not np_within_hosts(hydra, "MPICH")


def test_horovodrun_options_are_not_read_as_the_program():
    """mpi-operator v0.3.0 examples/horovod/tensorflow-mnist-elastic.yaml: `horovodrun -np 2 --min-np 1 --max-np 3
    --host-discovery-script /etc/mpi/discover_hosts.sh python ...` was read as starting `1 --max-np ...` (TOPO012's
    info line said so); horovodrun's valued options (horovod/runner/launch.py) are skipped as mpirun's are."""
    from policies.launchers.mpirun import find_mpirun

    argv = ["horovodrun", "--num-proc", "2", "--min-np", "1", "--max-np", "3", "--host-discovery-script",
            "/etc/mpi/discover_hosts.sh", "--blacklist-cooldown-range", "10", "100", "python", "t.py"]
    run = find_mpirun(argv, ["f"] * len(argv))
    assert run is not None and run.np == 2 and run.program == ["python", "t.py"]
