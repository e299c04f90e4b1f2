#!/usr/bin/env python3
"""The trainer's CUDA path on one GPU (or N, --nproc-per-node), in one run of a few minutes (`make bench-gpu`): what
the CPU tests cannot reach (NCCL, bf16 autocast, fused AdamW, FSDP2 on a GPU, torch.compile on a GPU, checkpoints
written from and read back to GPU memory, the GPU memory metrics the dashboard queries, host syncs counted by CUDA),
each step run through the real trainer under torchrun.

    ddp        the DDP task on MNIST-shaped data: 60,000 random 28x28 images and labels written as IDX files (the
               task's own loader, the MNIST CNN), NCCL, bf16 autocast, channels-last, fused AdamW; seconds per
               epoch and samples/s (epochs after the first). While it trains, rank 0's Prometheus endpoint
               (METRICS_PORT) is scraped: which of the dashboard's metrics it serves, and its GPU memory.
    ddp-resume the same run folder with one epoch more: the trainer must resume from the checkpoint the first run
               wrote on the GPU (its `[DDP] resume` line) and train only the last epoch.
    kernel     the trainer's own step function in this process, data already in GPU memory: seconds per epoch
               without torchrun, the loader or the metrics (what the trainer's loop costs on top of it).
    lm-fsdp    the causal-lm task with --strategy fsdp (FSDP2 fully_shard): a GPT-2 of ~125M parameters (18
               layers of width 768, 1,024 positions; scripts/tiny_lm.py builds it with save_pretrained, random
               weights) on the repository's Markdown repeated to ~2M tokens, bf16; tokens/s (epochs after the
               first), model-FLOPs utilisation against the cards' dense bf16 datasheet peak, with FLOPs per token
               6N + 12 x layers x width x seq-len (PaLM, appendix B), and rank 0's peak GPU memory (scraped).
    lm-resume  the same run folder with one epoch more: a DCP checkpoint saved from GPU memory and loaded back.
    lm-compile (step `compile`) the lm-fsdp run with --compile: tokens/s and MFU against eager, and the first
               epoch's extra seconds (the compile).
    lm-syncs   (step `syncs`) one lm epoch under bench/sync_count.py: torch.cuda.set_sync_debug_mode("warn")
               counts rank 0's host syncs by the trainer's phase and line; those inside `step N` phases over the
               steps, and the lines that sync at every step.
    *-scaling  with --nproc-per-node N above 1, the ddp and lm steps run at world size N (the same batch per
               rank), and once more at world size 1: the scaling efficiency rate(N) / (N x rate(1)).

It prints one table and writes it, with every figure as JSON, to `<out>/gpu-<card>.md` and `.json` (default
out: bench/), after every step as well as at the end (a partial table says PARTIAL); `--deadline S` bounds all
the trainer runs together (a lent GPU's time per call). A step that fails is a FAILED row with its last error
line, the others still run, and the exit status is 1. Without CUDA it says so and exits 0 (CI has no GPU);
`--cpu-fallback` runs the same steps on the CPU at toy sizes (gloo, a 2-layer GPT-2; no GPU memory, MFU or sync
count there): tests/test_trainer_bench_gpu.py runs that with 2 processes, so the script cannot rot between the
sessions that have a GPU. The steps share bench/gpu_run.py; the causal-lm steps are bench/gpu_lm.py.

    .venv/bin/python bench/bench_gpu.py                        # what `make bench-gpu` runs
    .venv/bin/python bench/bench_gpu.py --nproc-per-node 8     # make bench-gpu NPROC=8: one machine, 8 GPUs
    .venv/bin/python bench/bench_gpu.py --cpu-fallback --out /tmp/b
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))

import torch  # noqa: E402

import bench_lm  # noqa: E402
import bench_trainer as bt  # noqa: E402
import gpu_run  # noqa: E402
from gpu_lm import lm_steps  # noqa: E402
from gpu_run import (Report, Row, Sizes, StepFailed, lines, median_after_first, resumed,  # noqa: E402,F401
                     run, scaling, torchrun_cmd)
from trainer.idx import encode_idx  # noqa: E402
from trainer.telemetry import GAUGES, PREFIX  # noqa: E402

# The anchor the issue names: hand-tuned MNIST reaches 99 % in about 0.76 s per epoch on one A100 (our data is
# random, so only the epoch time compares, not the accuracy).
ANCHOR_EPOCH_S = 0.76


GPU = Sizes("cuda", "nccl", 60_000, 10_000, 512, 4, bench_lm.GPU_MODEL, 1024, 8, 3, 24, 512, 20)
# The CPU fallback (its test): a quarter of the corpus an lm epoch, 40 steps instead of 159, which still shows the
# loss falling; every lm step is its own run, so this halves the test.
CPU = Sizes("cpu", "gloo", 1_024, 256, 128, 2, {"layers": 2, "width": 64, "heads": 4, "positions": 128}, 128, 8, 2,
            1, 128, 2, lm_share=0.25)


def write_mnist(root: Path, sizes: Sizes) -> Path:
    data = root / "data" / "mnist"
    data.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    for prefix, n in (("train", sizes.train_images), ("t10k", sizes.test_images)):
        (data / f"{prefix}-images-idx3-ubyte").write_bytes(
            encode_idx(torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g).numpy()))
        (data / f"{prefix}-labels-idx1-ubyte").write_bytes(
            encode_idx(torch.randint(0, 10, (n,), dtype=torch.uint8, generator=g).numpy()))
    return root / "data"


def ddp_steps(rep: Report, sizes: Sizes, tmp: Path, timeout: float) -> None:
    data_root = write_mnist(tmp, sizes)
    amp = ["--amp", "bf16", "--channels-last"] if sizes.device == "cuda" else []
    common = ["--task", "mnist", "--data-root", str(data_root), "--batch-size", str(sizes.ddp_batch),
              "--backend", sizes.backend, "--log-interval", str(sizes.log_interval), "--run-id", "ddp", *amp]
    port = bt.free_port()
    try:
        with bt.Scraper(port) as scraper:
            out, wall = run(torchrun_cmd([*common, "--epochs", str(sizes.ddp_epochs)], tmp / "out", sizes.nproc),
                            {"METRICS_PORT": str(port)}, timeout)
    except StepFailed as e:
        rep.fail("ddp", str(e))
        return
    epochs = lines(out, "EPOCH")
    secs = [float(e["train_s"]) for e in epochs]
    rates = [float(e["samples/s"]) for e in epochs]
    start = (lines(out, "DDP") or [{}])[0]
    rep.data["ddp"] = {"epochs_train_s": secs, "samples_per_s": rates, "run_wall_s": wall, "start": start,
                       "metrics": scraper.values, "scrapes": scraper.scrapes}
    if not secs:
        rep.fail("ddp", "no [EPOCH] line in the trainer's output")
        return
    med = median_after_first(secs)
    rep.add("ddp", "s/epoch (median after the 1st)", f"{med:.3f}",
            f"{sizes.train_images:,} images, batch {sizes.ddp_batch} per rank, world size {sizes.nproc}, "
            f"{start.get('backend', '?')}, amp "
            f"{start.get('amp', 'none')}; anchor {ANCHOR_EPOCH_S} s (hand-tuned MNIST to 99 %, one A100)")
    rep.add("ddp", "samples/s (median after the 1st)", f"{median_after_first(rates):,.0f}",
            f"epochs: {', '.join(f'{s:.3f}' for s in secs)} s; run {wall:.1f} s with start-up")
    # The DDP image task serves every gauge but the causal-LM task's own (its help says "causal-lm:").
    dashboard = sorted(PREFIX + g for g, (text, _) in GAUGES.items() if not text.startswith("causal-lm:"))
    served = [m for m in dashboard if m in scraper.values]
    missing = [m.removeprefix(PREFIX) for m in dashboard if m not in scraper.values]
    rep.add("metrics", "trainer metrics served", f"{len(served)}/{len(dashboard)}",
            f"{scraper.scrapes} scrapes while training; not served: {', '.join(missing) or 'none'}")
    for name in ("gpu_memory_allocated_bytes", "gpu_memory_peak_bytes"):
        v = scraper.values.get(PREFIX + name)
        rep.add("metrics", name, f"{v / 2**20:,.1f} MiB" if v is not None else "not served",
                "largest value scraped" if v is not None else
                ("expected: the CPU serves no GPU memory" if sizes.device == "cpu" else "the GPU path must serve it"))
        if v is None and sizes.device == "cuda":
            rep.failed.append(f"metrics:{name}")

    ddp_resume(rep, sizes, common, tmp, timeout)
    if sizes.nproc > 1:  # the baseline: the same per-rank batch at world size 1
        try:
            out1, _ = run(torchrun_cmd([*common, "--epochs", str(sizes.ddp_epochs)], tmp / "out-1"), {}, timeout)
        except StepFailed as e:
            rep.fail("ddp-scaling", f"world size 1: {e}")
            return
        rates1 = [float(e["samples/s"]) for e in lines(out1, "EPOCH")]
        if not rates1:
            rep.fail("ddp-scaling", "world size 1: no [EPOCH] line in the trainer's output")
            return
        scaling(rep, "ddp-scaling", "samples/s", median_after_first(rates1), median_after_first(rates), sizes.nproc)


def ddp_resume(rep: Report, sizes: Sizes, common: list[str], tmp: Path, timeout: float) -> None:
    """One epoch more in the same run folder, from the checkpoint written from GPU memory."""
    try:
        out, wall = run(torchrun_cmd([*common, "--epochs", str(sizes.ddp_epochs + 1)], tmp / "out", sizes.nproc),
                        {}, timeout)
    except StepFailed as e:
        rep.fail("ddp-resume", str(e))
        return
    resumed(rep, "ddp-resume", "resumed, trained epoch", out, wall, sizes.ddp_epochs + 1)


def kernel_step(rep: Report, sizes: Sizes) -> None:
    device = torch.device(sizes.device, 0) if sizes.device == "cuda" else torch.device("cpu")
    try:
        bt.engine.configure_device(device)
        amp = "bf16" if sizes.device == "cuda" else "none"
        times = bt.time_mnist_epochs(device, n=sizes.train_images, batch_size=sizes.kernel_batch, amp=amp,
                                     channels_last=sizes.device == "cuda", epochs=3)
    except Exception as e:  # noqa: BLE001 - the row says what failed; the other steps run
        rep.fail("kernel", f"{type(e).__name__}: {e}")
        return
    rep.data["kernel"] = {"epoch_s": times, "batch": sizes.kernel_batch}
    rep.add("kernel", "s/epoch (median of 3 after a warm-up)", f"{statistics.median(times):.3f}",
            f"the trainer's train_step in this process, data in {sizes.device} memory, batch {sizes.kernel_batch}")


def card_slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def render(rep: Report, header: list[str]) -> str:
    w = [max(len(getattr(r, f)) for r in rep.rows + [Row("step", "figure", "value")]) for f in ("step", "figure", "value")]
    out = [*header, "", f"| {'step':<{w[0]}} | {'figure':<{w[1]}} | {'value':>{w[2]}} | note |",
           f"|{'-' * (w[0] + 2)}|{'-' * (w[1] + 2)}|{'-' * (w[2] + 1)}:|------|"]
    out += [f"| {r.step:<{w[0]}} | {r.figure:<{w[1]}} | {r.value:>{w[2]}} | {r.note} |" for r in rep.rows]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu-fallback", action="store_true", help="run every step on the CPU at toy sizes (the test)")
    p.add_argument("--out", type=Path, default=ROOT / "bench", help="folder for gpu-<card>.md and .json")
    p.add_argument("--steps", default="ddp,kernel,lm,compile,syncs",
                   help="which of ddp (and ddp-resume), kernel, lm (and lm-resume), compile (lm with --compile), "
                        "syncs (lm's host syncs counted) to run")
    p.add_argument("--nproc-per-node", type=int, default=1, metavar="N",
                   help="processes (GPUs) of each torchrun run; above 1 the ddp and lm steps also run at world size 1 "
                        "and report the scaling efficiency")
    p.add_argument("--timeout", type=float, default=240, help="seconds each trainer run may take")
    p.add_argument("--deadline", type=float, default=None, metavar="S",
                   help="seconds all the trainer runs may take together (a lent GPU's time per call): a run is cut "
                        "to what is left, and one not started for want of time is a FAILED row; the table is "
                        "written after each step, so what was measured survives")
    p.add_argument("--lm", default="", help="override the LM step's sizes, e.g. strategy=ddp,batch=16,repeat=8,epochs=2")
    args = p.parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda and not args.cpu_fallback:
        print("bench-gpu: no CUDA device here (torch.cuda.is_available() is False): nothing measured. "
              "--cpu-fallback runs the same steps on the CPU at toy sizes.")
        return 0
    sizes = replace(CPU if args.cpu_fallback else GPU, nproc=args.nproc_per_node)
    if args.nproc_per_node < 1:
        p.error(f"--nproc-per-node {args.nproc_per_node}: at least 1")
    if cuda and not args.cpu_fallback and args.nproc_per_node > torch.cuda.device_count():
        p.error(f"--nproc-per-node {args.nproc_per_node}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    for item in filter(None, args.lm.split(",")):
        key, _, value = item.partition("=")
        if key not in ("strategy", "batch", "repeat", "epochs", "seq", "resume"):
            p.error(f"--lm {item!r}: the key is one of strategy, batch, repeat, epochs, seq, resume")
        sizes = replace(sizes, **{f"lm_{key}": value if key == "strategy" else int(value)})
    name = torch.cuda.get_device_name(0) if sizes.device == "cuda" else f"cpu ({platform.processor() or 'x86_64'})"
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = [f"# Trainer on {name}" if sizes.device == "cuda" else "# Trainer bench-gpu steps on the CPU (fallback)",
              "",
              f"{when}; torch {torch.__version__}"
              + (f", CUDA {torch.version.cuda}, {torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB"
                 if sizes.device == "cuda" else "")
              + f", python {platform.python_version()}, {os.cpu_count()} CPUs; `bench/bench_gpu.py"
              + (" --cpu-fallback" if args.cpu_fallback else "") + "` (make bench-gpu)."]
    print("\n".join(header), flush=True)
    gpu_run.deadline = time.monotonic() + args.deadline if args.deadline is not None else None
    gpu_run.threads = 1 if sizes.device == "cpu" else None
    rep = Report()
    rep.data["device"] = name
    stem = "gpu-" + card_slug(name) if sizes.device == "cuda" else "cpu-fallback"

    def save(final: bool) -> str:
        """The table and JSON as they stand: after each step (a run cut short keeps the steps before it), and at
        the end."""
        wall = round(time.perf_counter() - t0, 1)
        rep.data["wall_s"] = wall
        failed = f"; FAILED: {', '.join(rep.failed)}" if rep.failed else "."
        table = render(rep, [*header, f"Wall time {wall} s{failed}" if final else
                             f"PARTIAL: {wall} s so far, the steps after the last row not run yet{failed}"])
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{stem}.md").write_text(table)
        (args.out / f"{stem}.json").write_text(json.dumps(
            {"device": name, "when": when, "torch": torch.__version__, "rows": [r.__dict__ for r in rep.rows],
             "failed": rep.failed, "data": rep.data, "final": final}, indent=2, default=str) + "\n")
        return table

    steps = set(args.steps.split(","))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        for step, what, fn in (("ddp", "MNIST-shaped epochs through torchrun, then a resume",
                                lambda: ddp_steps(rep, sizes, Path(tmp) / "ddp", args.timeout)),
                               ("kernel", "the step function in process", lambda: kernel_step(rep, sizes)),
                               ("lm", "causal-lm with FSDP2, then a resume (and --compile, the host syncs)",
                                lambda: lm_steps(rep, sizes, Path(tmp) / "lm", args.timeout, steps))):
            if step in steps:
                print(f"{step}: {what} ...", flush=True)
                t = time.perf_counter()
                fn()
                rep.data.setdefault("step_wall_s", {})[step] = round(time.perf_counter() - t, 1)
                print(f"{step}: {rep.data['step_wall_s'][step]} s", flush=True)
                save(final=False)
    table = save(final=True)
    print("\n" + table, flush=True)
    print(f"written: {args.out / (stem + '.md')} and .json")
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
