"""Katib's Experiment (policies/launchers/katib.py): the webhook's refusals come out as TOPO011 for the reason
upstream gives, the trial's job is made as Katib makes it (parameters put in, its name and namespace set) and is
checked by its own launcher, every problem about it reported against the Experiment at the field that holds it."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from policies.report import engine
from policies.rules import environment
from policies.launchers import katib
from policies.kube.objects import ERROR, INFO, Manifest

from conftest import FIXTURES, REPO

KATIB = REPO / "tests" / "conformance" / katib.LAUNCHER.conformance_folder
CASES = sorted(KATIB.glob("*.yaml"))
EXAMPLE = yaml.safe_load((REPO / "tests/corpus/katib/katib-pytorchjob-mnist.yaml").read_text())


def validate(objs: list[dict], env: environment.Environment | None = None) -> engine.Unit:
    unit = engine.Unit("experiment.yaml", "file", [Manifest(o, "experiment.yaml", i) for i, o in enumerate(objs)],
                       environment=env)
    engine.check_policies(unit)
    return unit


def errors(unit: engine.Unit) -> list:
    return [p for p in unit.problems if p.severity == ERROR]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_upstream_case_for_its_reason(path):
    """A refused case is refused by Katib's webhook model (not by some other rule); an admitted one has no error."""
    doc = yaml.safe_load(path.read_text())
    unit = validate(doc["input"])
    if doc["expect"].get("rejected"):
        refused = [p for p in errors(unit) if p.rule == "TOPO011" and "Katib's webhook refuses" in p.message]
        assert refused, [p.line() for p in unit.problems]
        assert all(p.obj == "Experiment/fakens/fake" for p in refused)
        assert all(p.field.startswith(("spec.", "metadata.")) for p in refused)
    else:  # admitted (what the trial's job then does is the other rules' business)
        assert not [p.line() for p in errors(unit) if p.rule == "SCHEMA" or "Katib's webhook" in p.message]
        # upstream's fake trial is a batch Job without restartPolicy: the API server's Job validation refuses the
        # trial's Job when Katib creates it (pkg/apis/batch/validation validateJobSpec at kubernetes v1.36.0).
        others = [p for p in errors(unit) if p.rule == "TOPO011" and "Katib's webhook" not in p.message]
        assert all(p.field.endswith(("trialSpec.spec.template.spec.restartPolicy",
                                "configMap.spec.template.spec.restartPolicy")) for p in others), others


def test_trial_takes_the_feasible_minimum_and_katibs_name():
    unit = validate([EXAMPLE])
    (w,) = unit.workloads
    assert w.manifest.kind == "PyTorchJob" and w.manifest.namespace == "kubeflow"
    assert w.manifest.name == f"pytorchjob-mnist-{katib.TRIAL_SUFFIX}" and len(katib.TRIAL_SUFFIX) == 8
    argv = w.pod(0).argv()[0]
    assert "--lr=0.01" in argv and "--momentum=0.5" in argv
    assert w.copies == 3
    assert any("lr=0.01" in n and "3 run at once" in n for n in w.notes)
    # The Experiment in the file is left as it was written.
    assert "${trialParameters.learningRate}" in str(unit.manifests[0].obj)


def test_list_parameter_takes_its_first_value():
    exp = copy.deepcopy(EXAMPLE)
    exp["spec"]["parameters"][1] = {"name": "momentum", "parameterType": "categorical",
                                    "feasibleSpace": {"list": ["0.9", "0.8"]}}
    (w,) = validate([exp]).workloads
    assert "--momentum=0.9" in w.pod(0).argv()[0]


def test_problems_about_the_trial_point_at_the_experiment():
    exp = copy.deepcopy(EXAMPLE)
    master = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["pytorchReplicaSpecs"]["Master"]
    master["replicas"] = 2  # the PyTorchJob webhook refuses more than one Master
    found = [p for p in errors(validate([exp])) if p.rule == "TOPO011"]
    assert found, "the trial's PyTorchJob was not checked"
    for p in found:
        assert p.obj == "Experiment/kubeflow/pytorchjob-mnist"
        assert p.field.startswith("spec.trialTemplate.trialSpec."), p.field
        assert p.message.startswith("in each trial's PyTorchJob: ")


def test_trial_schema_is_checked_at_the_experiments_field():
    from policies.schema import BuiltinValidator
    exp = copy.deepcopy(EXAMPLE)
    spec = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]
    spec["pytorchReplicaSpecz"] = spec.pop("pytorchReplicaSpecs")
    unit = engine.Unit("experiment.yaml", "file", [Manifest(exp, "experiment.yaml", 0)])
    engine.validate([unit], BuiltinValidator())
    schema = [p for p in unit.problems if p.rule == "SCHEMA"]
    assert schema and all(p.obj == "Experiment/kubeflow/pytorchjob-mnist" for p in schema)
    assert "spec.trialTemplate.trialSpec.spec.pytorchReplicaSpecz" in {p.field for p in schema}


def test_suppression_on_the_experiment_covers_its_trial():
    exp = copy.deepcopy(EXAMPLE)
    exp["metadata"]["annotations"] = {engine.SUPPRESS_ANNOTATION: "IMG001=the example pins :latest on purpose"}
    unit = validate([exp])
    assert not [p for p in unit.problems if p.rule == "IMG001"]
    assert {p.rule for p in unit.suppressed} == {"IMG001"}


def gpu_experiment(parallel: int) -> dict:
    exp = copy.deepcopy(EXAMPLE)
    exp["spec"]["parallelTrialCount"] = parallel
    for rtype in ("Master", "Worker"):
        rs = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["pytorchReplicaSpecs"][rtype]
        rs["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 4},
                                                                "requests": {"nvidia.com/gpu": 4}}
    return exp


@pytest.mark.parametrize("parallel,fires", [(3, True), (2, False)])
def test_gpu_capacity_counts_the_trials_that_run_at_once(tmp_path: Path, parallel: int, fires: bool):
    declared = tmp_path / "policy.yaml"
    declared.write_text("apiVersion: policies.ddp/v1\nkind: Environment\nmetadata: {name: lab}\n"
                        "spec: {gpuCapacity: 16}\n")
    env, problems = environment.load(declared)
    assert not problems
    found = [p for p in validate([gpu_experiment(parallel)], env).problems if p.rule == "RES004"]
    assert bool(found) == fires, [p.line() for p in found]  # 2 pods x 4 GPUs x 3 trials = 24 > 16


def test_parallel_trials():
    assert katib.parallel_trials({}) == katib.DEFAULT_PARALLEL
    assert katib.parallel_trials({"parallelTrialCount": 5, "maxTrialCount": 2}) == 2
    assert katib.parallel_trials({"parallelTrialCount": 1}) == 1


def test_template_in_a_configmap_is_said_not_checked():
    exp = copy.deepcopy(EXAMPLE)
    tt = exp["spec"]["trialTemplate"]
    tt.pop("trialSpec")
    tt["configMap"] = {"configMapName": "trial-templates", "configMapNamespace": "kubeflow",
                       "templatePath": "pytorch.yaml"}
    # Katib defaults the trial's success and failure conditions only from a trialSpec's kind.
    refused = errors(validate([exp]))
    assert [p.field for p in refused] == ["spec.trialTemplate"] and "ConfigMap" in refused[0].message
    tt["successCondition"] = tt["failureCondition"] = "status.conditions.#(type==\"Done\")#"
    unit = validate([exp])
    assert not errors(unit) and not unit.workloads
    info = [p for p in unit.problems if p.rule == "TOPO011" and p.severity == INFO]
    assert info and "was not checked" in info[0].message


def test_missing_metadata_label_reference_is_an_error():
    exp = copy.deepcopy(EXAMPLE)
    exp["spec"]["trialTemplate"]["trialParameters"].append({"name": "team", "reference": "${trialSpec.Labels[team]}"})
    cmd = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    cmd["containers"][0]["command"].append("--team=${trialParameters.team}")
    found = [p for p in errors(validate([exp])) if p.rule == "TOPO011"]
    assert any("labels 'team'" in p.message for p in found), [p.line() for p in found]


def test_experiment_is_reported_modelled_not_as_a_wrapper():
    unit = validate([EXAMPLE])
    assert not [p for p in unit.problems if p.rule == "MODEL"]


def test_rule_fixture_for_katib_exists():
    assert (FIXTURES / "rules/TOPO001/fail/katib-trainjob-trial.yaml").is_file()


def test_a_trial_that_would_blow_up_is_not_made():
    """A long parameter value put into many placeholders: bounded, said in one info line, nothing made."""
    exp = copy.deepcopy(EXAMPLE)
    exp["spec"]["parameters"][0]["feasibleSpace"] = {"list": ["x" * 100_000]}
    master = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    master["containers"][0]["args"] = ["${trialParameters.learningRate}"] * 200
    unit = validate([exp])
    assert not unit.workloads
    said = [p for p in unit.problems if p.rule == "TOPO011" and p.severity == INFO]
    assert said and "was not checked" in said[0].message


def configmap_experiment(text: str | None = None, namespace: str = "kubeflow", path: str = "pytorch.yaml",
                         ) -> tuple[dict, dict]:
    """The example with its trialSpec moved to a ConfigMap `trial-templates` (as YAML text under `path`), and that
    ConfigMap in `namespace` ('' for none written)."""
    exp = copy.deepcopy(EXAMPLE)
    tt = exp["spec"]["trialTemplate"]
    spec = tt.pop("trialSpec")
    tt["configMap"] = {"configMapName": "trial-templates", "configMapNamespace": "kubeflow", "templatePath": path}
    tt["successCondition"] = tt["failureCondition"] = "status.conditions.#(type==\"Done\")#"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "trial-templates"},
          "data": {"pytorch.yaml": yaml.safe_dump(spec, sort_keys=False) if text is None else text}}
    if namespace:
        cm["metadata"]["namespace"] = namespace
    return cm, exp


def refusals(unit: engine.Unit) -> list:
    return [p for p in errors(unit) if p.rule == "TOPO011" and "Katib's webhook refuses" in p.message]


def test_template_in_a_configmap_of_the_manifests_is_the_trial():
    """generator.go:210-222: data[templatePath] of the ConfigMap in configMapNamespace is the trial's job, made and
    checked as a trialSpec's, every problem about it reported at spec.trialTemplate.configMap."""
    cm, exp = configmap_experiment()
    unit = validate([cm, exp])
    assert not errors(unit), [p.line() for p in errors(unit)]
    (w,) = unit.workloads
    assert w.manifest.ref == f"PyTorchJob/kubeflow/pytorchjob-mnist-{katib.TRIAL_SUFFIX}" and w.copies == 3
    assert "--lr=0.01" in w.pod(0).argv()[0]
    assert any("its job from ConfigMap kubeflow/trial-templates key pytorch.yaml" in n for n in w.notes), w.notes
    master = EXAMPLE["spec"]["trialTemplate"]["trialSpec"]["spec"]["pytorchReplicaSpecs"]["Master"]
    cm, exp = configmap_experiment(yaml.safe_dump(EXAMPLE["spec"]["trialTemplate"]["trialSpec"]).replace(
        f"replicas: {master['replicas']}", "replicas: 2", 1))
    found = [p for p in errors(validate([cm, exp])) if p.rule == "TOPO011"]
    assert found and all(p.obj == "Experiment/kubeflow/pytorchjob-mnist" for p in found)
    assert all(p.field.startswith("spec.trialTemplate.configMap.spec.") for p in found), [p.field for p in found]
    assert all(p.message.startswith("in each trial's PyTorchJob (from ConfigMap kubeflow/trial-templates key "
                                    "pytorch.yaml): ") for p in found)


def test_configmap_without_the_template_path_is_refused():
    cm, exp = configmap_experiment(path="missing.yaml")
    (p,) = refusals(validate([cm, exp]))
    assert p.field == "spec.trialTemplate.configMap.templatePath"
    assert "no key 'missing.yaml'" in p.message and "pytorch.yaml" in p.hint


@pytest.mark.parametrize("text", ["apiVersion: batch/v1\nkind: Job\nspec: {template: [\n",  # not YAML
                                  "- a list\n- not an object\n",
                                  "apiVersion: batch/v1\nspec: {}\n"])  # no kind: Unstructured refuses it
def test_configmap_template_that_does_not_read_is_refused(text):
    cm, exp = configmap_experiment(text + "# ${trialParameters.learningRate} ${trialParameters.momentum}\n")
    unit = validate([cm, exp])
    (p,) = refusals(unit)
    assert p.field == "spec.trialTemplate.configMap" and "unable to convert spec.trialTemplate" in p.message
    assert not unit.workloads


def test_configmap_template_without_a_trial_parameter_is_refused():
    """validator.go:396-401: each trial parameter's placeholder is in the template text."""
    cm, exp = configmap_experiment()
    cm["data"]["pytorch.yaml"] = cm["data"]["pytorch.yaml"].replace("${trialParameters.momentum}", "0.5")
    (p,) = refusals(validate([cm, exp]))
    assert p.field == "spec.trialTemplate.trialParameters[1].name" and "'momentum' is not used in the trial " \
        "template in ConfigMap kubeflow/trial-templates key pytorch.yaml" in p.message


def test_configmap_template_with_an_undeclared_placeholder_or_a_name_is_refused():
    cm, exp = configmap_experiment()
    cm["data"]["pytorch.yaml"] = "metadata:\n  name: fixed\n" + cm["data"]["pytorch.yaml"]
    (p,) = refusals(validate([cm, exp]))
    assert p.field == "spec.trialTemplate.configMap" and "sets metadata.name" in p.message
    cm, exp = configmap_experiment()
    cm["data"]["pytorch.yaml"] += "# ${trialParameters.batchSize}\n"
    (p,) = refusals(validate([cm, exp]))
    assert "${trialParameters.batchSize}" in p.message


@pytest.mark.parametrize("namespace,said", [("team-a", "is in namespace team-a, not kubeflow"),
                                            ("", "has no namespace written")])
def test_configmap_not_in_its_namespace_is_not_read(namespace, said):
    """Katib reads the ConfigMap in configMapNamespace only: one elsewhere is not the template, and one without a
    namespace may be applied anywhere. Never an error about what the manifests do not show."""
    cm, exp = configmap_experiment("not: [yaml", namespace=namespace)
    unit = validate([cm, exp])
    assert not errors(unit) and not unit.workloads
    (p,) = [p for p in unit.problems if p.rule == "TOPO011"]
    assert p.severity == INFO and said in p.message and "was not checked" in p.message


def test_configmap_template_first_document_and_json():
    """util.ConvertStringToUnstructured reads the first document (YAMLOrJSONDecoder), JSON where it starts with {."""
    spec = EXAMPLE["spec"]["trialTemplate"]["trialSpec"]
    cm, exp = configmap_experiment("---\n" + yaml.safe_dump(spec) + "---\nnot: [yaml\n")
    (w,) = validate([cm, exp]).workloads
    assert w.manifest.kind == "PyTorchJob"
    import json
    cm, exp = configmap_experiment(json.dumps(spec, indent=2))
    (w,) = validate([cm, exp]).workloads
    assert "--momentum=0.5" in w.pod(0).argv()[0]


def test_configmap_template_meta_reference_reads_its_labels():
    """generator.go:116-123: the template read with its placeholders left in gives the labels a meta reference takes."""
    spec = copy.deepcopy(EXAMPLE["spec"]["trialTemplate"]["trialSpec"])
    spec["metadata"] = {"labels": {"team": "vision"}}
    spec["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"].append(
        "--team=${trialParameters.team}")
    cm, exp = configmap_experiment(yaml.safe_dump(spec))
    exp["spec"]["trialTemplate"]["trialParameters"].append({"name": "team", "reference": "${trialSpec.Labels[team]}"})
    unit = validate([cm, exp])
    assert not errors(unit)
    assert "--team=vision" in unit.workloads[0].pod(0).argv()[0]


def test_configmap_template_broken_by_a_value_cannot_make_the_trial():
    """The webhook reads the template with `test-value` put in (validator.go:403-419); a value that breaks the YAML
    once put in breaks the trial the controller makes (generator.go:96-100)."""
    cm, exp = configmap_experiment("apiVersion: batch/v1\nkind: Job\nspec:\n  x: ${trialParameters.learningRate}\n"
                                   "  y: ${trialParameters.momentum}\n")
    exp["spec"]["parameters"][0]["feasibleSpace"] = {"list": ["a: b"]}
    unit = validate([cm, exp])
    assert not refusals(unit) and not unit.workloads
    (p,) = [p for p in errors(unit) if p.rule == "TOPO011"]
    assert "Katib cannot make that trial" in p.message and "lr=a: b" in p.message


def test_the_trial_follows_the_manifests_it_is_read_with():
    """The trial is worked out per bundle: the same Experiment read without, then with its ConfigMap."""
    from policies import launchers
    cm, exp = configmap_experiment()
    m = Manifest(exp, "experiment.yaml", 0)
    _, children, checks = launchers.expand([m])
    assert not children and [c.severity for c in checks] == [INFO]
    _, children, checks = launchers.expand([Manifest(cm, "cm.yaml", 0), m])
    assert [c.manifest.kind for c in children] == ["PyTorchJob"] and not checks
