"""policies/entry.py: how every policies command ends on an error (one line, never a traceback)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from policies.entry import guarded


class Expected(Exception):
    pass


def boom(exc: BaseException):
    def body() -> int:
        raise exc
    return body


def test_expected_error_is_one_line_exit_2(capsys):
    assert guarded(boom(Expected("overlays/x: no such folder")), (Expected,), prefix="make x: ") == 2
    assert capsys.readouterr().err == "error: make x: overlays/x: no such folder\n"


def test_internal_fault_is_one_line_exit_3_and_debug_shows_the_traceback(capsys, monkeypatch):
    monkeypatch.delenv("POLICIES_DEBUG", raising=False)
    assert guarded(boom(KeyError("spec")), (Expected,)) == 3
    err = capsys.readouterr().err
    assert err.startswith("internal error: KeyError: 'spec'") and err.count("\n") == 1
    monkeypatch.setenv("POLICIES_DEBUG", "1")
    with pytest.raises(KeyError):
        guarded(boom(KeyError("spec")), (Expected,))


def test_success_and_interrupt_codes():
    assert guarded(lambda: 0, (Expected,)) == 0
    assert guarded(lambda: 1, (Expected,)) == 1
    assert guarded(boom(KeyboardInterrupt()), (Expected,)) == 130


def test_closed_pipe_is_not_an_error():
    """`python -m policies.cli render | head`: the reader is gone before the output is written; no traceback,
    no error line, exit 0 (without the BrokenPipeError branch this is `internal error`, exit 3)."""
    proc = subprocess.run(f"{sys.executable} -m policies.cli render | true; echo rc=${{PIPESTATUS[0]}}", shell=True,
                          executable="/bin/bash", capture_output=True, text=True, timeout=120)
    assert proc.stdout == "rc=0\n" and proc.stderr == "", (proc.stdout, proc.stderr)
