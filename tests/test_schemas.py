"""Tests for the schema stage (policies/schema/) and the schema generator (scripts/gen_schemas.py).

Fixtures: tests/fixtures/schema/pass/*.yaml must produce no problem; each tests/fixtures/schema/fail/*.yaml holds one
object and `# expect: RULE field` lines (field `-` for none) that must match the problems exactly.
"""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from policies import schema as stage
from policies.kube.objects import Manifest
from policies.schema import BuiltinValidator, KubeconformValidator, ValidatorUnavailable, find_schema, make_validator

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "schema"
PASS = sorted((FIXTURES / "pass").glob("*.yaml"))
FAIL = sorted((FIXTURES / "fail").glob("*.yaml"))
GEN = REPO / "scripts" / "gen_schemas.py"
CRDS_DIR = REPO / "crds"  # the upstream CRDs, committed (crds/SOURCES.md)


def load(path: Path) -> list[Manifest]:
    rel = path.relative_to(REPO).as_posix()
    return [Manifest(d, rel, i) for i, d in enumerate(yaml.safe_load_all(path.read_text())) if d is not None]


def expectations(path: Path) -> list[tuple[str, str | None]]:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("# expect:"):
            rule, field = line.split(":", 1)[1].split(None, 1)
            out.append((rule, None if field.strip() == "-" else field.strip()))
    assert out, f"{path.name} has no `# expect:` line"
    return out


def summary(problems) -> list[tuple[str, str, str | None, str | None]]:
    return [(p.rule, p.source, p.obj, p.field) for p in problems]


@pytest.fixture(scope="module")
def builtin() -> BuiltinValidator:
    return BuiltinValidator()


# ---------------------------------------------------------------- fixtures through the in-process validator

@pytest.mark.parametrize("path", PASS, ids=[p.name for p in PASS])
def test_valid_objects_pass(builtin, path):
    manifests = load(path)
    assert manifests
    assert [p.line() for p in builtin.validate(manifests)] == []


@pytest.mark.parametrize("path", FAIL, ids=[p.name for p in FAIL])
def test_invalid_objects_fail_with_field_path(builtin, path):
    manifests = load(path)
    assert len(manifests) == 1, "one object per fail fixture"
    problems = builtin.validate(manifests)
    assert sorted((p.rule, p.field) for p in problems) == sorted(expectations(path)), [p.line() for p in problems]
    for p in problems:
        # (a custom resource whose CRD is not in crds/ could not be checked: a warning; everything else an error)
        crd_missing = p.rule == "SCHEMA-MISSING" and ("custom resource" in p.message or "pinned in crds/" in p.message)
        assert p.source == manifests[0].source and p.obj == manifests[0].ref
        assert p.severity == ("warning" if crd_missing else "error"), p.line()
        assert p.message and "\n" not in p.message and len(p.message) <= stage.MAX_MESSAGE


VERSIONS = json.loads((REPO / "schemas" / "versions.json").read_text())
BUILTIN = [(k["apiVersion"], k["kind"]) for k in VERSIONS["kubernetes"]["kinds"]]


def test_every_crd_schema_has_a_passing_fixture():
    wanted = {(f"{c['group']}/{v['name']}", c["kind"]) for c in VERSIONS["crds"] for v in c["versions"]}
    covered = {(m.api_version, m.kind) for path in PASS for m in load(path)}
    assert wanted - covered == set()
    for api, kind in wanted | set(BUILTIN):
        assert find_schema(api, kind) is not None, (api, kind)


def test_every_builtin_kind_of_the_pinned_version_has_a_schema():
    # Derived from the OpenAPI definitions, not a hand list: more than the 32 kinds a list once held, each one once.
    assert len(BUILTIN) == len(set(BUILTIN)) > 90
    for kind in [("v1", "ReplicationController"), ("autoscaling/v1", "HorizontalPodAutoscaler"),
                 ("autoscaling/v2", "HorizontalPodAutoscaler"), ("v1", "Endpoints"), ("apps/v1", "ControllerRevision"),
                 ("discovery.k8s.io/v1", "EndpointSlice"), ("coordination.k8s.io/v1", "Lease"),
                 ("storage.k8s.io/v1", "CSIDriver"), ("resource.k8s.io/v1beta2", "ResourceClaim"),
                 ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")]:
        assert kind in BUILTIN, kind
    assert not [k for k in BUILTIN if k[1].endswith("List") or k[1] in ("Status", "DeleteOptions", "WatchEvent")]


def minimal(schema: dict, defs: dict):
    """The smallest instance the schema's `required` fields call for (strings "x", numbers 1, lists empty)."""
    if "$ref" in schema:
        return minimal(defs[schema["$ref"].split("/")[-1]], defs)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return minimal(schema[key][0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    types = schema.get("type", "object")
    kind = next(t for t in ([types] if isinstance(types, str) else types) if t != "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal(props.get(name, {"type": "string"}), defs) for name in schema.get("required", [])}
    return {"string": "x", "integer": 1, "number": 1, "boolean": True, "array": []}[kind]


@pytest.mark.parametrize("api,kind", BUILTIN, ids=[f"{a}/{k}" for a, k in BUILTIN])
def test_every_builtin_kind_accepts_a_minimal_object_and_is_strict(builtin, api, kind):
    schema = json.loads(find_schema(api, kind).read_text())
    obj = {**minimal(schema, schema.get("$defs", {})), "apiVersion": api, "kind": kind, "metadata": {"name": "x"}}
    assert [p.line() for p in builtin.validate([Manifest(obj, "x")])] == []
    obj["specs"] = {}
    assert [(p.rule, p.field) for p in builtin.validate([Manifest(obj, "x")])] == [("SCHEMA", "specs")]


USER_KINDS = ["controllers.yaml", "volcano.yaml", "ray.yaml", "lws.yaml"]


def test_kinds_users_bring_pass_the_cli_schema_stage():
    # ReplicationController, autoscaling/v1 HPA, Volcano Job, RayJob/RayCluster and LeaderWorkerSet: no SCHEMA line
    # (policy warnings are fine), through the very command users run.
    files = [f"tests/fixtures/schema/pass/{name}" for name in USER_KINDS]
    kinds = {m.kind for f in files for m in load(REPO / f)}
    assert {"ReplicationController", "HorizontalPodAutoscaler", "Job", "RayJob", "RayCluster", "LeaderWorkerSet"} <= kinds
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--schema", "builtin", *files],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "SCHEMA" not in out, out


def test_unknown_field_hint_suggests_the_close_name(builtin):
    [problem] = builtin.validate(load(FIXTURES / "fail" / "job-unknown-field.yaml"))
    assert problem.hint == 'did you mean "imagePullPolicy"?'
    assert "imagePullPolice" in problem.message


def test_missing_schema_names_apiversion_and_kind_and_how_to_fix(builtin):
    [problem] = builtin.validate(load(FIXTURES / "fail" / "unknown-crd.yaml"))
    assert "kubeflow.org/v1" in problem.message and "TFJob" in problem.message
    assert "crds/kubeflow.org/" in problem.hint and "crds/SOURCES.md" in problem.hint and "make schemas" in problem.hint


@pytest.mark.parametrize("fixture, severity", [("unknown-builtin-version.yaml", "error"),
                                               ("httproute-gateway-api-crd-not-pinned.yaml", "warning"),
                                               ("unknown-crd.yaml", "warning")])
def test_only_a_group_kubernetes_serves_is_an_error_without_a_schema(builtin, fixture, severity):
    """A kind Kubernetes does not serve in one of its own groups cannot be applied (an error); a group it does not
    serve, *.k8s.io ones such as Gateway API's included, may come from a CRD the cluster has (a warning: not checked)."""
    [problem] = builtin.validate(load(FIXTURES / "fail" / fixture))
    assert (problem.rule, problem.severity) == ("SCHEMA-MISSING", severity), problem.line()


@pytest.mark.parametrize("group, builtin_", [("", True), ("apps", True), ("app", True), ("networking.k8s.io", True),
                                             ("resource.k8s.io", True), ("gateway.networking.k8s.io", False),
                                             ("snapshot.storage.k8s.io", False), ("autoscaling.k8s.io", False),
                                             ("kubeflow.org", False)])
def test_builtin_groups_are_the_pinned_versions(group, builtin_):
    from policies.schema.lookup import builtin_group

    assert builtin_group(group) is builtin_


@pytest.mark.parametrize("fixture", ["unknown-crd.yaml", "unknown-builtin-version.yaml"])
def test_missing_schema_hint_names_only_paths_in_the_repository(builtin, fixture):
    [problem] = builtin.validate(load(FIXTURES / "fail" / fixture))
    assert problem.rule == "SCHEMA-MISSING"
    assert "../" not in problem.hint and "shared" not in problem.hint and "KINDS" not in problem.hint
    for path in ("crds/SOURCES.md", "schemas/SOURCES.md"):
        if path in problem.hint:
            assert (REPO / path).is_file()


def test_upstream_runtime_manifest_passes(builtin):
    path = CRDS_DIR / "kubeflow-trainer" / "runtimes" / "torch_distributed.yaml"
    manifests = [Manifest(d, str(path)) for d in yaml.safe_load_all(path.read_text()) if d]
    assert [m.kind for m in manifests] == ["ClusterTrainingRuntime"]
    assert builtin.validate(manifests) == []


def test_preserve_unknown_fields_section_accepts_anything(builtin):
    [app] = [m.obj for m in load(FIXTURES / "pass" / "argocd.yaml") if m.kind == "Application"]
    odd = {"a": [1, "two", None, {"deep": {"deeper": [True]}}], "0": {}, "with.dots/and-slashes": 3.5}
    app = copy.deepcopy(app)
    app["spec"]["source"]["helm"]["valuesObject"] = odd
    assert builtin.validate([Manifest(app, "x")]) == []
    # The same content one level up, where the schema is strict, fails: the acceptance above is the section's doing.
    app["spec"]["source"]["helm"].update(odd)
    fields = {p.field for p in builtin.validate([Manifest(app, "x")])}
    assert {"spec.source.helm.a", 'spec.source.helm["0"]', 'spec.source.helm["with.dots/and-slashes"]'} <= fields


def test_input_without_apiversion_or_kind(builtin):
    problems = builtin.validate([Manifest({"apiVersion": "v1", "metadata": {"name": "x"}}, "f"),
                                 Manifest({"kind": "Service", "apiVersion": 1}, "g")])
    assert [(p.rule, p.message) for p in problems] == [
        ("SCHEMA-INPUT", "object has no kind"), ("SCHEMA-INPUT", "object has no apiVersion")]


def test_problems_come_in_manifest_order(builtin):
    batch = load(FIXTURES / "fail" / "no-kind.yaml") + load(FIXTURES / "fail" / "job-unknown-field.yaml") \
        + load(FIXTURES / "fail" / "unknown-crd.yaml")
    assert [p.rule for p in builtin.validate(batch)] == ["SCHEMA-INPUT", "SCHEMA", "SCHEMA-MISSING"]


def test_unreadable_schema_is_reported_not_passed(tmp_path):
    shutil.copytree(REPO / "schemas", tmp_path / "schemas")
    job_schema = tmp_path / "schemas" / "kubernetes" / "v1.36.0-standalone-strict" / "job-batch-v1.json"
    job_schema.write_text("{ not json")
    problems = BuiltinValidator(root=tmp_path / "schemas").validate(load(FIXTURES / "pass" / "workloads.yaml"))
    assert [(p.rule, p.obj) for p in problems] == [("SCHEMA-NOT-RUN", "Job/ml-train/ddp-mnist")]


# ---------------------------------------------------------------- lookup and formatting

@pytest.mark.parametrize("api,kind,rel", [
    ("batch/v1", "Job", "kubernetes/v1.36.0-standalone-strict/job-batch-v1.json"),
    ("v1", "Service", "kubernetes/v1.36.0-standalone-strict/service-v1.json"),
    ("apps/v1", "StatefulSet", "kubernetes/v1.36.0-standalone-strict/statefulset-apps-v1.json"),
    ("networking.k8s.io/v1", "NetworkPolicy", "kubernetes/v1.36.0-standalone-strict/networkpolicy-networking-v1.json"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "kubernetes/v1.36.0-standalone-strict/clusterrole-rbac-v1.json"),
    ("kubeflow.org/v1", "PyTorchJob", "crds/kubeflow.org/pytorchjob_v1.json"),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob", "crds/trainer.kubeflow.org/trainjob_v1alpha1.json"),
    ("kueue.x-k8s.io/v1beta1", "LocalQueue", "crds/kueue.x-k8s.io/localqueue_v1beta1.json"),
    ("v1", "ReplicationController", "kubernetes/v1.36.0-standalone-strict/replicationcontroller-v1.json"),
    ("autoscaling/v1", "HorizontalPodAutoscaler",
     "kubernetes/v1.36.0-standalone-strict/horizontalpodautoscaler-autoscaling-v1.json"),
    ("internal.apiserver.k8s.io/v1alpha1", "StorageVersion",
     "kubernetes/v1.36.0-standalone-strict/storageversion-internal-v1alpha1.json"),
    ("batch.volcano.sh/v1alpha1", "Job", "crds/batch.volcano.sh/job_v1alpha1.json"),
    ("ray.io/v1", "RayJob", "crds/ray.io/rayjob_v1.json"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "crds/leaderworkerset.x-k8s.io/leaderworkerset_v1.json"),
])
def test_find_schema_uses_kubeconform_names(api, kind, rel):
    assert find_schema(api, kind) == REPO / "schemas" / rel


@pytest.mark.parametrize("api,kind", [
    ("example.com/v1", "Widget"), ("batch/v1", "../../etc/passwd"), ("../../x/v1", "Job"), ("", "Job"), ("v1", ""),
    ("kubeflow.org/v1", "MPIJob"),  # only mpi-operator's v2beta1 MPIJob is stored (see crds/SOURCES.md)
])
def test_find_schema_none(api, kind):
    assert find_schema(api, kind) is None


def test_dotted_paths():
    assert stage.dotted(["spec", "containers", 0, "env", 1, "value"]) == "spec.containers[0].env[1].value"
    assert stage.dotted(["metadata", "labels", "app.kubernetes.io/name"]) == 'metadata.labels["app.kubernetes.io/name"]'
    assert stage.dotted([]) == ""


# ---------------------------------------------------------------- kubeconform (a fake binary: see fake_kubeconform.py)

@pytest.fixture
def fake_kubeconform(tmp_path, monkeypatch) -> Path:
    """An executable `kubeconform` written here; the real binary cannot be downloaded on this machine."""
    exe = tmp_path / "bin" / "kubeconform"
    exe.parent.mkdir()
    exe.write_text(f"#!{sys.executable}\n" + (FIXTURES / "fake_kubeconform.py").read_text())
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_KUBECONFORM_LOG", str(tmp_path / "argv.json"))
    monkeypatch.delenv("FAKE_KUBECONFORM_MODE", raising=False)
    return exe


def all_fixtures() -> list[Manifest]:
    return [m for path in PASS + FAIL for m in load(path)]


def test_kubeconform_results_map_back_like_builtin(builtin, fake_kubeconform):
    kc = KubeconformValidator(fake_kubeconform)
    assert kc.name == "kubeconform v0.8.0-fake"
    manifests = all_fixtures()
    got, want = kc.validate(manifests), builtin.validate(manifests)
    assert summary(got) == summary(want)
    assert len(want) >= len(FAIL)
    hints = {(p.field, p.hint) for p in got if p.field and p.field.endswith("imagePullPolice")}
    assert hints == {("spec.template.spec.containers[0].imagePullPolice", 'did you mean "imagePullPolicy"?')}


def test_kubeconform_arguments(fake_kubeconform, tmp_path):
    manifests = load(FIXTURES / "pass" / "workloads.yaml") + load(FIXTURES / "fail" / "unknown-crd.yaml")
    KubeconformValidator(fake_kubeconform, workers=3).validate(manifests)
    argv = json.loads((tmp_path / "argv.json").read_text())
    schemas = REPO / "schemas"
    assert argv[:-1] == [
        "-strict", "-summary", "-verbose", "-output", "json", "-kubernetes-version", "1.36.0", "-n", "3",
        "-schema-location",
        f"{schemas}/kubernetes/{{{{.NormalizedKubernetesVersion}}}}-standalone{{{{.StrictSuffix}}}}/"
        "{{.ResourceKind}}{{.KindSuffix}}.json",
        "-schema-location", f"{schemas}/crds/{{{{.Group}}}}/{{{{.ResourceKind}}}}_{{{{.ResourceAPIVersion}}}}.json",
    ]
    assert "default" not in argv
    # The folder of numbered files is gone after the run; the SCHEMA-MISSING object was never handed over.
    assert not Path(argv[-1]).exists()


def test_kubeconform_names_match_our_files(fake_kubeconform):
    # The fake expands templates as kubeconform's registry does; every fixture kind must resolve to a file.
    manifests = [m for m in all_fixtures() if m.kind and find_schema(m.api_version, m.kind)]
    problems = KubeconformValidator(fake_kubeconform).validate(manifests)
    assert [p for p in problems if p.rule != "SCHEMA"] == []


@pytest.mark.parametrize("mode,expect", [
    ("crash", "exited 2: panic: runtime error"),
    ("garbage", "exited 1: this is not json"),
    ("exit1-all-valid", "exited 1 yet reported every object valid"),
])
def test_kubeconform_failure_is_a_problem(fake_kubeconform, monkeypatch, mode, expect):
    monkeypatch.setenv("FAKE_KUBECONFORM_MODE", mode)
    manifests = load(FIXTURES / "pass" / "workloads.yaml")
    problems = KubeconformValidator(fake_kubeconform).validate(manifests)
    assert [p.rule for p in problems] == ["SCHEMA-NOT-RUN"] * len(manifests)
    assert all(expect in p.message for p in problems), problems[0].message


def test_kubeconform_missing_result_is_a_problem(fake_kubeconform, monkeypatch):
    monkeypatch.setenv("FAKE_KUBECONFORM_MODE", "drop-first")
    manifests = load(FIXTURES / "pass" / "workloads.yaml")
    problems = KubeconformValidator(fake_kubeconform).validate(manifests)
    assert [(p.rule, p.obj) for p in problems] == [("SCHEMA-NOT-RUN", manifests[0].ref)]
    assert "no result" in problems[0].message


def test_kubeconform_output_without_validation_errors(fake_kubeconform, monkeypatch):
    # Older kubeconform reports only `msg`; the path is read out of the wrapped jsonschema message.
    monkeypatch.setenv("FAKE_KUBECONFORM_MODE", "old-format")
    [problem] = KubeconformValidator(fake_kubeconform).validate(load(FIXTURES / "fail" / "job-unknown-field.yaml"))
    assert (problem.rule, problem.field) == ("SCHEMA", "spec.template.spec.containers[0].imagePullPolice")
    assert problem.message == "additionalProperties 'imagePullPolice' not allowed"
    assert stage.kubeconform_message_errors("Additional property templates is not allowed") == []


def test_make_validator_choices(fake_kubeconform, monkeypatch, tmp_path):
    assert make_validator("builtin").name.startswith("jsonschema-rs 0.60.3 (in-process)")
    monkeypatch.setattr(stage, "find_kubeconform", lambda: None)
    assert isinstance(make_validator("auto"), BuiltinValidator)
    with pytest.raises(ValidatorUnavailable):
        make_validator("kubeconform")
    with pytest.raises(ValueError):
        make_validator("kubeval")
    monkeypatch.setattr(stage, "find_kubeconform", lambda: fake_kubeconform)
    assert make_validator("auto").name == "kubeconform v0.8.0-fake"
    assert make_validator("kubeconform").name == "kubeconform v0.8.0-fake"
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setattr(stage, "find_kubeconform", lambda: broken)
    fallback = make_validator("auto")
    assert isinstance(fallback, BuiltinValidator) and "does not run" in fallback.name
    with pytest.raises(ValidatorUnavailable):
        make_validator("kubeconform")


def test_make_validate_runs_the_in_process_validator_even_where_kubeconform_is_installed(fake_kubeconform):
    """The CLI's default is `builtin`; kubeconform runs only when asked (`--schema kubeconform`, or `auto`)."""
    import os
    import subprocess

    env = {**os.environ, "KUBECONFORM": str(fake_kubeconform)}
    good = str(FIXTURES / "pass" / "core.yaml")
    summary = lambda *extra: subprocess.run([sys.executable, "-m", "policies.cli", "validate", *extra, good],
                                            cwd=REPO, env=env, capture_output=True, text=True).stdout.splitlines()[-1]
    assert "schema: jsonschema-rs" in summary()
    assert "schema: kubeconform v0.8.0-fake" in summary("--schema", "auto")
    assert "schema: kubeconform v0.8.0-fake" in summary("--schema", "kubeconform")


def test_find_kubeconform_prefers_env(fake_kubeconform, monkeypatch):
    monkeypatch.setenv("KUBECONFORM", str(fake_kubeconform))
    assert stage.find_kubeconform() == fake_kubeconform


# ---------------------------------------------------------------- speed

def realistic_mix(n: int) -> list[Manifest]:
    by_kind = {m.kind: m.obj for path in PASS for m in load(path)}
    kinds = ["Job", "StatefulSet", "Service", "PyTorchJob", "TrainJob"]
    out = []
    for i in range(n):
        obj = copy.deepcopy(by_kind[kinds[i % len(kinds)]])
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{i}"
        out.append(Manifest(obj, f"overlays/gen-{i // 50}", i))
    return out


def test_builtin_throughput(capsys):
    manifests = realistic_mix(5000)
    validator = BuiltinValidator()
    validator.validate(manifests[:5])  # compile the five schemas first; a run compiles each once
    start = time.perf_counter()
    problems = validator.validate(manifests)
    rate = len(manifests) / (time.perf_counter() - start)
    with capsys.disabled():
        print(f"\nschema stage ({validator.name}): {rate:,.0f} objects/s on {len(manifests)} objects")
    assert problems == []
    assert rate > 1000, f"{rate:.0f} objects/s; the schema stage must do thousands per second"


# ---------------------------------------------------------------- generator

def run_gen(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GEN), *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=600)


def test_committed_crd_schemas_are_reproducible():
    proc = run_gen("--check", "--only", "crds")
    assert proc.returncode == 0, proc.stderr


def test_committed_kubernetes_schemas_are_reproducible():
    proc = run_gen("--check", "--only", "kubernetes")
    if proc.returncode == 3:
        pytest.skip(f"kubernetes schemas not checked: the pinned wheel is unavailable: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr


def test_check_reports_drift_and_stale_files(tmp_path):
    out = tmp_path / "schemas"
    shutil.copytree(REPO / "schemas", out)
    changed = out / "crds" / "kubeflow.org" / "pytorchjob_v1.json"
    changed.write_text(changed.read_text().replace('"integer"', '"string"', 1))
    (out / "crds" / "kubeflow.org" / "tfjob_v1.json").write_text("{}\n")
    proc = run_gen("--check", "--only", "crds", "--out", str(out))
    assert proc.returncode == 1
    assert "crds/kubeflow.org/pytorchjob_v1.json: differs" in proc.stderr
    assert "crds/kubeflow.org/tfjob_v1.json: not generated (stale)" in proc.stderr


def test_crd_without_provenance_is_refused(tmp_path):
    crds = tmp_path / "crds"
    (crds / "example.com").mkdir(parents=True)
    shutil.copy(CRDS_DIR / "kueue.x-k8s.io" / "kueue.x-k8s.io_localqueues.yaml", crds / "example.com" / "q.yaml")
    (crds / "SOURCES.md").write_text("# CRD sources\n\nNo table rows.\n")
    proc = run_gen("--check", "--only", "crds", env={"CRDS_DIR": str(crds)})
    assert proc.returncode == 2 and "has no row" in proc.stderr and "q.yaml" in proc.stderr


def test_crd_checksum_mismatch_is_refused(tmp_path):
    crds = tmp_path / "crds"
    shutil.copytree(CRDS_DIR, crds)
    path = crds / "kueue.x-k8s.io" / "kueue.x-k8s.io_localqueues.yaml"
    path.chmod(0o644)
    path.write_text(path.read_text() + "\n# local edit\n")
    proc = run_gen("--check", "--only", "crds", "--crds-dir", str(crds))
    assert proc.returncode == 2 and "kueue.x-k8s.io_localqueues.yaml: sha256" in proc.stderr


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_schemas", GEN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kubeconform_file_names(gen):
    assert gen.k8s_filename("batch", "v1", "Job") == "job-batch-v1.json"
    assert gen.k8s_filename("", "v1", "Service") == "service-v1.json"
    assert gen.k8s_filename("networking.k8s.io", "v1", "NetworkPolicy") == "networkpolicy-networking-v1.json"
    assert gen.crd_filename("kubeflow.org", "v1", "PyTorchJob") == "crds/kubeflow.org/pytorchjob_v1.json"


def test_crd_conversion_rules(gen):
    openapi = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "values": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                               "properties": {"known": {"type": "string"}}},
                    "port": {"format": "int-or-string", "description": "p"},
                    "maybe": {"type": "string", "nullable": True, "enum": ["a"]},
                    "properties": {"type": "object", "properties": {"description": {"type": "string"}}},
                    "withDefault": {"type": "object", "default": {"properties": {"x": 1}}},
                },
            },
        },
    }
    out = gen.convert_crd_version("example.com", "Widget", "v1", openapi, {"OM": {"type": "object"}})
    spec = out["properties"]["spec"]
    assert out["additionalProperties"] is False and spec["additionalProperties"] is False
    assert "additionalProperties" not in spec["properties"]["values"]  # preserve-unknown-fields keeps unknown fields
    assert spec["properties"]["port"] == {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    assert spec["properties"]["maybe"] == {"type": ["string", "null"], "enum": ["a", None]}
    # Property names and default values are data, not schema: left alone.
    assert spec["properties"]["properties"]["properties"] == {"description": {"type": "string"}}
    assert spec["properties"]["withDefault"]["default"] == {"properties": {"x": 1}}
    assert out["properties"]["apiVersion"] == {"type": "string", "enum": ["example.com/v1"]}
    assert out["properties"]["metadata"] == {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    assert out["$defs"] == {"OM": {"type": "object"}}


def test_the_in_process_validator_names_its_installed_version() -> None:
    """Read from the dist-info folder (importing importlib.metadata cost 0.06 s of every validate): the same version
    importlib.metadata gives."""
    from importlib.metadata import version

    import jsonschema_rs

    from policies.schema import BuiltinValidator, installed_version

    assert installed_version(jsonschema_rs) == version("jsonschema_rs")
    assert BuiltinValidator().name == f"jsonschema-rs {version('jsonschema_rs')} (in-process)"
