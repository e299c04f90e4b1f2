"""Make variables are data, never code: every variable a user passes (PATHS, OVERLAY, BASE, FORMAT, ...) reaches its
command as one word with its text as given, so `;`, backticks, $(...) (the shell's and make's) and quotes run nothing,
and the exit code is the tool's (docs/security.md#make-variables)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO


def hostile(marker: Path) -> str:
    """One value holding every way a value could become code: make's $(shell), the shell's $(...), backticks, `;`,
    `&&`, and both quotes to break out of a quoted word."""
    m = str(marker)
    return f"x;touch {m}1 && touch {m}2 `touch {m}3` $(touch {m}4) $(shell touch {m}5) ' ; touch {m}6 ; ' \" ; touch {m}7 \""


CASES = [
    ("validate", "PATHS", {}), ("validate", "FORMAT", {"PATHS": "overlays/kind-cpu/trainjob"}),
    ("validate", "SCHEMA", {"PATHS": "overlays/kind-cpu/trainjob"}),
    ("validate", "POLICY_ENV", {"PATHS": "overlays/kind-cpu/trainjob"}),
    ("plan", "PATHS", {}), ("render", "PATHS", {}),
    ("scale", "OVERLAY", {"NODES": "2", "DRY_RUN": "1"}), ("scale", "NODES", {"OVERLAY": "kind-cpu/trainjob",
                                                                             "DRY_RUN": "1"}),
    # BASE only names the git ref whose run id is compared (an unknown one falls back to HEAD): no error, no command.
    ("scale", "BASE", {"OVERLAY": "kind-cpu/trainjob", "NODES": "2", "DRY_RUN": "1"}),
    ("new-run", "OVERLAY", {"DRY_RUN": "1"}), ("new-run", "RUN_ID", {"OVERLAY": "kind-cpu/trainjob", "DRY_RUN": "1"}),
    ("recover", "OVERLAY", {}), ("remove-env", "ENV", {"DRY_RUN": "1"}),
    ("diff", "BASE", {}), ("diff", "HEAD_REF", {}), ("report", "RUN", {}),
]


def make(target: str, variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", "-s", "--no-print-directory", target, *(f"{k}={v}" for k, v in variables.items())],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("target, var, others", CASES, ids=lambda c: c if isinstance(c, str) else "")
def test_a_variable_runs_nothing(tmp_path, target, var, others):
    marker = tmp_path / "ran"
    proc = make(target, {**others, var: hostile(marker)})
    assert not list(tmp_path.glob("ran*")), f"make {target} {var}=... ran a command: {sorted(tmp_path.iterdir())}"
    # The tool got the value whole and refused it: its exit code, through make (2), and a line naming the value.
    assert proc.returncode == (0 if (target, var) == ("scale", "BASE") else 2), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_exit_code_is_the_tools():
    """`PATHS='missing;true'`: `;` made the recipe end with `true`'s 0 after validate failed."""
    proc = make("validate", {"PATHS": "no-such-folder;true"})
    assert proc.returncode == 2 and "no-such-folder;true" in proc.stdout + proc.stderr


def test_paths_with_spaces_and_quotes_still_work(tmp_path):
    odd = tmp_path / "it's a \"folder\""
    odd.mkdir()
    (odd / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    proc = make("validate", {"PATHS": f"{odd} overlays/kind-cpu/trainjob"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("OK: 1 rendered folder, 1 file")


@pytest.mark.parametrize("variables, message", [
    ({"ENV": "-x6", "FROM": "gke-t4", "NODES": "2", "GPUS_PER_NODE": "1"}, "error: ENV '-x6' must be lowercase"),
    ({"ENV": "x6", "FROM": "-gke", "NODES": "2", "GPUS_PER_NODE": "1"}, "error: FROM '-gke' is not an environment"),
    ({"ENV": "x6", "FROM": "gke-t4", "NODES": "-2", "GPUS_PER_NODE": "1"}, "NODES"),
])
def test_a_value_that_looks_like_an_option_is_a_value(variables, message):
    """`make new-env ENV=-x6` printed argparse's usage: each value reaches the tool as `--option=value`, so it is
    refused by name in one line, before anything about the repository is looked at, and nothing is written."""
    proc = make("new-env", {**variables, "DRY_RUN": "1"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("make: ***")]
    assert len(lines) == 1 and message in lines[0] and "usage:" not in proc.stderr, proc.stderr


def test_a_new_line_in_a_value_runs_nothing_even_under_make_i(tmp_path):
    """A new line ended the recipe's command and began another, which `make -i` ran after the first failed."""
    marker = tmp_path / "ran"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    proc = subprocess.run(["make", "-s", "-i", "--no-print-directory", "validate", f"PATHS=x\ntouch {marker} #"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert not marker.exists(), proc.stdout + proc.stderr
    assert f"error INPUT x\\ntouch {marker} #: no such file or folder" in proc.stdout, proc.stdout


@pytest.mark.parametrize("var", ["VENV", "BIN", "PYTHON", "CHECKOV_VENV"])
@pytest.mark.parametrize("where", ["command line", "environment"])
def test_the_tool_paths_are_refused_unless_plain(tmp_path, var, where):
    """VENV, BIN, PYTHON and CHECKOV_VENV reach recipes unquoted: a value that is not one plain path stops make
    before any recipe runs, and make's own $(shell ...) in it is text."""
    marker = tmp_path / "ran"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    value = f"$(shell touch {marker}1) `touch {marker}2`;touch {marker}3"
    args = ["make", "-s", "--no-print-directory", "validate", "PATHS=overlays/kind-cpu/trainjob"]
    if where == "environment":
        env[var] = value
    else:
        args.append(f"{var}={value}")
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert not list(tmp_path.glob("ran*")), sorted(tmp_path.iterdir())
    assert proc.returncode == 2 and f"{var} must be one path of letters" in proc.stderr, proc.stderr
    assert proc.stdout == ""
