"""Pod Security Admission's own fixtures (k8s.io/pod-security-admission v0.36.0, test/testdata, vendored by
scripts/vendor_pod_security_fixtures.py into tests/fixtures/pod-security/upstream-fixtures.json) through
policies.kube.pod_security.evaluate, asserting what upstream asserts of them (test/run.go:355-407, Run): every pass
pod is allowed at its level and version; every fail pod is refused, its message holds the substring the fixture's
check expects (fixtureGenerator.expectErrorSubstring, else the check ID: test/fixtures.go:266-268) and never
"unknown forbidden reason" (test/run.go:258-261). A fail pod need not fail only its own check: upstream does not ask
that. (TestFixtures, test/fixtures_test.go, checks the files match the generators; the evaluation is Run's.)"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from policies.kube import pod_security as ps
from policies.kube.pod_security_checks import DEFAULT_CHECKS

DATA = json.loads((Path(__file__).parent / "fixtures" / "pod-security" / "upstream-fixtures.json").read_text())
PODS = DATA["pods"]
# test/fixtures_test.go:96-101: a fixture file is named strings.ToLower(checkID) + its index
CHECK_BY_FILE = {c.id.lower(): c.id for c in DEFAULT_CHECKS}


def _cases(outcome: str) -> list[tuple[str, str, str, int]]:
    out = []
    for key, names in DATA["cases"].items():
        level, version, kind = key.split("/")
        if kind == outcome:
            out += [(level, version, name, pod) for name, pod in names.items()]
    return out


def _evaluate(level: str, version: str, pod: int) -> list[ps.CheckResult]:
    parsed, err = ps.parse_version(version)
    assert err is None
    body = PODS[pod]
    return ps.evaluate(ps.LevelVersion(level, parsed), body.get("metadata"), body.get("spec"))


def test_the_vendored_fixtures_are_upstreams():
    source = DATA["source"]
    assert (source["repo"], source["tag"], source["path"]) == ("kubernetes/pod-security-admission", "v0.36.0",
                                                               "test/testdata")
    assert source["commit"] == "a51fa0ea7ef60cabe8c3625c1c4c4dfdc5330cba"
    # 4,242 files at the tag: these 4,241 pods and test/testdata/README.md; v1.0 .. v1.35 for both levels
    assert sum(len(names) for names in DATA["cases"].values()) == 4241
    assert {k.rsplit("/", 1)[0] for k in DATA["cases"]} == {f"{lvl}/v1.{n}" for lvl in ("baseline", "restricted")
                                                            for n in range(36)}


def test_every_pass_fixture_is_allowed():
    wrong = []
    for level, version, name, pod in _cases("pass"):
        results = _evaluate(level, version, pod)
        if results:
            wrong.append(f"{level}/{version}/pass/{name}: {ps.forbidden_detail(results)}")
    assert not wrong, "\n".join(wrong)


def test_every_fail_fixture_is_refused_for_its_check():
    wrong = []
    fail_cases = _cases("fail")
    assert fail_cases
    for level, version, name, pod in fail_cases:
        check = CHECK_BY_FILE[re.sub(r"[0-9]+$", "", name)]
        expect = DATA["expect_error_substring"][check]
        detail = ps.forbidden_detail(_evaluate(level, version, pod))
        if not detail or expect not in detail or ps.UNKNOWN_FORBIDDEN_REASON in detail:
            wrong.append(f"{level}/{version}/fail/{name}: expected {expect!r} in {detail!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("version", ["latest", "v1.36", "v1.99"])
def test_newer_versions_evaluate_as_the_newest_fixtures(version):
    """registry.go:72-74: a version past the registry's newest (v1.35) evaluates as v1.35."""
    for outcome in ("pass", "fail"):
        for key, names in DATA["cases"].items():
            level, ver, kind = key.split("/")
            if ver != "v1.35" or kind != outcome:
                continue
            for name, pod in names.items():
                assert bool(_evaluate(level, version, pod)) == (outcome == "fail"), (key, name)
