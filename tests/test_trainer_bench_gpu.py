"""`make bench-gpu`'s script run end to end on the CPU (--cpu-fallback): the real trainer under torchrun with the
DDP task, a resume from its checkpoint, the step function in process, and the causal-lm task under FSDP2 with a
DCP resume; the table and JSON it writes hold every step's figures and no FAILED row."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_cpu_fallback_runs_every_step(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_gpu.py"), "--cpu-fallback", "--out",
                           str(tmp_path), "--timeout", "600"], capture_output=True, text=True, timeout=1500, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / "cpu-fallback.json").read_text())
    assert record["failed"] == []
    rows = {(r["step"], r["figure"]): r["value"] for r in record["rows"]}
    assert float(rows[("ddp", "s/epoch (median after the 1st)")]) > 0
    assert rows[("ddp-resume", "resumed, trained epoch")] == "3"
    assert rows[("lm-resume", "resumed (DCP), trained epoch")] == "3"
    assert float(rows[("lm-fsdp", "tokens/s (epochs after the 1st)")].replace(",", "")) > 0
    assert record["data"]["lm_fsdp"]["start"]["strategy"] == "fsdp"
    # the CPU serves every metric but GPU memory; the table says so rather than leaving them out
    assert rows[("metrics", "trainer metrics served")] == "13/15"
    assert rows[("metrics", "gpu_memory_peak_bytes")] == "not served"
    losses = [float(v) for v in rows[("lm-fsdp", "val_loss per epoch")].split(", ")]
    assert losses[-1] < losses[0]
    md = (tmp_path / "cpu-fallback.md").read_text()
    assert "| lm-resume " in md and "FAILED" not in md
