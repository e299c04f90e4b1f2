"""The public corpus (tests/corpus/index.yaml): real upstream manifests, copied unchanged, each with the verdict
read from the manifest and its controller's documented behaviour (`runs` or `cannot-form`), not from this project.

- `runs`: `validate` reports no error (warnings are allowed).
- `cannot-form`: `validate` reports at least one error, under `expected_rule`.
- every file, modelled kind or not: `validate` ends normally (exit 0 or 1, its JSON report), never a traceback.
- a kind no launcher models (`modelled: false`) is said so in one `MODEL` info line; a modelled one never is (its
  object may still get the MODEL line that says the SCHEMA errors above kept the model from reading it).

Where the validator disagrees today the index says why in `known_gap`, and the verdict test is
xfail(strict=True): the suite stays green now and fails (XPASS) when the model is fixed, so the entry is updated.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_cli

CORPUS = REPO / "tests" / "corpus"
CASES: list[dict] = yaml.safe_load((CORPUS / "index.yaml").read_text())["cases"]
VERDICTS = ("runs", "cannot-form")


@lru_cache(maxsize=None)
def validate(file: str) -> tuple[int, str, str]:
    proc = run_cli("validate", "--format", "json", str(CORPUS / file))
    return proc.returncode, proc.stdout, proc.stderr


def errors(file: str) -> list[dict]:
    _, out, _ = validate(file)
    return [p for p in json.loads(out)["problems"] if p["severity"] == "error"]


def test_index_covers_every_manifest():
    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.y*ml") if p.name != "index.yaml"}
    indexed = [c["file"] for c in CASES]
    assert len(indexed) == len(set(indexed)), "a file is indexed twice"
    assert on_disk == set(indexed)
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_index_entry_is_complete(case):
    src = case["source"]
    assert src["repo"].count("/") == 1 and src["path"] and src["ref"] and src["license"]
    assert re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    assert case["verdict"] in VERDICTS and case["reason"].strip()
    assert isinstance(case["modelled"], bool)
    if case["verdict"] == "cannot-form":
        assert case.get("expected_rule"), "a cannot-form case names the rule it must be reported under"
    assert set(case["validator_today"]) == {"result", "errors"}


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_no_traceback(case):
    rc, out, err = validate(case["file"])
    assert "Traceback" not in out + err
    assert "internal error" not in err
    assert rc in (0, 1), err
    report = json.loads(out)
    assert report["units"] and report["units"][0]["source"].endswith(case["file"])


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_kind_modelled_or_said_not(case):
    _, out, _ = validate(case["file"])
    said = [p for p in json.loads(out)["problems"] if p["rule"] == "MODEL"]
    if case["modelled"]:
        assert not [p for p in said if p["message"].startswith(f"{case['kind']} is not modelled")], said
    else:
        assert len(said) == 1 and said[0]["severity"] == "info", said
        assert said[0]["message"].startswith(f"{case['kind']} is not modelled"), said


def _verdict_params():
    for c in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=c["known_gap"])] if c.get("known_gap") else []
        yield pytest.param(c, id=c["file"], marks=marks)


@pytest.mark.parametrize("case", list(_verdict_params()))
def test_verdict(case):
    found = errors(case["file"])
    said = sorted({p["rule"] for p in found})
    if case["verdict"] == "runs":
        assert not found, f"{case['file']} runs ({case['reason']}) but validate reports errors {said}"
    else:
        assert found, f"{case['file']} cannot form ({case['reason']}) but validate reports no error"
        assert case["expected_rule"] in said, f"expected {case['expected_rule']}, validate reports {said}"
