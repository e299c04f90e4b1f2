"""checkov (make lint) on every rendered overlay: no failed check that is not skipped with a reason."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import REPO
from policies.checkov_scan import find_checkov

needs_checkov = pytest.mark.skipif(find_checkov() is None, reason="checkov is not installed: `make setup` puts "
                                   "checkov 3.3.30 in .venv-checkov (requirements-checkov.txt)")
pytestmark = pytest.mark.timeout(600)


def scan(*paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policies.checkov_scan", *paths], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


@needs_checkov
def test_every_overlay_passes_or_skips_with_a_reason():
    proc = scan()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    *problems, summary = proc.stdout.strip().splitlines()
    assert problems == []
    overlays = len([p for p in (REPO / "overlays").glob("*/*") if (p / "kustomization.yaml").is_file()])
    assert summary.startswith(f"checkov: {overlays} sources, ") and summary.endswith(
        " 0 failed or skipped without one; 0 problem(s)"), summary


@needs_checkov
def test_a_failed_check_and_a_skip_without_reason_are_each_one_line(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(textwrap.dedent("""\
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: bare
          annotations:
            checkov.io/skip1: CKV_K8S_21
        spec:
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: trainer
                  image: ghcr.io/example/ddp-trainer:0.1.0
        """))
    proc = scan(str(job))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert any(" Job.default.bare: CKV_K8S_22 " in line and line.startswith("error CHECKOV ") for line in lines)
    assert any("CKV_K8S_21 skipped without a reason" in line for line in lines)
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_missing_checkov_is_an_error_not_a_pass(monkeypatch, capsys):
    from policies import checkov_scan

    monkeypatch.setattr(checkov_scan, "find_checkov", lambda: None)
    assert checkov_scan.main([]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == ("error: checkov not found: `make setup` installs checkov 3.3.30 in .venv-checkov "
                       "(or set CHECKOV=<path>)\n")
