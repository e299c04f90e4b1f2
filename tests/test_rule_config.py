"""The repository-wide rule settings (.ddp-check.yaml, policies/report/rule_config.py): a rule skipped or its severity
changed for the paths an entry names, by `validate` and the pre-commit hook (`changed`) alike; a file it cannot
mean is one line and exit 2; under an operator's policy the operator's rules are not lowered."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, REPO
from policies.report.rule_config import Glob

NEAR_MISS = FIXTURES / "rules" / "TRAINER002" / "fail" / "dist-backnd.yaml"  # one TRAINER002 error
HOST_PATH = FIXTURES / "rules" / "SEC008" / "fail" / "host-path.yaml"


def ddp_check(cwd, *args):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "policies", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def problems(proc) -> list[tuple[str, str, str]]:
    report = json.loads(proc.stdout)
    return sorted((p["severity"], p["rule"], p["source"]) for p in report["problems"]
                  if p["rule"] in ("TRAINER002", "SEC008", "CONFIG"))


@pytest.fixture
def tree(tmp_path):
    """Two copies of a manifest with a TRAINER002 error: one at the top, one under vendor/."""
    (tmp_path / "vendor" / "team").mkdir(parents=True)
    shutil.copy(NEAR_MISS, tmp_path / "mine.yaml")
    shutil.copy(NEAR_MISS, tmp_path / "vendor" / "team" / "theirs.yaml")
    return tmp_path


def test_without_a_file_nothing_changes(tree):
    proc = ddp_check(tree, "validate", "--format", "json", ".")
    assert proc.returncode == 1
    assert problems(proc) == [("error", "TRAINER002", "mine.yaml"), ("error", "TRAINER002", "vendor/team/theirs.yaml")]


def test_a_rule_is_skipped_for_the_paths_named_and_reported_as_suppressed(tree):
    (tree / ".ddp-check.yaml").write_text(
        "rules:\n  - id: TRAINER002\n    paths: [vendor]\n    severity: off\n    reason: checked where they are made\n")
    proc = ddp_check(tree, "validate", "--format", "json", ".")
    assert proc.returncode == 1, proc.stderr
    assert problems(proc) == [("error", "TRAINER002", "mine.yaml")]
    report = json.loads(proc.stdout)
    (held,) = report["suppressed"]
    assert held["rule"] == "TRAINER002" and held["source"] == "vendor/team/theirs.yaml"
    assert held["suppressed"] == "checked where they are made (.ddp-check.yaml)"
    # Skipped everywhere: the run passes, and the text report still shows what was held back, and why.
    (tree / ".ddp-check.yaml").write_text(
        "rules:\n  - id: TRAINER002\n    severity: off\n    reason: the trainer image reads other names\n")
    text = ddp_check(tree, "validate", ".")
    assert text.returncode == 0, text.stdout
    assert text.stdout.count("suppressed TRAINER002 ") == 2 and "2 suppressed (TRAINER002)" in text.stdout


def test_severities_change_and_the_last_matching_entry_decides(tree):
    (tree / ".ddp-check.yaml").write_text(
        "rules:\n"
        "  - id: TRAINER002\n    severity: warning\n    reason: reviewed by hand\n"
        "  - id: TRAINER002\n    paths: ['vendor/**/*.yaml']\n    severity: error\n")
    proc = ddp_check(tree, "validate", "--format", "json", ".")
    assert problems(proc) == [("error", "TRAINER002", "vendor/team/theirs.yaml"), ("warning", "TRAINER002", "mine.yaml")]
    assert proc.returncode == 1
    only_mine = ddp_check(tree, "validate", "mine.yaml")
    assert only_mine.returncode == 0 and only_mine.stdout.startswith("warning TRAINER002 mine.yaml"), only_mine.stdout


def test_an_explicit_file_and_the_pre_commit_hook(tree, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("settings") / "rules.yaml"
    elsewhere.write_text("rules:\n  - id: TRAINER002\n    severity: info\n    reason: a demo tree\n")
    proc = ddp_check(tree, "validate", "--config", str(elsewhere), "--format", "json", "mine.yaml")
    # Paths are relative to the file's folder: an entry without paths applies everywhere.
    assert proc.returncode == 0 and problems(proc) == [("info", "TRAINER002", "mine.yaml")], proc.stdout
    (tree / ".ddp-check.yaml").write_text(
        "rules:\n  - id: TRAINER002\n    paths: [vendor]\n    severity: off\n    reason: checked where they are made\n")
    hook = ddp_check(tree, "changed", "vendor/team/theirs.yaml")
    assert hook.returncode == 0 and "suppressed TRAINER002 vendor/team/theirs.yaml" in hook.stdout, hook.stdout
    mine = ddp_check(tree, "changed", "mine.yaml")
    assert mine.returncode == 1 and mine.stdout.startswith("error TRAINER002 mine.yaml"), mine.stdout


def test_an_overlay_matches_by_its_folder_and_by_the_file_a_problem_is_traced_to(tmp_path):
    """A problem of an overlay is reported for the overlay's folder and traced to the file that holds the object:
    either may be named (here the base the overlay reads)."""
    # tests/fixtures/overlays/name-prefix's two errors, in a copy of the repository's kind-cpu tree.
    for part in ("base", "components"):
        shutil.copytree(REPO / part, tmp_path / part)
    shutil.copytree(REPO / "overlays" / "kind-cpu" / "indexed-job", tmp_path / "overlays" / "kind-cpu" / "indexed-job")
    team = tmp_path / "overlays" / "team"
    team.mkdir(parents=True)
    (team / "kustomization.yaml").write_text("namePrefix: team-\nresources:\n  - ../kind-cpu/indexed-job\n")
    proc = ddp_check(tmp_path, "validate", "--format", "json", "overlays/team")
    assert proc.returncode == 1, proc.stderr
    rules = {p["rule"] for p in json.loads(proc.stdout)["problems"] if p["severity"] == "error"}
    assert rules == {"TOPO003", "TOPO004"}, proc.stdout

    def levels(text):
        (tmp_path / ".ddp-check.yaml").write_text(text)
        run = ddp_check(tmp_path, "validate", "--format", "json", "overlays/team")
        return {p["rule"]: p["severity"] for p in json.loads(run.stdout)["problems"] if p["rule"].startswith("TOPO")}

    assert levels("rules:\n  - id: TOPO003\n    paths: [overlays/team]\n    severity: warning\n"
                  "    reason: a demo overlay\n") == {"TOPO003": "warning", "TOPO004": "error"}
    # TOPO004 is traced to base/indexed-job/job.yaml (the subdomain's line): the base's path names it too.
    assert levels("rules:\n  - id: TOPO004\n    paths: ['base/indexed-job/*.yaml']\n    severity: info\n"
                  "    reason: the Service comes from elsewhere\n") == {"TOPO003": "error", "TOPO004": "info"}
    assert levels("rules:\n  - id: TOPO004\n    paths: ['base/statefulset']\n    severity: info\n"
                  "    reason: another base\n") == {"TOPO003": "error", "TOPO004": "error"}


def test_the_operators_rules_are_not_lowered_under_its_policy(tmp_path):
    shutil.copy(HOST_PATH, tmp_path / "pod.yaml")
    (tmp_path / ".ddp-check.yaml").write_text(
        "rules:\n  - id: SEC008\n    severity: off\n    reason: we need the node\n")
    mine = ddp_check(tmp_path, "validate", "--format", "json", "pod.yaml")
    assert [p for p in problems(mine) if p[1] == "SEC008"] == []
    plugin = ddp_check(tmp_path, "validate", "--format", "json", "--operator-policy",
                       str(REPO / "argocd/cmp/operator-policy.yaml"), "pod.yaml")
    assert plugin.returncode == 1
    found = problems(plugin)
    assert ("error", "SEC008", "pod.yaml") in found and ("info", "CONFIG", "pod.yaml") in found, found
    line = next(p["message"] for p in json.loads(plugin.stdout)["problems"] if p["rule"] == "CONFIG")
    assert ".ddp-check.yaml lowers SEC008, which the operator's policy" in line


@pytest.mark.parametrize("text, message", [
    ("rules:\n  - id: TRAINER002\n    severity: off\n", "rules[0]: skipping TRAINER002 needs a reason"),
    ("rules:\n  - id: TRAINER002\n    severity: warning\n", "rules[0]: lowering TRAINER002 needs a reason"),
    ("rules:\n  - id: NOPE001\n    severity: error\n", "rules[0].id: 'NOPE001' is no rule"),
    ("rules:\n  - id: TRAINER002\n    severity: fatal\n", "rules[0].severity: 'fatal', expected one of"),
    ("rules:\n  - id: TRAINER002\n    severity: error\n    path: [x]\n", "rules[0].path: unknown key"),
    ("rules:\n  - id: TRAINER002\n    severity: error\n    paths: [../x]\n", "rules[0].paths: globs are relative"),
    ("checks: {}\n", "checks: unknown key, expected `rules:`"),
    ("rules: [\n", ".ddp-check.yaml:2: not YAML"),
    ("- a\n", "expected a mapping with `rules:`"),
])
def test_a_file_it_cannot_mean_is_one_line_and_nothing_is_checked(tree, text, message):
    (tree / ".ddp-check.yaml").write_text(text)
    proc = ddp_check(tree, "validate", ".")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: .ddp-check.yaml") and message in line, line


def test_a_missing_explicit_file_is_one_line(tree):
    proc = ddp_check(tree, "validate", "--config", "nowhere.yaml", ".")
    assert proc.returncode == 2 and proc.stderr == "error: nowhere.yaml: no such file (--config)\n", proc.stderr


@pytest.mark.parametrize("glob, path, hit", [
    ("vendor", "vendor/team/a.yaml", True), ("vendor/", "vendor/a.yaml", True), ("vendor", "vendors/a.yaml", False),
    ("*.yaml", "a.yaml", True), ("*.yaml", "x/a.yaml", False), ("**/*.yaml", "x/y/a.yaml", True),
    ("**/*.yaml", "a.yaml", True), ("overlays/*/team", "overlays/gke/team/k.yaml", True),
    ("overlays/*/team", "overlays/gke/x/team", False), ("a?c", "abc", True), ("[ab]x", "bx", True),
    ("[!ab]x", "bx", False), ("overlays/**", "overlays/team", True), ("overlays/**", "overlays", False),
])
def test_globs(glob, path, hit):
    assert Glob.parse(glob).matches(path) is hit


def test_a_hostile_glob_costs_no_more_than_its_length():
    """`*a*a*a...` against a long path that almost matches: a backtracking matcher takes exponential time; the
    automaton walks the path once."""
    glob = Glob.parse("*a" * 200 + "b")
    assert glob.matches("a" * 4000) is False and Glob.parse("**/" * 100 + "x").matches("a/" * 2000 + "x")
