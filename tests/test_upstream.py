"""Manifests from the upstream projects: those that run as written give no errors, those that cannot form a
correct world give the errors their header names (`# expect: TOPO001 ...`)."""
from __future__ import annotations

import re

import pytest

from conftest import FIXTURES, run_cli

RUNS = sorted((FIXTURES / "upstream/runs-as-written").glob("*.yaml"))
BROKEN = sorted((FIXTURES / "upstream/broken").glob("*.yaml"))


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_runs_as_written_has_no_errors(path):
    proc = run_cli("validate", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 errors" in proc.stdout
    for line in proc.stdout.splitlines()[:-1]:
        # warnings allowed, each says why; and what each world survives (policies/model/recovery.py)
        assert line.startswith(("warning ", "info ", "recovery ")), line
    # ... and the file's header names each rule that warns, with the reason.
    expected = re.search(r"^# warnings: (.+)$", path.read_text(), re.M).group(1).split()
    warned = {line.split()[1] for line in proc.stdout.splitlines() if line.startswith("warning ")}
    assert warned == set(expected), proc.stdout


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_broken_examples_fail_with_the_expected_rules(path):
    expected = re.search(r"^# expect: (.+)$", path.read_text(), re.M).group(1).split()
    proc = run_cli("validate", str(path))
    assert proc.returncode == 1, proc.stdout
    fired = {line.split()[1] for line in proc.stdout.splitlines() if line.startswith("error ")}
    assert set(expected) <= fired, proc.stdout
