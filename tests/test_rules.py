"""Every rule fires on its `fail/` fixtures and stays silent on its `pass/` fixtures (adding a file adds a test).
A rule folder's `policy.yaml` is the environment its fixtures are checked in (for the rules that need one)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from policies.rules import environment
from policies.render import gitops
from policies.argocd import identity
from policies.report.engine import Unit, check_policies
from policies.render.files import read
from policies.kube.objects import ERROR
from policies.rules import ID_FORMAT, RULES

from conftest import FIXTURES

RULE_FIXTURES = sorted((FIXTURES / "rules").glob("*/*/*.yaml"))


@pytest.fixture(autouse=True)
def template_identity():
    """The fixtures are written for the template, whose Applications clone the example repository: check them as
    that repository, also in a fork that `make init` made its own (its gitops.yaml names another URL)."""
    with gitops.repository_url(identity.EXAMPLE_REPO_URL):
        yield


def problems_of(path):
    path = Path(path)
    unit = Unit(str(path), "file", read(str(path)))
    declared = path.parent.parent / "policy.yaml"
    if declared.is_file():
        unit.environment, errors = environment.load(declared)
        assert not errors, [e.message for e in errors]
    check_policies(unit)
    return unit.problems


@pytest.mark.parametrize("path", [p for p in RULE_FIXTURES if p.parent.name == "fail"],
                         ids=lambda p: f"{p.parts[-3]}-{p.stem}")
def test_rule_fires(path):
    rule = path.parts[-3]
    found = [p for p in problems_of(path) if p.rule == rule]
    assert found, f"{rule} did not fire on {path.name}"
    for p in found:
        assert p.obj and "/" in p.obj, p
        assert p.field, p
        assert p.hint, p
        assert "\n" not in p.line()


@pytest.mark.parametrize("path", [p for p in RULE_FIXTURES if p.parent.name == "pass"],
                         ids=lambda p: f"{p.parts[-3]}-{p.stem}")
def test_rule_silent(path):
    problems = problems_of(path)
    assert not [p for p in problems if p.rule == path.parts[-3]]
    assert not [p.line() for p in problems if p.severity == ERROR]


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_rule_has_both_fixtures(rule):
    assert list((FIXTURES / "rules" / rule / "fail").glob("*.yaml")), f"{rule} has no failing fixture"
    assert list((FIXTURES / "rules" / rule / "pass").glob("*.yaml")), f"{rule} has no passing fixture"


def test_rule_ids_are_stable_and_documented():
    for rule_id, rule in RULES.items():
        assert ID_FORMAT.match(rule_id), rule_id
        assert "Fails:" in rule.doc and "Passes:" in rule.doc, f"{rule_id} docstring lacks examples"


def test_messages_say_found_and_expected():
    problems = problems_of(FIXTURES / "rules/TOPO001/fail/job-nnodes-3.yaml")
    p = next(p for p in problems if p.rule == "TOPO001")
    assert "--nnodes is 3" in p.message and "2 pods" in p.message
    # `--nnodes=$(NNODES)`: the problem points at the env entry where the user writes the number.
    assert p.field.startswith("spec.template.spec.containers[0].env[")
    assert p.obj == "Job/ddp-train"


def test_res006_says_when_it_could_not_run(tmp_path):
    text = (FIXTURES / "rules/RES006/pass/1b-ddp.yaml").read_text()
    assert "  MODEL_PARAMS: 1B\n" in text
    path = tmp_path / "no-params.yaml"
    path.write_text(text.replace("  MODEL_PARAMS: 1B\n", ""))
    found = [p for p in problems_of(path) if p.rule == "RES006"]
    assert [p.severity for p in found] == ["info"] and "memory per GPU was not checked" in found[0].message
    path.write_text(text.replace("NVIDIA-H100-80GB-HBM3", "some-gpu"))
    found = [p for p in problems_of(path) if p.rule == "RES006"]
    assert [p.severity for p in found] == ["info"] and "GPU of unknown memory (some-gpu)" in found[0].message


def test_topo002_nproc_gpu_without_a_gpu_is_an_error_as_torchrun_raises():
    """`--nproc-per-node gpu` where no GPU is visible: the real torchrun raises before any worker starts (run here, a
    machine without CUDA, as in a pod that requests none), so the rule says error, not 'depends on the cores'."""
    torch = pytest.importorskip("torch")
    from torch.distributed.run import determine_local_world_size

    assert not torch.cuda.is_available()
    with pytest.raises(ValueError, match="Cuda is not available"):
        determine_local_world_size("gpu")
    found = [p for p in problems_of(FIXTURES / "rules/TOPO002/fail/cpu-nproc-gpu.yaml") if p.rule == "TOPO002"]
    assert [p.severity for p in found] == [ERROR] and "Cuda is not available" in found[0].message


def test_topo002_processes_on_neuron_devices_are_not_said_to_share_cpus():
    """ai-on-eks' trn1 Volcano Job runs 32 processes in a pod with 16 aws.amazon.com/neuron devices and 2 CPUs: the
    processes run on the NeuronCores, so no 'they share cores' warning, only an info line that the count per device
    was not checked (how many cores a device has is not in the manifests)."""
    corpus = FIXTURES.parent / "corpus/volcano/ai-on-eks-trn1-mlp-karpenter.yaml"
    found = [p for p in problems_of(corpus) if p.rule == "TOPO002"]
    assert [p.severity for p in found] == ["info"], [p.line() for p in found]
    assert "16 aws.amazon.com/neuron" in found[0].message and "not checked" in found[0].message


def test_topo011_data_over_one_mib_is_refused_as_the_api_server_counts_it(tmp_path):
    """ValidateConfigMap counts data (UTF-8) and binaryData (decoded); ValidateSecret counts data decoded, with
    stringData merged over it by the conversion before validation: more than 1 MiB in all is refused."""
    import base64

    big = "x" * (600 * 1024)
    raw = base64.b64encode(b"\0" * (500 * 1024)).decode()
    cases = {
        "over.yaml": (f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n  a: {big}\n"
                      f"binaryData:\n  b: {raw}\n", True),  # 600 KiB + 500 KiB
        "under.yaml": (f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n  a: {big}\n", False),
        # The same key in stringData replaces data's 500 KiB with 10 bytes: 600 KiB + 10 in all.
        "merged.yaml": (f"apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\ndata:\n  b: {raw}\n  c: "
                        f"{base64.b64encode(big.encode()).decode()}\nstringData:\n  b: '0123456789'\n", False),
        "secret-over.yaml": (f"apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\ndata:\n  b: {raw}\nstringData:\n"
                             f"  c: {big}\n", True),
    }
    for name, (text, refused) in cases.items():
        (tmp_path / name).write_text(text)
        found = [p for p in problems_of(tmp_path / name) if p.rule == "TOPO011"]
        assert bool(found) is refused, (name, [p.line() for p in found])
        if refused:
            assert "more than the 1,048,576 (1 MiB)" in found[0].message and found[0].severity == ERROR


def test_what_the_input_does_not_show_is_not_an_error():
    """Issue 33 item 1: an unset rendezvous id on an etcd from elsewhere is a warning phrased as the condition (the
    first run works), two workloads on one etcd with one id stay an error; a TrainJob whose runtime is applied from
    elsewhere is REF001's one info line, an error only where the environment declares its manifests self-contained;
    pod 0 naming itself by its own hostname ($(hostname)) is no TOPO003 problem, and a script given WORLD_SIZE
    but no MASTER_ADDR (it may set it itself) a TOPO003 warning, one given no RANK a TOPO009 warning, one given a
    WORLD_SIZE other than its pods a TOPO001 warning."""
    from policies.kube.objects import INFO, WARNING
    rules = FIXTURES / "rules"

    def said(path: Path, rule: str) -> list[tuple[str, str]]:
        return [(p.severity, p.message) for p in problems_of(path) if p.rule == rule]

    [(sev, msg)] = said(rules / "RDZV002/fail/etcd-no-id.yaml", "RDZV002")
    assert sev == WARNING and msg.startswith("rendezvous id is unset") and ": if another job or a later run" in msg
    assert ERROR in [s for s, _ in said(rules / "RDZV002/fail/etcd-shared-id.yaml", "RDZV002")]
    elsewhere = rules / "REF001/fail/trainjob-runtime-elsewhere.yaml"
    assert [s for s, _ in said(elsewhere, "REF001")] == [ERROR]  # (the folder's policy.yaml: selfContained)
    unit = Unit(str(elsewhere), "file", read(str(elsewhere)))
    check_policies(unit)
    found = [p for p in unit.problems if p.rule == "REF001"]
    assert [p.severity for p in found] == [INFO] and "ClusterTrainingRuntime" in found[0].message
    assert not [p for p in unit.problems if p.severity == ERROR]
    assert said(rules / "TOPO003/pass/lws-leader-names-itself.yaml", "TOPO003") == []
    # WORLD_SIZE without MASTER_ADDR: the script may set it itself; MASTER_ADDR localhost on 2 pods is shown
    [(sev, msg)] = said(rules / "TOPO003/fail/env-world-no-master-addr.yaml", "TOPO003")
    assert sev == WARNING and msg.startswith("MASTER_ADDR is not in the env of this 4-pod job") and ": if the" in msg
    assert [s for s, _ in said(rules / "TOPO003/fail/master-addr-localhost.yaml", "TOPO003")] == [ERROR]
    # no RANK in the env of a script started without a launcher: it may pass its own rank
    [(sev, msg)] = said(rules / "TOPO009/fail/env-world-no-rank.yaml", "TOPO009")
    assert sev == WARNING and msg.startswith("RANK is not in the env of this 2-pod job's pods: if the script")
    # a hand-set WORLD_SIZE that is not the pods: the script may start more than one process per pod
    [(sev, msg)] = said(rules / "TOPO001/fail/env-world-size-not-pods.yaml", "TOPO001")
    assert sev == WARNING and msg.startswith("WORLD_SIZE is 4 but indexed-job creates 2 pods: if the script starts")
    # an MPIJob's --dist-url on mpi-operator v0.4.0's workers' Service: right under that release, which the
    # manifests do not show; a host no release gives rank 0 stays an error
    [(sev, msg)] = said(rules / "TOPO011/fail/mpijob-dist-url-v0.4-worker-service.yaml", "TOPO011")
    assert sev == WARNING and "where the cluster runs v0.5.0 or later" in msg
    assert [s for s, _ in said(rules / "TOPO011/fail/mpijob-dist-url-not-rank-0.yaml", "TOPO011")] == [ERROR]
    # a GPU that may come from a MIG slice or a DRA claim, which the GPU table does not count: nccl and
    # --nproc-per-node=gpu are warnings on that condition; nccl on a plain CPU pod stays an error
    [(sev, msg)] = said(rules / "TOPO007/fail/nccl-on-mig-slice.yaml", "TOPO007")
    assert sev == WARNING and "unless nvidia.com/mig-3g.40gb gives each pod a GPU" in msg
    dra = rules / "TOPO002/fail/nproc-gpu-on-dra-claim.yaml"
    assert [s for s, _ in said(dra, "TOPO002") + said(dra, "TOPO007")] == [WARNING, WARNING]
    assert [s for s, _ in said(rules / "TOPO007/fail/nccl-on-cpu.yaml", "TOPO007")] == [ERROR]
    # an OrderedReady StatefulSet whose trainer has an exec readiness probe: whether it succeeds before the
    # rendezvous completes is the image's or the script's
    [(sev, msg)] = said(rules / "TOPO010/fail/ordered-ready-exec-probe.yaml", "TOPO010")
    assert sev == WARNING and "if the probe succeeds only once training runs" in msg
    # a PyTorchJob's nprocPerNode over a script started without torchrun: it may spawn them itself; the
    # repository's trainer does not
    [(sev, msg)] = said(rules / "TOPO011/fail/nproc-without-torchrun-own-script.yaml", "TOPO011")
    assert sev == WARNING and "unless the script starts 2 processes itself" in msg
    assert [s for s, _ in said(rules / "TOPO011/fail/nproc-without-torchrun.yaml", "TOPO011")] == [ERROR]
    # MASTER_ADDR naming a Service the manifests do not hold: it may select pod 0 alone
    [(sev, msg)] = said(rules / "TOPO003/fail/master-service-elsewhere.yaml", "TOPO003")
    assert sev == WARNING and "unless a Service 'ddp-master' applied elsewhere selects pod 0 alone" in msg


def test_env_from_a_configmap_applied_elsewhere_is_not_said_missing(tmp_path):
    """MASTER_ADDR or RANK from a ConfigMap that is not in the manifests is in the env, its value unknown here
    (REF001 lists the ConfigMap): TOPO003 and TOPO009 say nothing of it, where without the entry they warn that it
    is not in the env."""
    rules = FIXTURES / "rules"
    for fixture, rule, name in (("TOPO009/fail/env-world-no-rank.yaml", "TOPO009", "RANK"),
                                ("TOPO009/fail/env-world-no-rank.yaml", "TOPO003", "MASTER_ADDR")):
        text = (rules / fixture).read_text()
        if name == "MASTER_ADDR":
            text = text.replace("        - {name: MASTER_ADDR, value: t-0.t}\n", "")
        assert [p for p in problems_of(_write(tmp_path, text)) if p.rule == rule and f"{name} is not in" in p.message]
        ref = f"        - {{name: {name}, valueFrom: {{configMapKeyRef: {{name: elsewhere, key: k}}}}}}\n"
        text = text.replace("        - {name: WORLD_SIZE, value: \"2\"}\n",
                            "        - {name: WORLD_SIZE, value: \"2\"}\n" + ref)
        found = problems_of(_write(tmp_path, text))
        assert not [p for p in found if p.rule == rule], [p.line() for p in found]
        assert [p for p in found if p.rule == "REF001" and "ConfigMap elsewhere" in p.message]


def test_a_variable_an_envfrom_applied_elsewhere_may_define_is_a_condition():
    """`--nnodes=$(NNODES)` with no NNODES in the env but an envFrom ConfigMap the manifests do not hold: a TOPO012
    warning naming the ConfigMap; an error under selfContained (REF001's declaration), as without the envFrom."""
    from policies.kube.objects import WARNING
    path = FIXTURES / "rules" / "TOPO012/fail/nnodes-from-configmap-elsewhere.yaml"
    [(sev, msg)] = [(p.severity, p.message) for p in problems_of(path) if p.rule == "TOPO012"]
    assert sev == WARNING and "unless ConfigMap world-settings (not in these manifests) does" in msg
    unit = Unit(str(path), "file", read(str(path)))
    unit.environment, errors = environment.load(FIXTURES / "rules" / "REF001" / "policy.yaml")
    assert not errors
    check_policies(unit)
    assert [p.severity for p in unit.problems if p.rule == "TOPO012"] == [ERROR]
    undefined = FIXTURES / "rules" / "TOPO012/fail/nnodes-undefined.yaml"
    assert [p.severity for p in problems_of(undefined) if p.rule == "TOPO012"] == [ERROR]
    # torchrun's PET_* settings where no flag gives them: the ConfigMap may set them, so torchrun's defaults
    # (1 node, 127.0.0.1, node rank 0) are not claimed on 2 pods
    pet = FIXTURES / "rules" / "TOPO012/fail/torchrun-pet-env-from-configmap-elsewhere.yaml"
    found = problems_of(pet)
    assert not [p.line() for p in found if p.severity == ERROR]
    [(sev, msg)] = [(p.severity, p.message) for p in found if p.rule == "TOPO012"]
    assert sev == WARNING and msg.startswith("no flag gives nnodes, processes per node, rendezvous endpoint, node")
    assert "which ConfigMap world-settings (not in these manifests) may set; unless it does" in msg


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_a_headless_service_not_in_the_manifests_is_an_error_only_where_they_are_self_contained(tmp_path):
    """TOPO004: the Service a Job's subdomain names may be applied from another file (a `service.yaml` beside
    `job.yaml`, each applied with `kubectl apply -f`): validated alone, a warning phrased as that condition; in an
    environment that declares its manifests self-contained (REF001's policy.yaml), an error."""
    from policies.kube.objects import WARNING
    fixture = FIXTURES / "rules/TOPO004/fail/service-missing.yaml"
    [alone] = [p for p in problems_of(fixture) if p.rule == "TOPO004"]
    assert alone.severity == WARNING and "among these manifests: unless a headless Service" in alone.message
    (tmp_path / "fail").mkdir()
    shutil.copy(FIXTURES / "rules/REF001/policy.yaml", tmp_path / "policy.yaml")
    shutil.copy(fixture, tmp_path / "fail/job.yaml")
    [declared] = [p for p in problems_of(tmp_path / "fail/job.yaml") if p.rule == "TOPO004"]
    assert declared.severity == ERROR
    assert "among these manifests, which self-contained-test declares self-contained" in declared.message


def test_res002_checks_a_trainjobs_gpu_request_as_merged_into_its_runtime(tmp_path):
    """RES002 on a TrainJob's resourcesPerNode: the Trainer merges it key by key into the runtime's node container
    (kubeflow/trainer v2.3.0 trainingruntime.go 199-233), so a GPU request is whole where the runtime sets the limit
    (found on Kueue's TrainJob page, whose request has no limit of its own). With the runtime in the manifests the
    merge is checked; with one the manifests do not hold, a warning says what the cluster's copy must have; a runtime
    without an mlPolicy merges nothing."""
    from policies.kube.objects import WARNING
    rules = FIXTURES / "rules/RES002"
    runtime_limit = (rules / "pass/trainjob-limit-in-runtime.yaml").read_text()

    def said(text: str) -> list[tuple[str, str]]:
        return [(p.severity, p.message) for p in problems_of(_write(tmp_path, text)) if p.rule == "RES002"]

    assert said(runtime_limit) == []
    two = runtime_limit.replace("nvidia.com/gpu: 1\n                  securityContext", "nvidia.com/gpu: 2\n"
                                "                  securityContext")
    assert said(two) == [(ERROR, "nvidia.com/gpu request 1 differs from the limit 2 in the node container of "
                                 "ClusterTrainingRuntime 'ddp-torch', once merged: the API server rejects the "
                                 "trainer's pods")]
    trainjob = "---\n" + runtime_limit.split("\n---\n")[-1]
    assert said(trainjob) == [(WARNING, "nvidia.com/gpu request 1 has no limit: the API server rejects the trainer's "
                                        "pods unless ClusterTrainingRuntime 'ddp-torch' (not in these manifests) sets "
                                        "limits.nvidia.com/gpu on its node container")]
    upstream = trainjob.replace("name: ddp-torch", "name: torch-distributed")
    [(sev, msg)] = said(upstream)
    assert sev == WARNING and msg.startswith("nvidia.com/gpu request 1 has no limit (none in ClusterTrainingRuntime "
                                             "'torch-distributed' as upstream installs it, kubeflow/trainer v2.3.0)")
    both = trainjob.replace("        cpu: '3'\n        memory: 12Gi\n      requests:",
                            "        cpu: '3'\n        memory: 12Gi\n        nvidia.com/gpu: 2\n      requests:")
    [(sev, msg)] = said(both)
    assert sev == WARNING and "differs from the limit 2" in msg and "if ClusterTrainingRuntime 'ddp-torch' (not in " \
        "these manifests) has an mlPolicy" in msg
    no_policy = (rules / "fail/request-without-limit.yaml").read_text()
    assert [s for s, _ in said(no_policy)] == [ERROR]
    start = no_policy.index("  mlPolicy:")
    end = no_policy.index("  template:", start)
    assert said(no_policy[:start] + no_policy[end:]) == []


def test_res002_on_a_runtimes_own_template_names_the_trainjobs_it_breaks(tmp_path):
    """A (Cluster)TrainingRuntime starts no pods: the API server admits it, and rejects the pods of the TrainJobs on
    it. A GPU request without a limit in the trainer's node container breaks only a TrainJob whose resourcesPerNode
    leaves it (kubeflow/trainer v2.3.0 trainingruntime.go 199-233): a warning on the runtime, an error on each such
    TrainJob in the manifests, the one without resourcesPerNode included. A container the merge does not reach (any
    container of a runtime without mlPolicy; an initializer's) breaks every TrainJob on it: an error."""
    from policies.kube.objects import WARNING
    text = (FIXTURES / "rules/RES002/pass/trainjob-limit-in-runtime.yaml").read_text()
    gap = text.replace("                    limits:\n                      nvidia.com/gpu: 1\n",
                       "                    requests:\n                      nvidia.com/gpu: 1\n")
    assert gap != text
    runtime = gap[:gap.index("---\napiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob")]

    def said(text: str) -> set[tuple[str, str, str]]:
        return {(p.severity, p.obj, p.message) for p in problems_of(_write(tmp_path, text)) if p.rule == "RES002"}

    warned = (WARNING, "ClusterTrainingRuntime/ddp-torch", "nvidia.com/gpu request 1 has no limit: the API server "
              "rejects the pods of a TrainJob on ClusterTrainingRuntime 'ddp-torch' unless its "
              "spec.trainer.resourcesPerNode sets limits.nvidia.com/gpu")
    assert said(runtime) == {warned}
    # The TrainJob requests the GPU itself: the merge is checked, as before.
    assert said(gap) == {(ERROR, "TrainJob/ddp-train", "nvidia.com/gpu request 1 has no limit in the node container "
                          "of ClusterTrainingRuntime 'ddp-torch', once merged: the API server rejects the trainer's "
                          "pods"), warned}
    # The TrainJob sets no resourcesPerNode, or one without the GPU: its pods get the runtime's request as it is.
    left = (ERROR, "TrainJob/ddp-train", "nvidia.com/gpu request 1 has no limit in the node container of "
            "ClusterTrainingRuntime 'ddp-torch', and spec.trainer.resourcesPerNode does not set nvidia.com/gpu: the "
            "API server rejects the trainer's pods")
    assert said(gap[:gap.index("    resourcesPerNode:")]) == {left, warned}
    at = gap.index("    resourcesPerNode:")
    assert said(gap[:at] + gap[at:].replace("        nvidia.com/gpu: 1\n", "")) == {left, warned}
    # The TrainJob mends it: only the runtime's warning stays (about other TrainJobs on it).
    mended = gap[:at] + gap[at:].replace("      requests:", "        nvidia.com/gpu: 1\n      requests:")
    assert said(mended) == {warned}
    # No mlPolicy: nothing is merged, every TrainJob on the runtime is rejected.
    start, end = runtime.index("  mlPolicy:"), runtime.index("  template:", runtime.index("  mlPolicy:"))
    assert said(runtime[:start] + runtime[end:]) == {(ERROR, "ClusterTrainingRuntime/ddp-torch", "nvidia.com/gpu "
                                                      "request 1 has no limit: the API server rejects the pods of "
                                                      "every TrainJob on ClusterTrainingRuntime 'ddp-torch'")}
    # A container other than `node` in the trainer's Job: the merge does not reach it.
    sidecar = runtime.replace("                  name: node\n", "                  name: node-sidecar\n")
    assert [(sev, msg.split(": ", 1)[1]) for sev, _, msg in said(sidecar) if "request 1" in msg] == \
        [(ERROR, "the API server rejects the pods of every TrainJob on ClusterTrainingRuntime 'ddp-torch'")]


def test_img003_on_a_runtime_and_a_trainjob(tmp_path):
    """A TrainJob's spec.trainer.command is the trainer's `node` container's command (kubeflow/trainer v2.3.0
    jobset/builder.go 126-135): one string with spaces there fails as it would in a pod template. In the runtime's
    own `node` container such a command breaks only a TrainJob that does not replace it: a warning phrased so; in
    another container of the runtime, every TrainJob on it: an error."""
    from policies.kube.objects import WARNING
    text = (FIXTURES / "rules/RES002/pass/trainjob-limit-in-runtime.yaml").read_text()

    def said(text: str) -> set[tuple[str, str, str | None, str]]:
        return {(p.severity, p.obj, p.field, p.message) for p in problems_of(_write(tmp_path, text))
                if p.rule == "IMG003"}

    assert said(text) == set()
    trainjob = text.replace("    command:\n    - torchrun\n", "    command:\n    - python /app/trainer/train.py\n")
    assert said(trainjob) == {(ERROR, "TrainJob/ddp-train", "spec.trainer.command[0]",
                               "spec.trainer.command[0] is 'python /app/trainer/train.py': the runtime starts a program of that "
                               "whole name (no shell splits a command): the container fails to start unless the "
                               "image has a file so named")}
    node = "                  image: ghcr.io/example/ddp-trainer:0.1.0\n                  name: node\n"
    runtime = text.replace(node, "                  command: [python train.py]\n" + node)
    where = "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].command[0]"
    assert said(runtime) == {(WARNING, "ClusterTrainingRuntime/ddp-torch", where, "container 'node' command[0] is "
                              "'python train.py': the runtime starts a program of that whole name (no shell splits a "
                              "command): the container fails to start unless the image has a file so named, in a "
                              "TrainJob on ClusterTrainingRuntime 'ddp-torch' unless its spec.trainer.command "
                              "replaces it")}
    other = runtime.replace("                  name: node\n", "                  name: node-sidecar\n")
    assert [sev for sev, *_ in said(other)] == [ERROR]


def test_restart003_says_gpus_are_held_only_where_the_pods_ask_for_them():
    """KAI's elastic PyTorchJob (tests/corpus) runs on CPU pods: its pods are held for ever, not 'their GPUs'."""
    cpu = [p.message for p in problems_of(FIXTURES.parent / "corpus/pytorchjob/kai-scheduler-pytorch-elastic.yaml")
           if p.rule == "RESTART003"]
    assert len(cpu) == 2 and not [m for m in cpu if "GPU" in m], cpu
    gpu = [p.message for p in problems_of(FIXTURES.parent / "corpus/pytorchjob/ai-on-eks-bionemo-esm1nv-pretrain.yaml")
           if p.rule == "RESTART003"]
    assert gpu and all("GPUs" in m for m in gpu), gpu


def test_img003_on_a_trainjob_that_keeps_its_runtimes_broken_command(tmp_path):
    """A TrainJob without spec.trainer.command runs its runtime's `node` command (jobset/builder.go 126-135): where
    that command is one string with spaces, the TrainJob's pods fail to start, an error on the TrainJob; one that sets
    its own command replaces it (the runtime keeps its warning, about other TrainJobs)."""
    text = (FIXTURES / "rules/RES002/pass/trainjob-limit-in-runtime.yaml").read_text()
    node = "                  image: ghcr.io/example/ddp-trainer:0.1.0\n                  name: node\n"
    runtime = text.replace(node, "                  command: [python train.py]\n" + node)
    keeps = runtime.replace("    command:\n    - torchrun\n", "")
    assert keeps != runtime

    def errors(text: str) -> list[tuple[str, str | None, str]]:
        return [(p.obj, p.field, p.message) for p in problems_of(_write(tmp_path, text))
                if p.rule == "IMG003" and p.severity == ERROR]

    assert errors(runtime) == []
    assert errors(keeps) == [("TrainJob/ddp-train", "spec.trainer.command", "spec.trainer.command is not set, so "
                              "container 'node' of ClusterTrainingRuntime 'ddp-torch' keeps its command, whose "
                              "command[0] is 'python train.py': the runtime starts a program of that whole name (no "
                              "shell splits a command): the container fails to start unless the image has a file so "
                              "named")]


def test_argo012_is_an_error_only_where_the_environment_declares_kueues_integration():
    """Whether Kueue runs the kind's integration is the environment's declaration (kueueFrameworks): 64x8-h100
    declares kubeflow.org/pytorchjob, so a queued PyTorchJob's written suspend is an error; a folder no declaration
    covers gets a warning phrased as that condition."""
    def said(name: str) -> list[tuple[str, str]]:
        return [(p.severity, p.message) for p in problems_of(FIXTURES / "rules/ARGO012/fail" / name)
                if p.rule == "ARGO012"]

    from policies.kube.objects import WARNING
    declared, undeclared = said("pytorchjob-suspend-not-ignored.yaml"), said("pytorchjob-suspend-undeclared.yaml")
    assert [sev for sev, _ in declared] == [ERROR] and "kueueFrameworks" not in declared[0][1]
    assert [sev for sev, _ in undeclared] == [WARNING]
    assert undeclared[0][1].endswith("(where the cluster's Kueue has the kubeflow.org/PyTorchJob integration on: no "
                                     "kueueFrameworks is declared)")


@pytest.mark.parametrize("replicas, severity, says", [
    (2, "warning", "the world forms at 2 nodes only"),
    (1, ERROR, "it waits for 2 nodes (the range's maximum) and 1 pod run, so the world never forms"),
    (3, ERROR, "a world of 2 nodes (the range's maximum) and 3 pods run, so the pods past node rank 1"),
])
def test_elastic002_static_is_an_error_only_where_the_world_of_the_maximum_cannot_form(tmp_path, replicas, severity,
                                                                                       says):
    """Static rendezvous makes a world of the range's maximum (static_tcp_rendezvous.py: world_size = max_nodes):
    exactly that many pods form it, fixed; fewer or more do not."""
    text = (FIXTURES / "rules" / "ELASTIC002" / "fail" / "range-on-static.yaml").read_text()
    assert "  replicas: 2\n" in text
    found = [p for p in problems_of(_write(tmp_path, text.replace("  replicas: 2\n", f"  replicas: {replicas}\n")))
             if p.rule == "ELASTIC002"]
    assert [p.severity for p in found] == [severity] and says in found[0].message, [p.line() for p in found]
