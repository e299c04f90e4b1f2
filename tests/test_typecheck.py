"""`make typecheck` inside the test suite: mypy (pinned in requirements-dev.txt) over policies/ and trainer/ with the
settings in pyproject.toml [tool.mypy] exits 0, so `make test-fast` and CI (`make test`) fail on a type error. One test
runs mypy on the repository (its cache under .cache/mypy, which no other test touches: no two processes share it); a
second shows the same settings fail on a file with a type error, so the first cannot pass by checking nothing."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (make setup installs the pinned version from "
                                       "requirements-dev.txt)")


def _mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(CONFIG), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_policies_and_trainer_type_check():
    """The whole check, as `make typecheck` runs it (cold about a minute of CPU, warm a few seconds)."""
    r = _mypy()
    assert r.returncode == 0, f"mypy exit {r.returncode}:\n{r.stdout}{r.stderr}"
    assert "Success: no issues found" in r.stdout, r.stdout + r.stderr


def test_a_type_error_fails_the_check(tmp_path):
    """The same settings on a module with a wrong return type: exit 1 and the error named."""
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""\
        def count() -> int:
            return "three"
        """))
    r = _mypy("--cache-dir", str(tmp_path / "cache"), str(bad), cwd=tmp_path)
    assert r.returncode == 1, f"mypy exit {r.returncode}:\n{r.stdout}{r.stderr}"
    assert 'Incompatible return value type (got "str", expected "int")' in r.stdout, r.stdout + r.stderr
