"""One reading of OVERLAY and PATHS for every command (policies/render/paths.py): `kind-cpu/indexed-job` and
`overlays/kind-cpu/indexed-job`, with or without a trailing slash, name the same overlay for make scale, new-run,
simulate, plan, validate and diff (scale, new-run and diff are tested in test_scale_transaction.py and test_diff.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO
from policies.simulate import cli as simulate
from policies.render.paths import overlay_path

FORMS = ["kind-cpu/indexed-job", "kind-cpu/indexed-job/", "overlays/kind-cpu/indexed-job",
         "overlays/kind-cpu/indexed-job/"]


@pytest.mark.parametrize("form", FORMS)
def test_every_form_names_the_overlay_from_the_repository(form, monkeypatch):
    monkeypatch.chdir(REPO)
    assert overlay_path(form) == "overlays/kind-cpu/indexed-job"


def test_from_another_folder_the_repository_is_the_fallback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert overlay_path("kind-cpu/indexed-job") == str(REPO / "overlays/kind-cpu/indexed-job")
    (tmp_path / "kind-cpu/indexed-job").mkdir(parents=True)
    assert overlay_path("kind-cpu/indexed-job/") == "kind-cpu/indexed-job"  # what the user's folder has wins


@pytest.mark.parametrize("raw", ["-", "", "no/such/overlay", "/"])
def test_what_names_nothing_comes_back_as_written(raw, monkeypatch):
    monkeypatch.chdir(REPO)
    assert overlay_path(raw) == raw


@pytest.mark.parametrize("form", FORMS)
def test_simulate_takes_every_form(form, monkeypatch):
    seen = {}

    def fake(source, run_dir, deadline, scale_to, **_):
        seen["source"], seen["run_dir"] = source, run_dir
        return 0

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(simulate, "simulate", fake)
    assert simulate.main([form]) == 0
    assert seen["source"] == "overlays/kind-cpu/indexed-job"
    assert seen["run_dir"] == REPO / ".sim" / "kind-cpu_indexed-job"  # one run folder whatever the form


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_plan_and_validate_take_the_short_form(command):
    proc = subprocess.run([sys.executable, "-m", "policies.cli", command, "kind-cpu/indexed-job/"], cwd=REPO,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("overlays/kind-cpu/indexed-job" if command == "plan" else "OK: 1 rendered folder, 5 objects") in proc.stdout
