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
