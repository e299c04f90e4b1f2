"""The kubeconform path, with the real binary: kubeconform v0.7.0 built from its upstream tag
(../shared/tools/README.md), or the one named by $KUBECONFORM_TEST_BIN, bin/kubeconform or PATH. Without one these
tests skip and say why; the output shapes are also checked from captured reports, which need no binary.

- Verdicts agree: every fixture under tests/fixtures/ (overlays rendered, files read as `make validate` reads a
  folder) gets the same schema problems (rule, object, field) from kubeconform as from jsonschema-rs.
- kubeconform starts once per run, whatever the number of overlays.
- Both report shapes name the field: 0.7+ (the error tree inside `msg`, `validationErrors` only its top) and 0.6
  (`validationErrors` one entry per failing field).
"""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, REPO, run_cli
from policies.report import engine
from policies import schema as stage
from policies.kube.objects import Manifest
from policies.schema import BuiltinValidator, KubeconformValidator


def _binary() -> Path | None:
    env = os.environ.get("KUBECONFORM_TEST_BIN")
    candidates = [Path(env)] if env else []
    candidates += [REPO / "bin" / "kubeconform"]
    if shutil.which("kubeconform"):
        candidates.append(Path(shutil.which("kubeconform")))
    # The shared tools folder beside the checkout (a worktree sits one level deeper).
    candidates += [base / "shared" / "tools" / "kubeconform" for base in (REPO.parent, REPO.parent.parent)]
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


BINARY = _binary()
needs_binary = pytest.mark.skipif(BINARY is None, reason="no kubeconform binary: set KUBECONFORM_TEST_BIN, run make "
                                  "setup, or provide ../shared/tools/kubeconform")
CAPTURED = FIXTURES / "kubeconform"


def key(problems) -> list[tuple[str, str, str]]:
    return sorted((p.rule, p.obj or "", p.field or "") for p in problems)


@pytest.fixture(scope="module")
def fixture_units() -> list[engine.Unit]:
    units = engine.collect([str(FIXTURES)], FIXTURES)
    return [u for u in units if not u.failed_input and u.manifests]


@pytest.fixture(scope="module")
def both(fixture_units):
    batches = [u.manifests for u in fixture_units]
    return BuiltinValidator().validate_units(batches), KubeconformValidator(BINARY).validate_units(batches)


@needs_binary
def test_verdicts_agree_on_every_fixture(fixture_units, both):
    builtin, kubeconform = both
    assert len(fixture_units) > 200  # the rule, schema, upstream, overlay and Argo CD fixtures
    assert sum(bool(p) for p in builtin) >= 15  # the schema fixtures that must fail do
    differ = [(u.source, key(b), key(k)) for u, b, k in zip(fixture_units, builtin, kubeconform) if key(b) != key(k)]
    assert differ == []
    assert not any(p.rule == "SCHEMA-NOT-RUN" for ps in kubeconform for p in ps)


@needs_binary
def test_schema_fail_fixtures_name_their_fields_with_kubeconform(fixture_units, both):
    _, kubeconform = both
    by_source = {u.source: ps for u, ps in zip(fixture_units, kubeconform)}
    for path in sorted((FIXTURES / "schema" / "fail").glob("*.yaml")):
        want = sorted((ln.split(":", 1)[1].split(None, 1)[0], ln.split(":", 1)[1].split(None, 1)[1].strip())
                      for ln in path.read_text().splitlines() if ln.startswith("# expect:"))
        got = sorted((p.rule, p.field or "-") for p in by_source[str(path)])
        assert got == want, path.name


@needs_binary
def test_kubeconform_starts_once_per_run(tmp_path, monkeypatch):
    log = tmp_path / "calls"
    wrapper = tmp_path / "kubeconform"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> "{log}"\nexec "{BINARY}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    units = engine.collect([str(REPO / "overlays"), str(REPO / "argocd")], REPO / "overlays")
    assert len(units) >= 10
    engine.validate(units, KubeconformValidator(wrapper))
    assert log.read_text().splitlines() == ["-v", "-strict"]  # the version, then one run for every overlay
    assert not engine.failed(units), [p.line() for u in units for p in u.problems][:3]


@needs_binary
def test_kustomize_configuration_is_one_line_with_kubeconform_too(tmp_path):
    """As with the builtin validator (test_inputs.py): a Kustomization in a file kustomize does not read is one
    SCHEMA-INPUT line, and kubeconform is not asked about it."""
    import subprocess
    import sys

    f = tmp_path / "x.yaml"
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n"
                 "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n")
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--schema", "kubeconform", str(f)],
                          cwd=REPO, env={**os.environ, "KUBECONFORM": str(BINARY)}, capture_output=True, text=True,
                          timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("error", "warning", "info"))]
    assert proc.returncode == 1 and len(lines) == 1, proc.stdout + proc.stderr
    assert lines[0].startswith(f"error SCHEMA-INPUT {f}: Kustomization/ kind: a Kustomization is kustomize's")


@needs_binary
def test_cli_with_kubeconform_names_the_field(tmp_path):
    f = tmp_path / "svc.yaml"
    # Non-string keys are read as kubectl reads them: the label `5` is fine, `true:` under spec is an unknown field.
    f.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: web, labels: {5: x}}\nspec:\n  ports: [{port: 80}]\n"
                 "  portz: 1\n  type: 5\n  true: 1\n")
    env = {**os.environ, "KUBECONFORM": str(BINARY)}
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--schema", "kubeconform", str(f)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = sorted(ln for ln in proc.stdout.splitlines() if ln.startswith("error"))
    assert len(errors) == 3, proc.stdout
    assert "Service/web spec.portz: additional properties " in errors[0]
    assert "Service/web spec.true: additional properties " in errors[1]
    assert "Service/web spec.type: got number, want null or string" in errors[2]
    assert "schema: kubeconform v" in proc.stdout.splitlines()[-1]


# Scalars that go-yaml v2 (kubeconform's and kubectl's reader) and PyYAML read differently: `0o644`, `08`, `0X1E`,
# `2e0` are numbers, `n` is false. Only the env value is wrong: it reaches the API server as a boolean.
SCALARS = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2e0
  revisionHistoryLimit: 08
  selector: {matchLabels: {app: w}}
  template:
    metadata: {labels: {app: w}}
    spec:
      terminationGracePeriodSeconds: 0X1E
      containers:
      - name: w
        image: nginx:1.27
        env:
        - {name: A, value: n}
      volumes:
      - name: cfg
        configMap: {name: cfg, defaultMode: 0o644}
"""


@needs_binary
def test_scalars_are_read_as_kubeconform_reads_the_file_itself(tmp_path):
    """kubeconform run by hand on the file as written (its own YAML reader, the repository's schemas) and both
    validators of `make validate` find the same one problem: no error for the numbers go-yaml reads, the boolean
    env value refused."""
    import subprocess
    import sys

    f = tmp_path / "deploy.yaml"
    f.write_text(SCALARS)
    schemas = REPO / "schemas" / "kubernetes"
    version = next(p.name for p in schemas.iterdir() if p.name.endswith("-standalone-strict")).split("-")[0]
    by_hand = subprocess.run([str(BINARY), "-strict", "-output", "json", "-kubernetes-version", version.lstrip("v"),
                              "-schema-location", f"{schemas}/{{{{.NormalizedKubernetesVersion}}}}-standalone"
                              "{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json", str(f)],
                             capture_output=True, text=True, timeout=120)
    [resource] = json.loads(by_hand.stdout)["resources"]
    assert resource["status"] == "statusInvalid", by_hand.stdout
    # 0.7's report: the tree of errors in `msg` (validationErrors holds only its top)
    assert resource["msg"].count("want") == 1 and "not allowed" not in resource["msg"], resource["msg"]
    assert "at '/spec/template/spec/containers/0/env/0/value': got boolean, want null or string" in resource["msg"]
    env = {**os.environ, "KUBECONFORM": str(BINARY)}
    for schema in ("builtin", "kubeconform"):
        proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--schema", schema, "--format", "json",
                               str(f)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        found = [(p["rule"], p["field"]) for p in json.loads(proc.stdout)["problems"] if p["rule"] == "SCHEMA"]
        assert found == [("SCHEMA", "spec.template.spec.containers[0].env[0].value")], (schema, proc.stdout)


# ---------------------------------------------------------------- captured reports (no binary needed)

def _fail_fixture(name: str) -> Manifest:
    path = FIXTURES / "schema" / "fail" / name
    [doc] = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return Manifest(doc, name, 0)


def test_captured_v070_report_names_every_field_like_builtin():
    """tests/fixtures/kubeconform/v0.7.0-schema-fail.json: kubeconform v0.7.0's real report over the schema/fail
    fixtures (paths shortened): nested errors live only in `msg`, under a top-level `validation failed`."""
    report = json.loads((CAPTURED / "v0.7.0-schema-fail.json").read_text())
    builtin = BuiltinValidator()
    kc = KubeconformValidator.__new__(KubeconformValidator)  # no binary needed to read a report
    checked = 0
    for res in report["resources"]:
        if res["status"] != "statusInvalid":
            continue
        m = _fail_fixture(res["filename"])
        path = stage.find_schema(m.api_version, m.kind)
        assert key(kc._result_problems(m, path, res)) == key(builtin.validate([m])), res["filename"]
        checked += 1
    assert checked >= 15
    two = next(r for r in report["resources"] if r["filename"] == "job-two-errors.yaml")
    assert two["validationErrors"] == [{"path": "/spec", "msg": "validation failed"}]  # the field is only in msg


def test_v07_message_tree_keeps_the_leaves():
    msg = ("problem validating schema. Check JSON formatting: jsonschema validation failed with "
           "'file:///s/job-batch-v1.json#' - at '/spec': validation failed   - at '/spec/backoffLimit': got string, "
           "want null or integer   - at '/spec/template': validation failed     - at "
           "'/spec/template/spec/containers/0': additional properties 'a', 'b' not allowed   - at '': missing "
           "property 'kind'")
    assert stage.kubeconform_message_errors(msg) == [
        {"path": "/spec/backoffLimit", "msg": "got string, want null or integer"},
        {"path": "/spec/template/spec/containers/0", "msg": "additional properties 'a', 'b' not allowed"},
        {"path": "", "msg": "missing property 'kind'"},
    ]


def test_v06_shape_uses_validation_errors():
    """kubeconform 0.6 (santhosh-tekuri/jsonschema v5; shape from its pkg/validator/validator.go at v0.6.7):
    `validationErrors` holds one entry per failing field and `msg` only the first."""
    m = _fail_fixture("job-two-errors.yaml")
    res = {"status": "statusInvalid", "msg": "problem validating schema. Check JSON formatting: jsonschema: "
           "'/spec/backoffLimit' does not validate with file:///s/job-batch-v1.json#/properties/spec/properties/"
           "backoffLimit/type: expected integer or null, but got string",
           "validationErrors": [
               {"path": "/spec/backoffLimit", "msg": "expected integer or null, but got string"},
               {"path": "/spec/template/spec/containers/0", "msg": "additionalProperties 'resource' not allowed"}]}
    kc = KubeconformValidator.__new__(KubeconformValidator)
    got = kc._result_problems(m, stage.find_schema(m.api_version, m.kind), res)
    assert key(got) == key(BuiltinValidator().validate([m]))
    assert [p.hint for p in got if p.field.endswith("resource")] == ['did you mean "resources"?']


@needs_binary
def test_katib_trial_schema_problems_agree():
    """A Katib trial's job is schema-checked as a child of its Experiment: both validators report its problems at
    the Experiment's spec.trialTemplate.trialSpec field."""
    exp = yaml.safe_load((REPO / "tests/corpus/katib/katib-pytorchjob-mnist.yaml").read_text())
    spec = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]
    spec["pytorchReplicaSpecz"] = spec.pop("pytorchReplicaSpecs")
    found = []
    for validator in (BuiltinValidator(), KubeconformValidator(BINARY)):
        unit = engine.Unit("experiment.yaml", "file", [Manifest(exp, "experiment.yaml", 0)])
        engine.validate([unit], validator)
        found.append(key(p for p in unit.problems if p.rule.startswith("SCHEMA")))
    assert found[0] == found[1]
    assert ("SCHEMA", "Experiment/kubeflow/pytorchjob-mnist",
            "spec.trialTemplate.trialSpec.spec.pytorchReplicaSpecz") in found[0]
