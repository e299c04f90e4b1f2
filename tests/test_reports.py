"""`--format json|sarif|junit`: valid documents that carry every problem with its severity, rule, object, field and
the file and line it was traced to (the overlay's own files, else the rendered object)."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import jsonschema_rs

from policies.kube.objects import Problem

from conftest import FIXTURES, REPO, run_cli

NAME_PREFIX = FIXTURES / "overlays/name-prefix"  # TOPO003 + TOPO004 errors, traced into the kind-cpu overlay's files
WARNINGS = FIXTURES / "rules/IMG001/fail/latest.yaml"

# The parts of the SARIF 2.1.0 schema (docs.oasis-open.org/sarif/sarif/v2.1.0) that GitHub code scanning reads.
LEVEL = {"enum": ["none", "note", "warning", "error"]}
MESSAGE = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "minLength": 1}}}
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "runs", "$schema"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["tool", "results"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                    "type": "object", "required": ["name", "rules"],
                    "properties": {"name": {"type": "string"}, "rules": {"type": "array", "items": {
                        "type": "object", "required": ["id", "shortDescription"],
                        "properties": {"id": {"type": "string"}, "shortDescription": MESSAGE,
                                       "defaultConfiguration": {"type": "object", "properties": {"level": LEVEL}}}}}}}}},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["ruleId", "message", "level", "locations"],
                    "properties": {
                        "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": 0}, "level": LEVEL,
                        "message": MESSAGE,
                        "locations": {"type": "array", "items": {"type": "object", "properties": {
                            "physicalLocation": {"type": "object", "required": ["artifactLocation", "region"],
                                                 "properties": {
                                                     "artifactLocation": {"type": "object", "required": ["uri"]},
                                                     "region": {"type": "object", "required": ["startLine"],
                                                                "properties": {"startLine": {"type": "integer",
                                                                                             "minimum": 1}}}}}}}},
                        "suppressions": {"type": "array", "items": {
                            "type": "object", "required": ["kind"],
                            "properties": {"kind": {"enum": ["inSource", "external"]}}}},
                    }}},
            }}},
    },
}


def sarif_of(*paths):
    proc = run_cli("validate", "--format", "sarif", *map(str, paths))
    return proc, json.loads(proc.stdout)


def test_sarif_is_valid_and_points_at_source_lines():
    proc, doc = sarif_of(NAME_PREFIX, WARNINGS)
    assert proc.returncode == 1
    jsonschema_rs.validate(SARIF_SUBSET, doc)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    assert len(ids) == len(set(ids)) and "TOPO003" in ids and "SEC006" in ids
    results = run["results"]
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
    levels = {r["ruleId"]: r["level"] for r in results}
    assert levels["TOPO003"] == "error" and levels["IMG001"] == "warning"
    topo3 = next(r for r in results if r["ruleId"] == "TOPO003")
    loc = topo3["locations"][0]["physicalLocation"]
    uri = loc["artifactLocation"]["uri"]
    assert uri.startswith(("base/", "overlays/")) and (REPO / uri).is_file()
    line = (REPO / uri).read_text().splitlines()[loc["region"]["startLine"] - 1]
    assert "MASTER_ADDR" in line or "-0.ddp-train" in line  # the env entry TOPO003 is about, where it is written
    assert topo3["locations"][0]["logicalLocations"][0]["name"].startswith("Job/team-ddp-train")
    assert topo3["properties"]["traced"] is True
    # A manifest file is its own source: the line of the field in that file.
    img = next(r for r in results if r["ruleId"] == "IMG001")
    loc = img["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == str(WARNINGS.relative_to(REPO))
    assert "image: ghcr.io/example/ddp-trainer:latest" in WARNINGS.read_text().splitlines()[loc["region"]["startLine"] - 1]
    assert run["invocations"][0]["exitCode"] == 1


def test_untraced_objects_point_at_the_overlay(tmp_path):
    # A ConfigMap made by a generator in an overlay of this test: traced to the generator's literal.
    ov = tmp_path / "ov"
    ov.mkdir()
    (ov / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [job.yaml]\n"
        "configMapGenerator:\n  - name: ddp-env\n    options: {disableNameSuffixHash: true}\n    literals:\n"
        "      - DIST_BACKEND=nccl\n      - TORCH_NCCL_ASYNC_ERROR_HANDLING=0\n")
    docs = (FIXTURES / "rules/NCCL001/fail/async-error-handling-0.yaml").read_text().split("\n---\n")
    (ov / "job.yaml").write_text("\n---\n".join(d for d in docs if "kind: ConfigMap" not in d))
    proc = run_cli("validate", "--format", "json", str(ov))
    data = json.loads(proc.stdout)
    p = next(p for p in data["problems"] if p["rule"] == "NCCL001")
    assert p["object"] == "ConfigMap/ddp-env" and p["traced"] is True
    assert p["file"].endswith("ov/kustomization.yaml") and p["line"] == 9  # the `=0` literal


def test_text_names_the_source_line():
    proc = run_cli("validate", str(NAME_PREFIX))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("error TOPO00")]
    assert len(lines) == 2 and all(ln.endswith("]") and ".yaml:" in ln.rsplit("[", 1)[1] for ln in lines), lines
    assert "[base/indexed-job/job.yaml:" in next(ln for ln in lines if "TOPO004" in ln)  # the subdomain


def test_json_has_location_and_summary():
    data = json.loads(run_cli("validate", "--format", "json", str(NAME_PREFIX)).stdout)
    p = next(p for p in data["problems"] if p["rule"] == "TOPO004")
    assert p["file"] == "base/indexed-job/job.yaml" and p["line"] >= 1 and p["traced"] is True
    s = data["summary"]
    assert s["errors"] == 2 and s["failed"] is True and s["suppressed"] == 0 and s["rules"] >= 38


def test_junit_is_well_formed_and_counts_add_up():
    proc = run_cli("validate", "--format", "junit", str(NAME_PREFIX), str(WARNINGS))
    assert proc.returncode == 1
    root = ET.fromstring(proc.stdout)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [str(NAME_PREFIX.relative_to(REPO)), str(WARNINGS.relative_to(REPO))]
    total = 0
    for s in suites:
        cases = s.findall("testcase")
        assert int(s.get("tests")) == len(cases)
        assert int(s.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
        total += len(cases)
    assert int(root.get("tests")) == total
    fail = next(c for c in suites[0].findall("testcase") if c.get("name").startswith("TOPO003"))
    f = fail.find("failure")
    assert f.get("type") == "error" and "expected pod 0" in f.get("message")
    assert (REPO / fail.get("file")).is_file() and int(fail.get("line")) > 1
    # a passing testcase for every rule that found nothing
    names = {c.get("name") for c in suites[0].findall("testcase")}
    assert "TOPO001 nnodes-matches-pods" in names
    # warnings are not failures ... unless --strict
    warn = [c for c in suites[1].findall("testcase") if c.get("name").startswith("IMG001")]
    assert warn and all(c.find("failure") is None and c.find("system-out") is not None for c in warn)
    strict = ET.fromstring(run_cli("validate", "--format", "junit", "--strict", str(WARNINGS)).stdout)
    assert int(strict.get("failures")) >= 1


def test_repository_overlays_report_clean_in_every_format():
    for fmt in ("json", "sarif", "junit"):
        proc = run_cli("validate", "--format", fmt)
        assert proc.returncode == 0, proc.stdout[-2000:]
    doc = json.loads(run_cli("validate", "--format", "sarif").stdout)
    results = doc["runs"][0]["results"]
    # Only what an overlay suppresses in source, with its reason, stays visible (the etcd variant's RESTART005, the
    # gke-t4 and 64x8-h100 Indexed Jobs' RESTART007: they fail as a whole and restart nothing), and the info line of
    # a real environment whose image is pinned to the template's placeholder digest (IMG004).
    placeholder = [r for r in results if r["ruleId"] == "IMG004" and "placeholder digest" in r["message"]["text"]]
    assert [r["ruleId"] for r in results if not r.get("suppressions") and r not in placeholder] == []
    assert {r["ruleId"] for r in results if r not in placeholder} <= {"RESTART005", "RESTART007"}


def test_ci_uploads_the_reports():
    import yaml

    doc = yaml.safe_load((REPO / ".github/workflows/ci.yaml").read_text())
    job = doc["jobs"]["validate-and-test"]
    assert "security-events" not in job["permissions"]  # the job that runs the pull request's code cannot write
    steps = job["steps"]
    script = next(s["run"] for s in steps if "FORMAT=sarif" in s.get("run", ""))
    assert "FORMAT=junit" in script
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert "policies.sarif" in upload["with"]["path"] and "policies-junit.xml" in upload["with"]["path"]
    scan = doc["jobs"]["code-scanning"]
    assert scan["permissions"]["security-events"] == "write" and scan["needs"] == "validate-and-test"
    sarif = next(s for s in scan["steps"] if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert sarif["with"]["sarif_file"] == "reports/policies.sarif"


def test_a_line_break_quoted_from_the_input_stays_one_line(tmp_path):
    """A value with a line break in it (a mangled command token, quoted by TOPO009 in the fuzz test) gives one
    line all the same, each break written as an escape; the text report has one line per problem."""
    p = Problem("TOPO009", "pod 1 gets --node-rank 0\n- --master-addr=x\u2028y, expected 1", "job.yaml", "Job/j",
                "spec.template.spec.containers[0].command[3]", hint="h")
    assert p.line().splitlines() == [p.line()]
    assert "--node-rank 0\\n- --master-addr=x\\u2028y, expected 1 (fix: h)" in p.line()
    path = tmp_path / "job.yaml"
    path.write_text((FIXTURES / "rules/IMG003/fail/pod-command-one-string.yaml").read_text().replace(
        '"python /app/train.py --epochs 1"', '"python /app/train.py\\n- --epochs=1\\u2028x"'))
    out = run_cli("validate", str(path)).stdout
    assert all(x.split(" ", 1)[0] in ("error", "warning", "info", "FAILED:") for x in out.splitlines()), out
