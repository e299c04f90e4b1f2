#!/usr/bin/env python3
"""Trainer throughput: samples/s of 1 and 2 CPU processes under real torchrun and their scaling ratio; with
CUDA, the training time of one MNIST-shaped epoch (60,000 random 28x28 images, the MNIST CNN) on that GPU.

    .venv/bin/python bench/bench_trainer.py                 # what `make bench-trainer` runs
    .venv/bin/python bench/bench_trainer.py --reps 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from trainer import engine  # noqa: E402
from trainer.idx import encode_idx  # noqa: E402
from trainer.tasks.models import MnistCNN  # noqa: E402

EPOCH_RE = re.compile(r"^\[EPOCH\] .*?samples/s=(\d+)")
TRAIN_S_RE = re.compile(r"^\[EPOCH\] .*?train_s=([\d.]+)")
GPU_TARGET_S = 1.0  # issue 3: an MNIST-shaped epoch on one H100 in under a second


def torchrun() -> str:
    here = Path(sys.executable).parent / "torchrun"
    return str(here) if here.exists() else shutil.which("torchrun") or "torchrun"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def epoch_rates(output: str, skip_first: bool = True) -> list[float]:
    """Global samples/s of each [EPOCH] line; the first epoch (warm-up) is left out when there are more."""
    rates = [float(m.group(1)) for line in output.splitlines() if (m := EPOCH_RE.match(line))]
    return rates[1:] if skip_first and len(rates) > 1 else rates


def run_trainer(nproc: int, trainer_args: list[str], out_dir: Path, env_extra: dict[str, str],
                timeout: float = 300) -> str:
    cmd = [torchrun(), "--nnodes", "1", "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
           "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(ROOT / "trainer" / "train.py"),
           *trainer_args, "--out-dir", str(out_dir)]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update({"PYTHONUNBUFFERED": "1", **env_extra})
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"trainer failed ({' '.join(cmd)}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def cpu_scaling(args: argparse.Namespace) -> dict:
    """Median global samples/s for 1 and 2 processes, one thread each, same per-rank batch (weak scaling).

    Each step all-reduces the MLP's ~100k gradients whatever the batch, so the ratio shows how much compute
    per step it takes to hide that communication: it is measured for each per-rank batch size given.
    """
    result: dict = {"data": f"synthetic task: {args.samples} samples x 128 features, 4 classes, seed 42 "
                            f"(generated in memory by trainer/tasks/synthetic.py)",
                    "epochs": args.epochs, "threads_per_process": 1, "batches": {}}
    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as tmp:
        for bs in args.batch_sizes:
            trainer_args = ["--task", "synthetic", "--samples", str(args.samples), "--features", "128",
                            "--classes", "4", "--epochs", str(args.epochs), "--batch-size", str(bs),
                            "--log-interval", "1000000", "--backend", "gloo", "--seed", "42"]
            runs: dict[str, list[float]] = {"1": [], "2": []}
            for rep in range(args.reps):
                for nproc in (1, 2):  # interleaved, so drifting machine load hits both alike
                    out = run_trainer(nproc, trainer_args + ["--run-id", f"b{bs}-p{nproc}-r{rep}"], Path(tmp),
                                      {"OMP_NUM_THREADS": "1"})
                    rates = epoch_rates(out)
                    runs[str(nproc)].append(statistics.median(rates))
                    print(f"  cpu batch={bs} nproc={nproc} rep={rep + 1}/{args.reps}: "
                          f"{statistics.median(rates):,.0f} samples/s (epochs after the first: "
                          f"{', '.join(f'{r:,.0f}' for r in rates)})", flush=True)
            med = {n: statistics.median(v) for n, v in runs.items()}
            result["batches"][str(bs)] = {"runs": runs, "median_samples_per_s": med,
                                          "scaling_2_over_1": med["2"] / med["1"]}
    return result


def _mnist_shaped(n: int, device: torch.device, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 1, 28, 28), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    x = images.float().div_(255.0)
    x = (x - x.mean()) / x.std()
    return x.to(device), labels.to(device)


def time_mnist_epochs(device: torch.device, n: int = 60_000, batch_size: int = 256, amp: str = "none",
                      channels_last: bool = False, epochs: int = 3) -> list[float]:
    """Seconds of training per epoch (after one warm-up epoch), with the trainer's own step function."""
    x, y = _mnist_shaped(n, device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    torch.manual_seed(0)
    model = engine.prepare_model(MnistCNN(), device, channels_last)
    opt = engine.make_optimizer(model, 1e-3, device)
    amp_dtype = engine.AMP_DTYPES[amp]
    times = []
    for epoch in range(epochs + 1):  # epoch 0 warms up kernels, cuDNN autotuning and the allocator
        order = torch.randperm(n, generator=torch.Generator().manual_seed(epoch)).to(device)
        loss_sum = torch.zeros((), device=device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _, sl in engine.batch_slices(n, batch_size):
            idx = order[sl]
            loss_sum += engine.train_step(model, opt, x[idx], y[idx], amp_dtype, channels_last) * idx.numel()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - t0
        if not torch.isfinite(loss_sum).item():
            raise RuntimeError("loss is not finite")
        if epoch > 0:
            times.append(elapsed)
    return times


def gpu_trainer_epoch(args: argparse.Namespace) -> dict:
    """The real trainer on one GPU (torchrun, DDP, NCCL) reading MNIST-shaped random IDX files."""
    with tempfile.TemporaryDirectory(prefix="bench-trainer-gpu-") as tmp:
        data = Path(tmp) / "data" / "mnist"
        data.mkdir(parents=True)
        g = torch.Generator().manual_seed(0)
        for prefix, n in (("train", 60_000), ("t10k", 10_000)):
            (data / f"{prefix}-images-idx3-ubyte").write_bytes(
                encode_idx(torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g).numpy()))
            (data / f"{prefix}-labels-idx1-ubyte").write_bytes(
                encode_idx(torch.randint(0, 10, (n,), dtype=torch.uint8, generator=g).numpy()))
        out = run_trainer(1, ["--task", "mnist", "--data-root", str(Path(tmp) / "data"), "--epochs", "3",
                              "--batch-size", str(args.gpu_batch_sizes[0]), "--amp", "bf16", "--channels-last",
                              "--log-interval", "100"], Path(tmp) / "out", {})
    secs = [float(m.group(1)) for line in out.splitlines() if (m := TRAIN_S_RE.match(line))]
    return {"epochs_train_s": secs, "median_after_first_s": statistics.median(secs[1:])}


def gpu_epochs(args: argparse.Namespace) -> dict:
    device = torch.device("cuda", 0)
    engine.configure_device(device)  # the trainer's own CUDA settings
    rows = []
    configs = [("none", False), ("bf16", False), ("bf16", True)]
    for bs in args.gpu_batch_sizes:
        for amp, cl in configs:
            times = time_mnist_epochs(device, batch_size=bs, amp=amp, channels_last=cl, epochs=args.gpu_epochs)
            rows.append({"batch_size": bs, "amp": amp, "channels_last": cl, "epoch_s": times,
                         "median_s": statistics.median(times)})
            print(f"  gpu bs={bs} amp={amp} channels_last={cl}: median {statistics.median(times):.3f} s/epoch", flush=True)
    return {"device": torch.cuda.get_device_name(device), "data": "60,000 random uint8 28x28 images and random "
            "labels, in GPU memory (MNIST-shaped, not MNIST)", "rows": rows}


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3, help="repetitions of each CPU configuration (median is quoted)")
    p.add_argument("--samples", type=int, default=65536, help="synthetic samples per epoch (CPU part)")
    p.add_argument("--batch-sizes", type=_int_list, default=[256, 2048], help="per-rank batches (CPU part)")
    p.add_argument("--epochs", type=int, default=3, help="epochs per CPU run; the first is warm-up")
    p.add_argument("--gpu-batch-sizes", type=_int_list, default=[256, 1024])
    p.add_argument("--gpu-epochs", type=int, default=3, help="timed epochs per GPU configuration, after 1 warm-up")
    p.add_argument("--skip-cpu", action="store_true")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)

    print(f"bench_trainer: torch {torch.__version__}, python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"CUDA {'available: ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'not available'}",
          flush=True)
    results: dict = {"torch": torch.__version__, "cpus": os.cpu_count()}
    t0 = time.perf_counter()
    if not args.skip_cpu:
        print(f"CPU: real torchrun (c10d, gloo), {args.reps} reps x 1 and 2 processes ...", flush=True)
        results["cpu"] = cpu_scaling(args)
    if torch.cuda.is_available():
        print("GPU: MNIST-shaped epochs ...", flush=True)
        results["gpu"] = gpu_epochs(args)
        results["gpu"]["trainer"] = gpu_trainer_epoch(args)
    results["wall_s"] = round(time.perf_counter() - t0, 1)

    print("\n== trainer benchmark ==")
    if "cpu" in results:
        c = results["cpu"]
        print(f"data: {c['data']}")
        print(f"{'batch/rank':>10} {'processes':>10} {'samples/s (median)':>19} {'scaling 2/1':>12}   runs")
        for bs, b in c["batches"].items():
            for n in ("1", "2"):
                scaling = f"{b['scaling_2_over_1']:.2f}x" if n == "2" else ""
                runs = ", ".join(f"{r:,.0f}" for r in b["runs"][n])
                print(f"{bs:>10} {n:>10} {b['median_samples_per_s'][n]:>19,.0f} {scaling:>12}   {runs}")
        print(f"(ideal scaling 2.00x; {c['threads_per_process']} thread per process, {os.cpu_count()} CPUs, "
              f"median of {args.reps} runs, each the median of its epochs after the first)")
    if "gpu" in results:
        gp = results["gpu"]
        print(f"GPU {gp['device']}: data: {gp['data']}; target < {GPU_TARGET_S:.1f} s per epoch")
        print(f"{'batch':>6} {'amp':>5} {'channels_last':>14} {'s/epoch (median)':>17} {'target':>7}")
        for r in gp["rows"]:
            ok = "met" if r["median_s"] < GPU_TARGET_S else "missed"
            print(f"{r['batch_size']:>6} {r['amp']:>5} {str(r['channels_last']):>14} {r['median_s']:>17.3f} {ok:>7}")
        t = gp["trainer"]
        print(f"trainer via torchrun (1 GPU, DDP, bf16, channels_last, batch {args.gpu_batch_sizes[0]}): "
              f"{t['median_after_first_s']:.3f} s/epoch median after warm-up ({', '.join(f'{s:.3f}' for s in t['epochs_train_s'])})")
    else:
        print("GPU: not measured (torch.cuda.is_available() is False on this machine)")
    print(f"wall time: {results['wall_s']} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
