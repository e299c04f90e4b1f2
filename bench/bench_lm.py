#!/usr/bin/env python3
"""Tokens per second of the causal-lm task on the CPU: the tiny GPT-2 of scripts/tiny_lm.py, 1 and 2 processes.

Each repetition runs both configurations (alternating which goes first), each under torchrun with one thread
per process, 3 epochs of the repository's Markdown packed into 128-token blocks, 16 blocks per rank and step;
the figure is the [EPOCH] lines' tokens over training seconds for the epochs after the first (warm-up). The
summary quotes the median and the spread (max/min - 1) of the repetitions.

    .venv/bin/python bench/bench_lm.py             # part of `make bench-trainer`
    .venv/bin/python bench/bench_lm.py --reps 5 --json out.json

No GPU figure: a ~125M model in bf16 and its model-FLOPs utilisation need CUDA, which this benchmark does not
yet measure (docs/trainer.md says so).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_trainer as bt  # noqa: E402
import tiny_lm  # noqa: E402

SEQ, BATCH, EPOCHS = 128, 16, 3


def tokens_per_s(output: str) -> tuple[float, float, float]:
    """(tokens/s, tokens, seconds) over the [EPOCH] lines after the first."""
    rows = []
    for line in output.splitlines():
        if line.startswith("[EPOCH] "):
            f = dict(bt.FIELD_RE.findall(line))
            rows.append((float(f["tokens/s"]) * float(f["train_s"]), float(f["train_s"])))
    rows = rows[1:] if len(rows) > 1 else rows
    tokens, seconds = sum(r[0] for r in rows), sum(r[1] for r in rows)
    return tokens / seconds, tokens, seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    results: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="bench-lm-") as tmp:
        info = tiny_lm.build(Path(tmp) / "tiny", layers=2, width=64, heads=4, positions=256, seed=0)
        print(f"bench-lm: tiny GPT-2, {info['params']:,} parameters, {info['vocab']} tokens, seq-len {SEQ}, "
              f"{BATCH} blocks per rank and step, {EPOCHS} epochs (the first left out), 1 thread per process")
        for rep in range(args.reps):
            for nproc in ((1, 2) if rep % 2 == 0 else (2, 1)):
                out = bt.run_trainer(nproc, ["--task", "causal-lm", "--model-local-dir", info["model"],
                                             "--data-root", info["data"], "--seq-len", str(SEQ),
                                             "--batch-size", str(BATCH), "--epochs", str(EPOCHS), "--lr", "3e-3",
                                             "--log-interval", "1000000", "--save-epochs", "false",
                                             "--run-id", f"r{rep}-p{nproc}"],
                                     Path(tmp) / "out", {"OMP_NUM_THREADS": "1"}, timeout=600)
                rate, tokens, seconds = tokens_per_s(out)
                results[nproc].append(rate)
                print(f"  {nproc} process{'es' if nproc > 1 else ''} rep={rep + 1}/{args.reps}: {rate:,.0f} tokens/s "
                      f"({tokens:,.0f} tokens in {seconds:.1f} s)", flush=True)
    summary = {}
    for nproc, rates in results.items():
        summary[nproc] = {"median_tokens_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                          "spread": max(rates) / min(rates) - 1, "runs": rates}
        print(f"causal-lm {nproc}x1: median {summary[nproc]['median_tokens_per_s']:,.0f} tokens/s "
              f"(min {min(rates):,.0f}, max {max(rates):,.0f}, spread {summary[nproc]['spread']:.0%})")
    ratio = summary[2]["median_tokens_per_s"] / summary[1]["median_tokens_per_s"]
    print(f"causal-lm 2x1 / 1x1: {ratio:.2f}x")
    print("GPU (~125M parameters, bf16, model-FLOPs utilisation): not measured (no CUDA here)")
    if args.json:
        args.json.write_text(json.dumps({"config": {"seq_len": SEQ, "batch": BATCH, "epochs": EPOCHS, **info},
                                         "results": summary, "ratio_2_over_1": ratio}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
