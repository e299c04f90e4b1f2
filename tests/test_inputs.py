"""Inputs as people have them: folders of plain manifests (validated file by file, recursively, as kubeconform
reads a folder), trees that mix overlays and plain files, JSON files, `List` objects, and YAML that only kubectl's
reader accepts (non-string keys, timestamps). Each gives a verdict or one clear line, never a traceback."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, run_cli
from policies.report import engine
from policies.render.loader import InputError, parse, parse_any

JOB = (FIXTURES / "upstream/runs-as-written/pytorchjob-simple.yaml").read_text()
SERVICE = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n"
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}}


def summary(proc) -> str:
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc.stdout.splitlines()[-1]


def test_plain_folder_is_validated_file_by_file_recursively(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "svc.yaml").write_text(SERVICE)
    (tmp_path / "a" / "job.yml").write_text(JOB)
    (tmp_path / "a" / "b" / "cm.json").write_text(json.dumps(CONFIGMAP))
    (tmp_path / "a" / "notes.txt").write_text("not a manifest")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "workflow.yaml").write_text("on: push\n")
    units = engine.collect([str(tmp_path)], tmp_path)
    assert [(Path(u.source).relative_to(tmp_path).as_posix(), u.kind) for u in units] == [
        ("a/b/cm.json", "file"), ("a/job.yml", "file"), ("svc.yaml", "file")]
    proc = run_cli("validate", "--schema", "builtin", str(tmp_path))
    assert proc.returncode == 0, proc.stdout
    assert summary(proc).startswith("OK: 3 files, 3 objects")


def test_plain_folder_reports_the_bad_file_and_checks_the_others(tmp_path):
    (tmp_path / "good.yaml").write_text(SERVICE)
    (tmp_path / "typo.yaml").write_text(SERVICE.replace("  ports:", "  portz:"))
    proc = run_cli("validate", "--schema", "builtin", str(tmp_path))
    assert proc.returncode == 1
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("error")]
    assert "SCHEMA" in line and "typo.yaml" in line and "Service/web" in line and "spec.portz" in line
    assert summary(proc).startswith("FAILED: 2 files")


def test_mixed_tree_renders_overlays_and_validates_files_outside_them(tmp_path):
    shutil.copytree(REPO / "base", tmp_path / "base")
    shutil.copytree(REPO / "components", tmp_path / "components")
    shutil.copytree(REPO / "overlays/kind-cpu/indexed-job", tmp_path / "overlays/kind-cpu/indexed-job")
    (tmp_path / "overlays/extra").mkdir()
    (tmp_path / "overlays/extra/svc.yaml").write_text(SERVICE)
    units = engine.collect([str(tmp_path / "overlays")], tmp_path)
    got = [(Path(u.source).relative_to(tmp_path).as_posix(), u.kind) for u in units]
    # The overlay's patches are kustomize's input, never validated on their own.
    assert got == [("overlays/kind-cpu/indexed-job", "overlay"), ("overlays/extra/svc.yaml", "file")]
    proc = run_cli("validate", "--schema", "builtin", str(tmp_path / "overlays"))
    assert "1 rendered folder, 1 file," in summary(proc)


def test_folder_with_nothing_to_validate_says_so(tmp_path):
    (tmp_path / "README.md").write_text("hi")
    proc = run_cli("validate", str(tmp_path))
    assert proc.returncode == 1
    assert "no kustomization.yaml and no manifest file (*.yaml, *.yml, *.json) in this folder or below" in proc.stdout
    summary(proc)


@pytest.mark.parametrize("name", ["kustomization.yaml", "kustomization.yml", "Kustomization"])
def test_a_kustomization_file_named_is_its_folder_rendered(tmp_path, name):
    """kustomize builds folders: naming an overlay's kustomization file (tab completion gives the file) validates
    the overlay, as naming its folder does, rather than the file's one document as a manifest."""
    shutil.copytree(REPO / "base", tmp_path / "base")
    shutil.copytree(REPO / "components", tmp_path / "components")
    overlay = tmp_path / "overlays/kind-cpu/indexed-job"
    shutil.copytree(REPO / "overlays/kind-cpu/indexed-job", overlay)
    if name != "kustomization.yaml":
        (overlay / "kustomization.yaml").rename(overlay / name)
    units = engine.collect([str(overlay / name)], tmp_path)
    assert [(u.source, u.kind) for u in units] == [(str(overlay), "overlay")]
    named, folder = (run_cli("validate", "--schema", "builtin", str(p)) for p in (overlay / name, overlay))
    assert named.returncode == 0, named.stdout
    assert named.stdout == folder.stdout.replace(summary(folder), summary(named))
    assert summary(named).startswith("OK: 1 rendered folder, 5 objects")


@pytest.mark.parametrize("kind,api", [("Kustomization", "v1beta1"), ("Component", "v1alpha1")])
def test_kustomize_configuration_in_another_file_is_one_true_line(tmp_path, kind, api):
    """A Kustomization beside manifests is read by no kustomize, and `kubectl apply -f` sends it to an API server
    without that kind: one error saying so, not "no name" and "no schema" about an object it never was; the file's
    other objects are still checked."""
    f = tmp_path / "runtimes.yaml"
    f.write_text(SERVICE + f"---\napiVersion: kustomize.config.k8s.io/{api}\nkind: {kind}\nresources: [a.yaml]\n")
    proc = run_cli("validate", "--schema", "builtin", str(f))  # kubeconform: test_kubeconform.py
    assert proc.returncode == 1
    problems = [ln for ln in proc.stdout.splitlines() if ln.startswith(("error", "warning", "info"))]
    assert problems == [
        f"error SCHEMA-INPUT {f}: {kind}/ kind: a {kind} is kustomize's configuration, read only from a file "
        "named kustomization.yaml, kustomization.yml or Kustomization: the API server serves no such kind (fix: "
        "name the file kustomization.yaml and validate its folder (kustomize builds folders))"], proc.stdout
    assert summary(proc).startswith("FAILED: 1 file, 2 objects")


KIND_CONFIG = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n- role: worker\n"


@pytest.mark.parametrize("text,what", [
    (KIND_CONFIG, "kind's cluster configuration, which no API server serves"),
    ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n",
     "the kubelet's configuration, which no API server serves"),
    ("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
     "a kubeconfig (kubectl's client configuration), which no API server serves"),
    ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n",
     "kustomize's configuration, which no API server serves (kustomize reads it only from kustomization.yaml, "
     "kustomization.yml or Kustomization)"),
    (KIND_CONFIG + "---\napiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Metadata}]\n",
     "kind's cluster configuration and the API server's audit policy, which no API server serves"),
])
def test_a_tools_configuration_file_is_skipped_as_not_kubernetes(tmp_path, text, what):
    """Files that share a manifest's header but that a tool reads from disk (kind's cluster config, as this
    repository's kind/cluster.yaml; a component's configuration; a kubeconfig) are no manifest: skipped with one
    info line saying what they are, as a workflow file is, in a folder walk and in the pre-commit hook of another
    repository alike (it called kind's config an object "the API server refuses" for want of a name)."""
    f = tmp_path / "config.yaml"
    f.write_text(text)
    proc = run_cli("validate", "--schema", "builtin", str(f))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[0] == f"info SKIP {f}: {what}: not a Kubernetes manifest, not checked"
    assert "(1 file skipped: not Kubernetes)" in summary(proc)


def test_a_tools_configuration_beside_manifests_is_one_error(tmp_path):
    f = tmp_path / "mixed.yaml"
    f.write_text(SERVICE + "---\n" + KIND_CONFIG)
    proc = run_cli("validate", "--schema", "builtin", str(f))
    problems = [ln for ln in proc.stdout.splitlines() if ln.startswith(("error", "warning", "info"))]
    assert problems == [f"error SCHEMA-INPUT {f}: Cluster/ kind: a Cluster is kind's cluster configuration: the API "
                        "server serves no such kind (fix: keep it in a file of its own, apart from the manifests)"]


def test_configuration_groups_are_served_by_no_cluster():
    """Every group CONFIGURATION_GROUPS names is neither Kubernetes' own nor a pinned CRD's: nothing served is
    skipped."""
    from policies.kube.values import BUILT_IN_GROUPS, CONFIGURATION_GROUPS
    crd_groups = {p.name for p in (REPO / "schemas" / "crds").iterdir() if p.is_dir()}
    assert not set(CONFIGURATION_GROUPS) & (BUILT_IN_GROUPS | crd_groups)


@pytest.mark.parametrize("text,labels", [
    ("5: x\ntrue: z\n", {"5": "x", "true": "z"}),
    ("1.0: a\non: b\n~: c\n2001-01-02: d\n", {"1": "a", "true": "b", "null": "c", "2001-01-02": "d"}),
])
def test_non_string_keys_become_strings_as_kubectl_reads_them(text, labels):
    doc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  labels:\n" + "".join(
        f"    {ln}\n" for ln in text.splitlines())
    [m] = parse(doc, "svc.yaml")
    assert m.obj["metadata"]["labels"] == labels


def test_non_string_keys_validate_normally(tmp_path):
    f = tmp_path / "svc.yaml"
    f.write_text(SERVICE.replace("  name: web\n", "  name: web\n  labels:\n    5: x\n    true: z\n")
                 + "  true: stray\n")
    for schema in ("builtin",):
        proc = run_cli("validate", "--schema", schema, str(f))
        assert proc.returncode == 1, proc.stdout + proc.stderr  # was exit 3 (internal error) before
        [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("error")]
        assert "SCHEMA" in line and "Service/web" in line and "spec.true" in line


@pytest.mark.parametrize("text,expect", [
    ("a: 1\n1: x\n'1': y\n", "svc.yaml:3: invalid YAML: duplicate key '1'"),
    ("a: !!set {x, y}\n", "svc.yaml:1: invalid YAML: tag set has no JSON form"),
    ("? [a, b]\n: c\n", "svc.yaml:1: invalid YAML: a list as a mapping key"),
    ("a: !!binary /w==\n", "svc.yaml:1: invalid YAML: !!binary value is not UTF-8 text"),
])
def test_yaml_without_a_json_form_is_one_line(text, expect):
    with pytest.raises(InputError) as err:
        parse(text, "svc.yaml")
    assert str(err.value).startswith(expect)


def test_timestamps_and_binary_are_the_strings_kubectl_sends():
    [m] = parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, annotations: {at: 2001-01-01}}\n"
                "data: {x: !!binary aGVsbG8=}\n", "cm.yaml")
    assert m.obj["metadata"]["annotations"]["at"] == "2001-01-01" and m.obj["data"]["x"] == "hello"


def test_json_file_with_tabs_list_and_errors(tmp_path):
    good = tmp_path / "list.json"
    good.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [CONFIGMAP, CONFIGMAP]}, indent="\t"))
    assert [m.kind for m in parse_any(good.read_text(), str(good))] == ["ConfigMap", "ConfigMap"]
    dup = tmp_path / "dup.json"
    dup.write_text('{"apiVersion": "v1",\n "kind": "ConfigMap", "kind": "Secret"}')
    bad = tmp_path / "bad.json"
    bad.write_text('{"apiVersion": "v1",\n "kind": }')
    proc = run_cli("validate", "--schema", "builtin", str(good), str(dup), str(bad))
    assert proc.returncode == 1
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("error")]
    assert sorted(errors) == [f"error INPUT {bad}:2: invalid JSON: Expecting value (column 10)",
                              f"error INPUT {dup}: invalid JSON: duplicate key 'kind'"]
    assert summary(proc).startswith("FAILED: 3 files, 2 objects")


def test_json_on_standard_input():
    proc = run_cli("validate", "--schema", "builtin", "-", stdin=json.dumps(CONFIGMAP, indent="\t"))
    assert proc.returncode == 0 and summary(proc).startswith("OK: 1 file, 1 object")


@pytest.mark.parametrize("header", ["apiVersion: v1\nkind: List\n", "kind: List\n",
                                    "apiVersion: v1\nkind: ServiceList\n"])
def test_list_objects_are_unpacked(header):
    text = header + "items:\n" + "".join("- " + ln.replace("\n", "\n  ").rstrip() + "\n" for ln in [SERVICE])
    [m] = parse(text, "list.yaml")
    assert (m.kind, m.name) == ("Service", "web")


@pytest.mark.parametrize("items,expect", [
    ("{a: b}", "list.yaml: document 1 (List) field items is a dict, not a list of Kubernetes objects"),
    ("[x]", "list.yaml: document 1 (List) items[0] is a str, not a Kubernetes object"),
])
def test_bad_list_items_are_one_line(items, expect):
    with pytest.raises(InputError, match=None) as err:
        parse(f"apiVersion: v1\nkind: List\nitems: {items}\n", "list.yaml")
    assert str(err.value) == expect


def test_list_with_a_schema_error_names_the_item(tmp_path):
    f = tmp_path / "list.yaml"
    f.write_text("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: web}\n"
                 "  spec: {ports: [{port: 80}], portz: 1}\n")
    proc = run_cli("validate", "--schema", "builtin", str(f))
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("error")]
    assert "Service/web" in line and "spec.portz" in line
