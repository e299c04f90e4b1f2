"""bench/bench_gpu.py without a GPU: it says so and exits 0, its options are checked, and the figures committed
from a GPU session (bench/gpu-*.md) are the table the script wrote from its JSON. The CPU fallback run of every
step is tests/test_trainer_bench_gpu.py (slow)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import bench_gpu  # noqa: E402


def test_without_cuda_it_measures_nothing_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_gpu.torch.cuda, "is_available", lambda: False)
    assert bench_gpu.main(["--out", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_lm_override_is_refused():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_gpu.py"), "--cpu-fallback", "--lm", "bogus=1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--lm 'bogus=1': the key is one of strategy" in proc.stderr


@pytest.mark.parametrize("name, slug", [("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"), ("Tesla T4", "tesla-t4"),
                                        ("", "unknown")])
def test_card_slug(name, slug):
    assert bench_gpu.card_slug(name) == slug


def test_a_failed_step_is_a_row_and_is_listed():
    rep = bench_gpu.Report()
    rep.add("ddp", "s/epoch", "0.250")
    rep.fail("lm-fsdp", "exit 1: [ERROR] out of memory")
    table = bench_gpu.render(rep, ["# t"])
    assert rep.failed == ["lm-fsdp"]
    assert "| lm-fsdp | FAILED " in table and "[ERROR] out of memory" in table


@pytest.mark.parametrize("data", sorted((ROOT / "bench").glob("gpu-*.json")), ids=lambda p: p.name)
def test_committed_gpu_figures_are_the_scripts_table(data):
    md = data.with_suffix(".md")
    record = json.loads(data.read_text())
    rep = bench_gpu.Report([bench_gpu.Row(**r) for r in record["rows"]])
    text = md.read_text()
    table = bench_gpu.render(rep, []).strip()
    assert table in text, f"{md.name}: the table is not what the script renders from {data.name}'s rows"
    assert record["device"] in text.splitlines()[0]
    # A step that failed on the card stays in the committed record as the script wrote it (its FAILED row and the
    # FAILED list under the title), never dropped: bench/HISTORY.md says why it failed.
    if record["failed"]:
        assert f"FAILED: {', '.join(record['failed'])}" in text
        assert all(re.search(rf"^\| {re.escape(step)} +\| FAILED ", text, re.M) for step in record["failed"])


def test_a_refused_nproc_per_node():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_gpu.py"), "--cpu-fallback", "--nproc-per-node",
                           "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--nproc-per-node 0: at least 1" in proc.stderr


def test_more_processes_than_cuda_devices_is_refused(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench_gpu.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench_gpu.torch.cuda, "device_count", lambda: 1)
    with pytest.raises(SystemExit) as e:
        bench_gpu.main(["--nproc-per-node", "8", "--out", str(tmp_path)])
    assert e.value.code == 2
    assert "--nproc-per-node 8: this machine has 1 CUDA device(s)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_sync_counter_counts_by_phase_and_trainer_line():
    """bench/sync_count.py's counter, fed the warning set_sync_debug_mode("warn") gives (CUDA only, so raised here
    from code that names a trainer file): counted by phase and line, every occurrence (not once per line), and any
    other warning shown as before."""
    import warnings

    import sync_count

    shown = []
    code = compile("import warnings\nfor _ in range(3):\n    warnings.warn(message)\n",
                   str(ROOT / "trainer" / "loop.py"), "exec")
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = lambda message, *rest: shown.append(str(message))
        counter = sync_count.SyncCounter()
        counter.install()
        counter.enter("model load")
        exec(code, {"message": sync_count.SYNC_WARNING})
        counter.enter("step 1")
        counter.enter("step 2")
        exec(code, {"message": sync_count.SYNC_WARNING})
        warnings.warn("something else")
    record = counter.record("warn")
    assert record == {"mode": "warn", "total": 6, "steps": 2, "by_phase": {"model load": 3, "step": 3},
                      "sites": {"trainer/loop.py:3": 6}}
    assert shown == ["something else"]


def test_a_run_the_deadline_leaves_no_time_for_is_a_failed_row(tmp_path):
    """--deadline (a lent GPU's time per call): a trainer run with less than LEAST_RUN_S left is not started, and
    its step says so in a FAILED row; the table is still written, and the exit status is 1."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_gpu.py"), "--cpu-fallback", "--steps", "ddp",
                           "--deadline", "1", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = json.loads((tmp_path / "cpu-fallback.json").read_text())
    assert record["failed"] == ["ddp"] and record["final"] is True
    [row] = record["rows"]
    assert (row["step"], row["figure"]) == ("ddp", "FAILED")
    assert re.fullmatch(r"not run: --deadline leaves [01] s \(a run needs 20\)", row["value"]), row
    assert "FAILED: ddp" in (tmp_path / "cpu-fallback.md").read_text()
