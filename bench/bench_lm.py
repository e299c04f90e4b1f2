#!/usr/bin/env python3
"""Tokens per second of the causal-lm task on the CPU: the tiny GPT-2 of scripts/tiny_lm.py, 1 and 2 processes.

Each repetition runs both configurations (alternating which goes first), each under torchrun with one thread
per process, 3 epochs of the repository's Markdown packed into 128-token blocks, 16 blocks per rank and step;
the figure is the [EPOCH] lines' tokens over training seconds for the epochs after the first (warm-up). The
summary quotes the median and the spread (max/min - 1) of the repetitions.

    .venv/bin/python bench/bench_lm.py             # part of `make bench-trainer`
    .venv/bin/python bench/bench_lm.py --reps 5 --json out.json

On a machine with CUDA it then measures a GPT-2 of ~125M parameters (18 layers of width 768, 1,024 positions,
the same tokenizer) with bf16 autocast on every visible GPU, and reports its model-FLOPs utilisation: 6 x parameters
x tokens/s (forward and backward, attention left out) over the GPU's dense bf16 peak from its datasheet (`PEAK`).
Without CUDA it says the GPU figure was not measured. `bench/bench_gpu.py` (make bench-gpu) trains the same model
on one GPU with FSDP2 and DDP through the trainer; its figures are in bench/gpu-*.md.
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
# The GPU model: ~125M parameters (GPT-2 small's size) at 1,024 tokens a block.
GPU_MODEL = {"layers": 18, "width": 768, "heads": 12, "positions": 1024}
GPU_SEQ, GPU_BATCH = 1024, 8
# Dense bf16 tensor-core peak per GPU, FLOP/s, from NVIDIA's datasheets (without sparsity): the H100 SXM and H200
# 989.4 TFLOPS, the H100 PCIe 756, the A100 312, the L4 121, the T4 65 (fp16; it has no bf16).
PEAK = {"H100 PCIe": 756e12, "H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "L4": 121e12, "T4": 65e12}


def peak_flops(gpu_name: str) -> float | None:
    """The datasheet peak of a GPU named as torch.cuda.get_device_name() says (e.g. "NVIDIA H100 80GB HBM3")."""
    for key in sorted(PEAK, key=len, reverse=True):  # "H100 PCIe" before "H100"
        if key in gpu_name:
            return PEAK[key]
    return None


def mfu(params: int, tokens_per_s: float, gpus: int, peak: float) -> float:
    """Model-FLOPs utilisation: 6 FLOPs per parameter and token (forward 2, backward 4) against the GPUs' peak."""
    return 6 * params * tokens_per_s / (gpus * peak)


def gpu_bench(tmp: Path) -> dict | None:
    import torch

    if not torch.cuda.is_available():
        print("GPU (~125M parameters, bf16, model-FLOPs utilisation): not measured (no CUDA here)")
        return None
    gpus, name = torch.cuda.device_count(), torch.cuda.get_device_name(0)
    info = tiny_lm.build(tmp / "gpu", seed=0, name="gpt2-125m", **GPU_MODEL)
    out = bt.run_trainer(gpus, ["--task", "causal-lm", "--model-local-dir", info["model"], "--data-root",
                                info["data"], "--seq-len", str(GPU_SEQ), "--batch-size", str(GPU_BATCH),
                                "--epochs", str(EPOCHS), "--amp", "bf16", "--backend", "nccl",
                                "--log-interval", "1000000", "--save-epochs", "false", "--run-id", "gpu"],
                         tmp / "out-gpu", {}, timeout=1800)
    rate, tokens, seconds = tokens_per_s(out)
    peak = peak_flops(name)
    util = mfu(info["params"], rate, gpus, peak) if peak else None
    print(f"GPU: {gpus} x {name}, GPT-2 {info['params']:,} parameters, bf16, seq-len {GPU_SEQ}, {GPU_BATCH} blocks "
          f"per GPU and step: {rate:,.0f} tokens/s ({tokens:,.0f} tokens in {seconds:.1f} s); model-FLOPs "
          f"utilisation {f'{util:.1%}' if util is not None else 'unknown (no datasheet peak for this GPU in PEAK)'}")
    return {"gpus": gpus, "gpu": name, "params": info["params"], "tokens_per_s": rate, "mfu": util}


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
    gpu = None
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
        gpu = gpu_bench(Path(tmp))
    summary = {}
    for nproc, rates in results.items():
        summary[nproc] = {"median_tokens_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                          "spread": max(rates) / min(rates) - 1, "runs": rates}
        print(f"causal-lm {nproc}x1: median {summary[nproc]['median_tokens_per_s']:,.0f} tokens/s "
              f"(min {min(rates):,.0f}, max {max(rates):,.0f}, spread {summary[nproc]['spread']:.0%})")
    ratio = summary[2]["median_tokens_per_s"] / summary[1]["median_tokens_per_s"]
    print(f"causal-lm 2x1 / 1x1: {ratio:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"config": {"seq_len": SEQ, "batch": BATCH, "epochs": EPOCHS, **info},
                                         "results": summary, "ratio_2_over_1": ratio,
                                         "gpu": gpu}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
