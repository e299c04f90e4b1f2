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


def test_epoch_parsing_skips_the_warm_up_epoch_and_sums_figures():
    bench = load_bench()
    out = ("[DDP] world=2\n[EPOCH] epoch=1/3 samples/s=100 train_s=1.0000 cpu_s=2.0000 x=1\n"
           "[EPOCH] epoch=2/3 samples/s=300 train_s=2.0000 cpu_s=3.0000\n"
           "[EPOCH] epoch=3/3 val_loss=0.1 samples/s=500 train_s=2.0000 cpu_s=3.0000 checkpoint=epoch-0003.pt\n")
    rows = bench.epoch_figures(out)
    assert [r["samples"] for r in rows] == [600.0, 1000.0]
    fig = bench.summarise(rows)
    assert fig["samples_per_s"] == 400.0 and fig["cores_busy"] == 1.5 and fig["cpu_us_per_sample"] == 3750.0
    assert len(bench.epoch_figures("[EPOCH] epoch=1/1 samples/s=42 train_s=1.0 cpu_s=1.0\n")) == 1


def test_configurations_compare_the_same_cores_and_anchor_on_a_plain_loop():
    bench = load_bench()
    cores = {name: procs * threads for name, (_, procs, threads) in bench.CONFIGS.items()}
    assert cores == {"loop 1x2": 2, "trainer 1x1": 1, "trainer 1x2": 2, "trainer 2x1": 2, "trainer 2x1 +metrics": 2}
    assert ("trainer 2x1 +metrics", "trainer 2x1") in [(a, b) for _, a, b in bench.RATIOS]  # the endpoint's cost
    assert ("trainer 2x1", "trainer 1x2") in [(a, b) for _, a, b in bench.RATIOS]  # same cores
    assert ("trainer 2x1", "trainer 1x1") in [(a, b) for _, a, b in bench.RATIOS]  # per-core scaling


@pytest.mark.timeout(200)
def test_bench_end_to_end_small(tmp_path):
    res = run([PYTHON, "bench/bench_trainer.py", "--reps", "1", "--samples", "1024", "--batch-sizes", "128",
               "--epochs", "2", "--json", str(tmp_path / "r.json")], timeout=190, env=clean_env())
    assert res.returncode == 0, res.output[-3000:]
    assert "== trainer benchmark ==" in res.stdout and "same 2 cores" in res.stdout
    assert "data: synthetic task: 1024 samples" in res.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    b = result["cpu"]["batches"]["128"]
    assert set(b["rows"]) == {"loop 1x2", "trainer 1x1", "trainer 1x2", "trainer 2x1", "trainer 2x1 +metrics"}
    for row in b["rows"].values():
        assert row["median_samples_per_s"] > 0 and row["median_run_cpu_s"] > 0 and row["median_cores_busy"] > 0
        assert row["min"] <= row["median_samples_per_s"] <= row["max"]
    assert len(b["ratios"]) == 5 and all(v > 0 for v in b["ratios"].values())
    scraped = b["rows"]["trainer 2x1 +metrics"]
    assert scraped["scrapes"] == sum(r["scrapes"] for r in scraped["runs"])
    if scraped["scrapes"]:  # a short run may end before its endpoints are up; what was scraped is the trainer's
        assert "trainer_world_size" in set().union(*(r["series"] for r in scraped["runs"]))
    assert "scraped" in res.stdout
    m = result["metrics"]
    assert m["cost_per_step_us"] > 0 and m["fraction"] == pytest.approx(m["cost_per_step_us"] / 1e6 / m["step_s"])
    assert "metrics cost per step (in process, live endpoint)" in res.stdout
    if not torch.cuda.is_available():
        assert "GPU: not measured" in res.stdout
