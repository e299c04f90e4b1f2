"""Suppressing one rule on one object: `policies.ddp/suppress: "RULE=reason"`. The reason is mandatory, the problem is
still reported (as suppressed, in every format), and a suppression that names no rule or finds nothing says so."""
from __future__ import annotations

import json

import pytest
import yaml

from policies.report.engine import SUPPRESS_ANNOTATION, parse_suppressions

from conftest import FIXTURES, run_cli

SECRET = FIXTURES / "rules/SEC007/fail/inline-secret.yaml"


def with_annotation(tmp_path, value: str, kind: str = "Secret"):
    docs = [d for d in yaml.safe_load_all(SECRET.read_text()) if d]
    for d in docs:
        if d["kind"] == kind:
            d["metadata"].setdefault("annotations", {})[SUPPRESS_ANNOTATION] = value
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def test_parse():
    ok, bad = parse_suppressions("SEC007=test data, not a token;  IMG001 = pinned upstream\nSEC001=; RES002; NOPE9=x")
    assert ok == {"SEC007": "test data, not a token", "IMG001": "pinned upstream"}
    assert bad == [("SEC001", "gives no reason"), ("RES002", "gives no reason"), ("NOPE9", "names no rule")]


def test_suppressed_problem_does_not_fail_and_stays_visible(tmp_path):
    path = with_annotation(tmp_path, "SEC007=a dummy token for the tokenizer tests")
    proc = run_cli("validate", str(path))
    assert proc.returncode == 0, proc.stdout
    assert "warning SEC007" not in proc.stdout and "error SEC007" not in proc.stdout
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("suppressed SEC007"))
    assert "Secret/hf-token" in line and "(reason: a dummy token for the tokenizer tests)" in line
    assert "1 suppressed (SEC007)" in proc.stdout.splitlines()[-1]
    data = json.loads(run_cli("validate", "--format", "json", str(path)).stdout)
    assert data["summary"]["suppressed"] == 1
    (s,) = data["suppressed"]
    assert s["rule"] == "SEC007" and s["suppressed"] == "a dummy token for the tokenizer tests"
    sarif = json.loads(run_cli("validate", "--format", "sarif", str(path)).stdout)
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "SEC007"]
    assert result["suppressions"] == [{"kind": "inSource", "status": "accepted",
                                       "justification": "a dummy token for the tokenizer tests"}]
    junit = run_cli("validate", "--format", "junit", str(path)).stdout
    assert '<skipped message="suppressed: a dummy token for the tokenizer tests"' in junit


@pytest.mark.parametrize("value", ["SEC007", "SEC007=", "SEC007=   "])
def test_a_suppression_without_reason_is_an_error_and_not_applied(tmp_path, value):
    proc = run_cli("validate", str(with_annotation(tmp_path, value)))
    assert proc.returncode == 1
    assert "warning SEC007" in proc.stdout  # still reported
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("error SUPPRESS"))
    assert "gives no reason" in line and f"metadata.annotations[{SUPPRESS_ANNOTATION}]" in line


def test_unknown_rule_and_unused_suppression(tmp_path):
    proc = run_cli("validate", str(with_annotation(tmp_path, "SEC999=typo; IMG001=pinned upstream")))
    assert "warning SUPPRESS" in proc.stdout and "names SEC999, which is no rule" in proc.stdout
    assert "info SUPPRESS" in proc.stdout and "suppresses IMG001, which finds nothing" in proc.stdout


def test_a_suppression_covers_its_own_object_only(tmp_path):
    # On the Job, SEC007=... does not hide the Secret's problem.
    proc = run_cli("validate", str(with_annotation(tmp_path, "SEC007=not here", kind="Job")))
    assert proc.returncode == 0 and "warning SEC007" in proc.stdout
    assert "suppresses SEC007, which finds nothing on this object" in proc.stdout
