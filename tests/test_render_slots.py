"""Kustomize runs at once on one machine (DDP_KUSTOMIZE_SLOTS, set in the Argo CD plugin's sidecar): Argo CD runs
several generates at once in one sidecar and each kustomize may take render.KUSTOMIZE_MEMORY_BYTES, so with N slots
at most N run at once, across processes, and the sidecar's memory limit holds N times that plus the checks."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading

import pytest

from conftest import REPO
from policies.render import render

# Prints when it starts and ends (absolute paths: the sandbox leaves no program on PATH).
TIMED = ["/bin/sh", "-c", "echo $(/bin/date +%s.%N); /bin/sleep 2; echo $(/bin/date +%s.%N)"]


def intervals(monkeypatch, tmp_path, slots: str, runs: int = 2) -> list[tuple[float, float]]:
    monkeypatch.setenv(render.SLOTS_ENV, slots)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a slot folder of this test's own
    results: list[render.Run] = []
    threads = [threading.Thread(target=lambda: results.append(render.run_bounded(TIMED))) for _ in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.failure is None and r.returncode == 0 for r in results), [r.failure for r in results]
    return sorted(tuple(map(float, r.stdout.split())) for r in results)  # type: ignore[misc]


def test_one_slot_runs_one_kustomize_at_a_time(monkeypatch, tmp_path):
    (a_start, a_end), (b_start, b_end) = intervals(monkeypatch, tmp_path, "1")
    assert b_start >= a_end, (a_start, a_end, b_start, b_end)


def test_two_slots_run_two_at_once(monkeypatch, tmp_path):
    (a_start, a_end), (b_start, b_end) = intervals(monkeypatch, tmp_path, "2")
    assert b_start < a_end, (a_start, a_end, b_start, b_end)


def test_a_slot_held_by_another_process_is_waited_for(monkeypatch, tmp_path):
    """flock'd files, so the slots hold across the sidecar's processes (one per generate), and a killed holder's
    slot comes free with it."""
    (tmp_path / "slots").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(tmp_path / 'slots')!r} + '/slot-0', os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE,
        text=True)
    try:
        monkeypatch.setattr(render, "_slot_folder", lambda: tmp_path / "slots")
        monkeypatch.setenv(render.SLOTS_ENV, "1")
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        with pytest.raises(render.NoSlot, match=r"no kustomize slot came free within 0.5 s \(DDP_KUSTOMIZE_SLOTS=1"):
            with render._slot(wait=0.5):
                pass
        holder.kill()
        holder.wait()
        with render._slot(wait=5):
            pass  # free again once its holder died
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # type: ignore[union-attr]


@pytest.mark.parametrize("value", ["0", "many", "65", "-1"])
def test_a_bad_slot_count_is_one_line_for_every_render(monkeypatch, value):
    monkeypatch.setenv(render.SLOTS_ENV, value)
    assert render.run_bounded(TIMED).failure == (f"{render.SLOTS_ENV} is {value!r}, expected a whole number from 1 "
                                                 f"to {render.MAX_SLOTS}")
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "overlays/kind-cpu/indexed-job"],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, render.SLOTS_ENV: value, "POLICIES_NO_CACHE": "1"})
    assert proc.returncode != 0 and f"{render.SLOTS_ENV} is {value!r}" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_sidecar_is_sized_for_its_slots():
    """argocd/cmp/repo-server-patch.yaml: its memory limit holds every slot's kustomize at its bound plus the checks
    of six generates at once (what its comment promises), so raising the slots without the limit fails here."""
    import yaml

    from policies.kube.values import quantity_bytes
    patch = yaml.safe_load((REPO / "argocd/cmp/repo-server-patch.yaml").read_text())
    [sidecar] = [c for c in patch["spec"]["template"]["spec"]["containers"] if c["name"] == "ddp-checks"]
    slots = int({e["name"]: e["value"] for e in sidecar["env"]}[render.SLOTS_ENV])
    limit = quantity_bytes(sidecar["resources"]["limits"]["memory"])
    assert limit >= slots * render.KUSTOMIZE_MEMORY_BYTES + 6 * 150 * 1024 * 1024, (slots, limit)
