"""bench/bench_trainer.py: its GPU epoch timer (run here on the CPU) and an end-to-end smoke run."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from trainer_helpers import PYTHON, ROOT, clean_env, run


pytestmark = pytest.mark.timeout(120)


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_trainer", ROOT / "bench" / "bench_trainer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(60)
def test_mnist_epoch_timer_runs_the_trainer_step():
    bench = load_bench()
    times = bench.time_mnist_epochs(torch.device("cpu"), n=256, batch_size=64, epochs=2)
    assert len(times) == 2 and all(t > 0 for t in times)


def test_epoch_rate_parsing_skips_the_warm_up_epoch():
    bench = load_bench()
    out = "[DDP] world=2\n[EPOCH] epoch=1/3 samples/s=100 x=1\n[EPOCH] epoch=2/3 samples/s=300\n[EPOCH] epoch=3/3 samples/s=500\n"
    assert bench.epoch_rates(out) == [300.0, 500.0]
    assert bench.epoch_rates("[EPOCH] epoch=1/1 samples/s=42\n") == [42.0]


@pytest.mark.timeout(120)
def test_bench_end_to_end_small(tmp_path):
    res = run([PYTHON, "bench/bench_trainer.py", "--reps", "1", "--samples", "1024", "--batch-sizes", "128",
               "--epochs", "2", "--json", str(tmp_path / "r.json")], timeout=110, env=clean_env())
    assert res.returncode == 0, res.output[-3000:]
    assert "== trainer benchmark ==" in res.stdout and "scaling 2/1" in res.stdout
    assert "data: synthetic task: 1024 samples" in res.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    b = result["cpu"]["batches"]["128"]
    assert set(b["median_samples_per_s"]) == {"1", "2"} and all(v > 0 for v in b["median_samples_per_s"].values())
    if not torch.cuda.is_available():
        assert "GPU: not measured" in res.stdout
