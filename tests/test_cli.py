"""Bad input gets one clear line naming the file (and object and field), the other inputs are still checked,
and the exit code says it failed; `make validate PATHS=...` takes folders, files and standard input."""
from __future__ import annotations

from conftest import FIXTURES, REPO, run_cli

GOOD = str(REPO / "overlays/kind-cpu/indexed-job")


def no_traceback(proc):
    assert "Traceback" not in proc.stdout + proc.stderr


def test_broken_kustomization_is_one_line_and_others_continue():
    proc = run_cli("validate", str(FIXTURES / "overlays/broken-kustomization"), GOOD)
    no_traceback(proc)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("error")]
    assert len(lines) == 1 and "INPUT" in lines[0] and "broken-kustomization/kustomization.yaml" in lines[0]
    assert "does-not-exist.yaml" in lines[0]
    assert "2 rendered folders" in proc.stdout.splitlines()[-1]


def test_missing_resource_and_missing_folder(tmp_path):
    proc = run_cli("validate", str(FIXTURES / "overlays/missing-resource"), str(tmp_path / "nope.yaml"), str(tmp_path))
    no_traceback(proc)
    assert proc.returncode == 1
    out = proc.stdout
    assert "missing-resource/kustomization.yaml: kustomize failed" in out
    assert "nope.yaml: no such file or folder" in out
    assert "no kustomization.yaml and no manifest file (*.yaml, *.yml, *.json) in this folder or below" in out


def test_invalid_yaml_names_file_and_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n   bad: indent\n")
    proc = run_cli("validate", str(f))
    no_traceback(proc)
    assert proc.returncode == 1
    assert f"{f}:" in proc.stdout and "invalid YAML" in proc.stdout


def test_duplicate_keys_are_rejected(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("apiVersion: v1\nkind: Service\nkind: Pod\nmetadata: {name: x}\n")
    proc = run_cli("validate", str(f))
    assert proc.returncode == 1 and "duplicate key 'kind'" in proc.stdout


def test_not_a_kubernetes_object(tmp_path):
    """A list beside Kubernetes objects is a broken manifest; a file of lists alone (an Ansible playbook) is no
    manifest at all: skipped, said at info level."""
    f = tmp_path / "list.yaml"
    f.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n- a\n- b\n")
    proc = run_cli("validate", str(f))
    no_traceback(proc)
    assert proc.returncode == 1 and "document 2 is a list, not a Kubernetes object" in proc.stdout
    f.write_text("- a\n- b\n")
    proc = run_cli("validate", str(f))
    no_traceback(proc)
    assert proc.returncode == 0 and proc.stdout.startswith(f"info SKIP {f}: no document has an apiVersion")


def test_unknown_kind_has_no_schema(tmp_path):
    # A custom resource without its CRD in crds/: the cluster may serve it, so the schema check says it did not run.
    f = tmp_path / "widget.yaml"
    f.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {}\n")
    proc = run_cli("validate", str(f))
    no_traceback(proc)
    assert proc.returncode == 0, proc.stdout
    assert "warning SCHEMA-MISSING" in proc.stdout and "Widget" in proc.stdout and "not checked" in proc.stdout
    # A kind the pinned Kubernetes does not serve in a built-in group is refused by the API server: an error.
    f.write_text("apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: w}\nspec: {}\n")
    proc = run_cli("validate", str(f))
    assert proc.returncode == 1 and "error SCHEMA-MISSING" in proc.stdout, proc.stdout


def test_schema_error_names_object_and_field(tmp_path):
    text = (REPO / "tests/fixtures/rules/TOPO004/pass/headless.yaml").read_text()
    f = tmp_path / "typo.yaml"
    f.write_text(text.replace("imagePullPolicy", "imagePullPolice") if "imagePullPolicy" in text
                 else text.replace("      restartPolicy: Never", "      restartPolicy: Never\n      restartPolice: Never"))
    proc = run_cli("validate", str(f))
    assert proc.returncode == 1
    line = next(ln for ln in proc.stdout.splitlines() if "SCHEMA" in ln)
    assert "Job/ddp-train" in line and "restartPolice" in line


def test_standard_input_and_files_mix():
    rendered = run_cli("render", GOOD).stdout
    proc = run_cli("validate", "-", str(FIXTURES / "upstream/runs-as-written/pytorchjob-simple.yaml"), stdin=rendered)
    assert proc.returncode == 0, proc.stdout
    assert "2 files" in proc.stdout.splitlines()[-1]


def test_paths_as_one_string_like_make_passes_them():
    proc = run_cli("validate", f"{GOOD} {REPO / 'overlays/gke-t4/statefulset'}")
    assert proc.returncode == 0 and "2 rendered folders" in proc.stdout


def test_json_format():
    import json

    proc = run_cli("validate", "--format", "json", str(FIXTURES / "rules/TOPO001/fail/job-nnodes-3.yaml"))
    data = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert data["summary"]["errors"] >= 1
    p = next(p for p in data["problems"] if p["rule"] == "TOPO001")
    assert p["object"] == "Job/ddp-train" and p["field"] and p["hint"]


def test_empty_render_is_a_warning_not_a_silent_pass(tmp_path):
    f = tmp_path / "empty.yaml"
    f.write_text("---\n")
    proc = run_cli("validate", str(f))
    assert "renders no Kubernetes objects" in proc.stdout


def test_rules_doc_is_up_to_date():
    proc = run_cli("docs")
    assert proc.returncode == 0
    assert (REPO / "docs/rules.md").read_text() == proc.stdout, "run `make docs`"


def test_the_docs_blocks_made_from_the_launcher_registry_are_up_to_date():
    """docs/validation.md's launcher table and case count, tests/conformance/README.md's folders: `make docs`."""
    proc = run_cli("docs", "--check")
    assert proc.returncode == 0, proc.stderr
    from policies.report.docs import BLOCK_FILES

    for name in BLOCK_FILES:
        assert "<!-- generated by make docs:" in (REPO / name).read_text(), name


def test_asking_for_kubeconform_where_it_is_missing_says_so(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "KUBECONFORM"}
    env["PATH"] = str(REPO / ".venv/bin") + ":/usr/bin:/bin"
    if (REPO / "bin/kubeconform").exists():
        import pytest

        pytest.skip("kubeconform is installed here: nothing missing to report")
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--schema", "kubeconform", GOOD],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: kubeconform not found") and "Traceback" not in proc.stderr


def test_tools_says_what_runs_and_what_is_missing():
    from policies.simulate.host import SOCKET_WRAPPER_CANDIDATES, installed, name_serializer

    proc = run_cli("tools")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("kubectl: ") and "Kustomize Version" in lines[0]
    assert lines[1].startswith("schema validator for `make validate`: ")
    assert lines[2].startswith("make simulate: names ")
    swrap = installed(SOCKET_WRAPPER_CANDIDATES)
    if swrap is None:
        assert "MISSING libsocket_wrapper" in lines[2]
    else:
        assert f"network per pod {swrap}" in lines[2]
        assert ("no C compiler" in lines[2]) == (name_serializer() is None)
