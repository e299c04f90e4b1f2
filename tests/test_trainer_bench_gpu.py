"""`make bench-gpu`'s script run end to end on the CPU (--cpu-fallback) with 2 processes: the real trainer under
torchrun with the DDP task, a resume from its checkpoint, the step function in process, the causal-lm task under
FSDP2 with a DCP resume, with --compile, and under bench/sync_count.py, and each of the ddp and lm steps once more at
world size 1 for the scaling rows; the table and JSON it writes hold every step's figures and no FAILED row."""
import json
import re
import sys
from pathlib import Path

from conftest import run_bounded

ROOT = Path(__file__).resolve().parent.parent


def test_cpu_fallback_runs_every_step(tmp_path):
    proc = run_bounded([sys.executable, str(ROOT / "bench" / "bench_gpu.py"), "--cpu-fallback", "--out",
                        str(tmp_path), "--timeout", "600", "--nproc-per-node", "2"], 840, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / "cpu-fallback.json").read_text())
    assert record["failed"] == []
    rows = {(r["step"], r["figure"]): r["value"] for r in record["rows"]}
    data = record["data"]

    def number(step: str, figure: str) -> float:
        return float(rows[(step, figure)].replace(",", "").rstrip("%"))

    assert number("ddp", "s/epoch (median after the 1st)") > 0
    assert rows[("ddp-resume", "resumed, trained epoch")] == "3"
    assert rows[("lm-resume", "resumed (DCP), trained epoch")] == "3"
    assert number("lm-fsdp", "tokens/s (epochs after the 1st)") > 0
    assert data["lm_fsdp"]["start"]["strategy"] == "fsdp"
    assert data["lm_fsdp"]["start"]["world"] == "2"
    # the CPU serves every metric but GPU memory; the table says so rather than leaving them out
    assert rows[("metrics", "trainer metrics served")] == "13/15"
    assert rows[("metrics", "gpu_memory_peak_bytes")] == "not served"
    assert rows[("lm-fsdp", "peak GPU memory (rank 0)")] == "not served"
    data_s, step_s = (float(v) for v in re.fullmatch(r"([\d.]+) / ([\d.]+)",
                                                     rows[("lm-fsdp", "data s / step s (rank 0)")]).groups())
    assert 0 <= data_s < step_s
    losses = [float(v) for v in rows[("lm-fsdp", "val_loss per epoch")].split(", ")]
    assert losses[-1] < losses[0]
    # world size 2 against 1: the efficiency is the two rates' ratio over 2, whatever 2 shared cores make of it
    for step, unit, key in (("ddp-scaling", "samples/s", "ddp_scaling"), ("lm-scaling", "tokens/s", "lm_scaling")):
        one, eff = number(step, f"{unit} at world size 1"), number(step, "scaling efficiency, 2 against 1")
        assert one > 0 and eff > 0
        assert data[key]["efficiency"] == data[key]["rate_n"] / (2 * data[key]["rate_1"])
    assert data["lm_scaling"]["rate_n"] == data["lm_fsdp"]["tokens_per_s"]
    # --compile ran the blocks compiled (the [DDP] line says what) and still trained
    assert data["lm_compile"]["start"]["compile"]
    assert number("lm-compile", "tokens/s (epochs after the 1st)") > 0
    # the sync count ran the trainer through bench/sync_count.py; CUDA alone can count
    assert data["lm_syncs"]["mode"].startswith("unavailable: no CUDA device")
    assert data["lm_syncs"]["steps"] > 0 and data["lm_syncs"]["total"] == 0
    assert rows[("lm-syncs", "host syncs in steps (rank 0)")] == "n/a"
    md = (tmp_path / "cpu-fallback.md").read_text()
    assert "| lm-resume " in md and "| lm-scaling " in md and "FAILED" not in md
