"""Shared helpers: the repository root, a runner for the CLI as users call it, and a unit validator."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run_cli(*args: str, stdin: str | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policies.cli", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


# `make test-fast` runs `pytest -m "not slow"`; `make test` runs everything. Whole modules that launch real processes
# end to end are slow by their name (so a test added to them is too); single slow tests elsewhere carry
# @pytest.mark.slow. Unit-level trainer modules stay in the fast loop.
SLOW_MODULES = {"test_simulate", "test_checkov"}
FAST_TRAINER_MODULES = {"test_trainer_units", "test_trainer_idx"}


def _slow_module(name: str) -> bool:
    return name in SLOW_MODULES or (name.startswith("test_trainer_") and name not in FAST_TRAINER_MODULES)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _slow_module(Path(str(item.fspath)).stem):
            item.add_marker(pytest.mark.slow)
