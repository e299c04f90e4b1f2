#!/usr/bin/env python3
"""Trainer throughput on the CPU, measured so that the figures mean something, and with CUDA the training
time of one MNIST-shaped epoch (60,000 random 28x28 images, the MNIST CNN) on that GPU.

CPU part: the synthetic task's MLP, the same per-rank batch everywhere, in these configurations, interleaved
(each repetition runs all of them, in a rotated order) so that drifting machine load hits all alike:

    loop 1x2     a plain loop slicing the same in-memory tensors as the trainer (same model, batch, optimiser), no
                 process group, metrics or checkpoints, 1 process x 2 threads: the anchor
    trainer 1x1  the trainer under torchrun (c10d, gloo), 1 process x 1 thread
    trainer 1x2  1 process x 2 threads            } the same 2 cores: which way of using them trains faster
    trainer 2x1  2 processes x 1 thread each      }

Each measurement trains for several seconds (epochs after the first, which warms up); its figure is samples
over training seconds. Beside the wall-clock rate: the CPU seconds all its processes spent (the trainer's
`cpu_s`, summed over ranks, and the loop's own process time) per training second ("cores busy") and per
sample, and for the whole run (start-up included) wall and CPU seconds from getrusage(RUSAGE_CHILDREN).
The summary quotes the median of the repetitions and their spread (min-max, and max/min - 1).

    .venv/bin/python bench/bench_trainer.py                 # what `make bench-trainer` runs (about 3 minutes)
    .venv/bin/python bench/bench_trainer.py --reps 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
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

TRAIN_S_RE = re.compile(r"^\[EPOCH\] .*?train_s=([\d.]+)")
FIELD_RE = re.compile(r"(\w+(?:/s)?)=(\S+)")
# One sample of a scraped series: `trainer_<name>{<labels>} <value>`.
METRIC_RE = re.compile(r"^(trainer_\w+)\{[^}]*\}\s+(\S+)$")
GPU_TARGET_S = 1.0  # issue 3: an MNIST-shaped epoch on one H100 in under a second
FEATURES, CLASSES, SEED = 128, 4, 42

# name -> (kind, processes, threads per process)
CONFIGS = {
    "loop 1x2": ("loop", 1, 2),
    "trainer 1x1": ("trainer", 1, 1),
    "trainer 1x2": ("trainer", 1, 2),
    "trainer 2x1": ("trainer", 2, 1),
    "trainer 2x1 +metrics": ("trainer", 2, 1),  # with METRICS_PORT, both ranks' endpoints scraped while it trains
}
RATIOS = [  # (label, numerator, denominator)
    ("trainer 2x1 / trainer 1x2 (same 2 cores: processes or threads)", "trainer 2x1", "trainer 1x2"),
    ("trainer 2x1 / trainer 1x1 (a second process on a second core)", "trainer 2x1", "trainer 1x1"),
    ("trainer 1x2 / trainer 1x1 (a second thread on a second core)", "trainer 1x2", "trainer 1x1"),
    ("trainer 1x2 / loop 1x2 (the trainer against a plain loop)", "trainer 1x2", "loop 1x2"),
    ("trainer 2x1 +metrics / trainer 2x1 (the metrics endpoint, end to end)", "trainer 2x1 +metrics", "trainer 2x1"),
]
METRICS_TARGET = 0.01  # issue 13: the metrics cost less than 1 % of step time


def torchrun() -> str:
    here = Path(sys.executable).parent / "torchrun"
    return str(here) if here.exists() else shutil.which("torchrun") or "torchrun"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def epoch_figures(output: str, skip_first: bool = True) -> list[dict[str, float]]:
    """samples (rate x time), train_s and cpu_s of each [EPOCH] line; the first epoch (warm-up) is left out
    when there are more."""
    rows = []
    for line in output.splitlines():
        if line.startswith("[EPOCH] "):
            f = dict(FIELD_RE.findall(line))
            train_s = float(f["train_s"])
            rows.append({"samples": float(f["samples/s"]) * train_s, "train_s": train_s,
                         "cpu_s": float(f.get("cpu_s", "nan"))})
    return rows[1:] if skip_first and len(rows) > 1 else rows


def summarise(rows: list[dict[str, float]]) -> dict[str, float]:
    samples = sum(r["samples"] for r in rows)
    train_s = sum(r["train_s"] for r in rows)
    cpu_s = sum(r["cpu_s"] for r in rows)
    return {"samples_per_s": samples / train_s, "train_s": train_s, "cpu_s": cpu_s,
            "cores_busy": cpu_s / train_s, "cpu_us_per_sample": 1e6 * cpu_s / samples}


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_measured(cmd: list[str], env: dict[str, str], timeout: float = 300) -> tuple[str, float, float]:
    """(stdout, wall s, CPU s of the process and all its descendants) of one command."""
    cpu0, t0 = _child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    if proc.returncode != 0:
        sys.exit(f"failed ({' '.join(cmd)}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout, wall, cpu


def _env(threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": str(threads)})
    return env


def run_trainer(nproc: int, trainer_args: list[str], out_dir: Path, env_extra: dict[str, str],
                timeout: float = 300) -> str:
    cmd = [torchrun(), "--nnodes", "1", "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
           "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(ROOT / "trainer" / "train.py"),
           *trainer_args, "--out-dir", str(out_dir)]
    env = _env(1)
    env.pop("OMP_NUM_THREADS")
    env.update(env_extra)
    return run_measured(cmd, env, timeout)[0]


def measure(name: str, args: argparse.Namespace, batch: int, out_dir: Path, tag: str) -> dict:
    kind, nproc, threads = CONFIGS[name]
    common = ["--samples", str(args.samples), "--epochs", str(args.epochs), "--batch-size", str(batch)]
    if kind == "trainer":
        cmd = [torchrun(), "--nnodes", "1", "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
               "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(ROOT / "trainer" / "train.py"),
               "--task", "synthetic", "--features", str(FEATURES), "--classes", str(CLASSES), "--seed", str(SEED),
               "--log-interval", "1000000", "--backend", "gloo", "--out-dir", str(out_dir), "--run-id", tag, *common]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--loop-worker", *common]
    env = _env(threads)
    if not name.endswith("+metrics"):
        out, wall, cpu = run_measured(cmd, env)
        fig = summarise(epoch_figures(out))
        fig.update(run_wall_s=wall, run_cpu_s=cpu)
        return fig
    port = free_port()
    env["METRICS_PORT"] = str(port)  # rank 1 takes the next port; a taken one is one warning line
    with Scraper(port, nproc) as scraper:  # scraped while it trains: the endpoint's cost end to end
        out, wall, cpu = run_measured(cmd, env)
    fig = summarise(epoch_figures(out))
    fig.update(run_wall_s=wall, run_cpu_s=cpu, scrapes=scraper.scrapes, series=sorted(scraper.series))
    return fig


def loop_worker(args: argparse.Namespace) -> int:
    """The anchor: a plain loop over the same in-memory tensors, sliced by a shuffled index as the trainer slices them
    (no DataLoader, no process group, no metrics, no checkpoints), the same MLP and AdamW, one process, printing
    [EPOCH] lines the way the trainer does."""
    from trainer.tasks.models import MLP
    from trainer.tasks.synthetic import make

    torch.manual_seed(SEED)
    data = make(args.samples, FEATURES, CLASSES, SEED)
    model = MLP(FEATURES, CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    n, bs = data.train_x.shape[0], args.batch_sizes[0]
    for epoch in range(args.epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        order = torch.randperm(n, generator=torch.Generator().manual_seed(SEED + epoch))
        for i in range(0, n, bs):
            idx = order[i:i + bs]
            x, y = data.train_x[idx], data.train_y[idx]
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        train_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
        print(f"[EPOCH] epoch={epoch + 1}/{args.epochs} loss={loss.item():.4f} samples/s={n / train_s:.0f} "
              f"train_s={train_s:.4f} cpu_s={cpu_s:.4f}", flush=True)
    return 0


class Scraper:
    """Scrapes the trainer's endpoints (METRICS_PORT + local rank, for `ranks` ranks) every `interval` seconds while a
    run trains, as Prometheus would (its default is every 15 to 60 s: this is harder on the trainer). Keeps the
    trainer_* series served, and of each its largest value (GPU memory, step and epoch grow) and its value at the last
    scrape."""

    def __init__(self, port: int, ranks: int = 1, interval: float = 0.5):
        import threading

        self.urls = [f"http://127.0.0.1:{port + r}/metrics" for r in range(ranks)]
        self.interval, self.scrapes, self.series = interval, 0, set()
        self.values: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import urllib.request

        while not self.done.wait(self.interval):
            for url in self.urls:
                try:
                    with urllib.request.urlopen(url, timeout=2) as r:
                        text = r.read().decode()
                except OSError:
                    continue  # not serving yet, or already gone
                self.scrapes += 1
                self.series |= set(re.findall(r"^(trainer_\w+)\{", text, re.M))
                for m in filter(None, map(METRIC_RE.match, text.splitlines())):
                    name, value = m.group(1), float(m.group(2))
                    self.values[name] = max(value, self.values.get(name, float("-inf")))
                    self.last[name] = value

    def __enter__(self) -> "Scraper":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join(timeout=5)


def cpu_comparison(args: argparse.Namespace) -> dict:
    names = list(CONFIGS)
    result: dict = {"data": f"synthetic task: {args.samples} samples x {FEATURES} features, {CLASSES} classes, "
                            f"seed {SEED} (generated in memory by trainer/tasks/synthetic.py)",
                    "epochs": args.epochs, "configs": {n: {"kind": CONFIGS[n][0], "processes": CONFIGS[n][1],
                                                          "threads": CONFIGS[n][2]} for n in names},
                    "batches": {}}
    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as tmp:
        for bs in args.batch_sizes:
            runs: dict[str, list[dict]] = {n: [] for n in names}
            for rep in range(args.reps):
                order = names[rep % len(names):] + names[:rep % len(names)]  # rotated: no fixed position
                for name in order:
                    tag = f"b{bs}-{name.replace(' ', '-').replace('+', '')}-r{rep}"  # a plain --run-id
                    fig = measure(name, args, bs, Path(tmp), tag)
                    runs[name].append(fig)
                    print(f"  batch={bs} {name} rep={rep + 1}/{args.reps}: {fig['samples_per_s']:,.0f} samples/s "
                          f"over {fig['train_s']:.1f} s, {fig['cores_busy']:.2f} cores busy; run "
                          f"{fig['run_wall_s']:.1f} s wall, {fig['run_cpu_s']:.1f} s CPU"
                          + (f"; {fig['scrapes']} scrapes of {len(fig['series'])} series" if "scrapes" in fig else ""),
                          flush=True)
            rows = {}
            for name, figs in runs.items():
                rates = [f["samples_per_s"] for f in figs]
                med = statistics.median(rates)
                rows[name] = {"runs": figs, "median_samples_per_s": med, "min": min(rates), "max": max(rates),
                              "spread": max(rates) / min(rates) - 1,
                              "median_cores_busy": statistics.median(f["cores_busy"] for f in figs),
                              "median_cpu_us_per_sample": statistics.median(f["cpu_us_per_sample"] for f in figs),
                              "median_train_s": statistics.median(f["train_s"] for f in figs),
                              "median_run_wall_s": statistics.median(f["run_wall_s"] for f in figs),
                              "median_run_cpu_s": statistics.median(f["run_cpu_s"] for f in figs)}
                if "scrapes" in figs[0]:
                    rows[name]["scrapes"] = sum(f["scrapes"] for f in figs)
            ratios = {label: rows[a]["median_samples_per_s"] / rows[b]["median_samples_per_s"]
                      for label, a, b in RATIOS}
            result["batches"][str(bs)] = {"rows": rows, "ratios": ratios}
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


def metrics_overhead(step_s: float, batch: int, log_interval: int = 50, n: int = 20000) -> dict:
    """What the metrics add to one training step, timed in this process with a live endpoint: the batch-fetch
    timing (every step), the pace update (each stop vote; counted here as if every step voted, an upper bound),
    and the per-rank figures, the log-interval update and the metrics.jsonl line (each log interval)."""
    from trainer.metrics import RunLog
    from trainer.telemetry import Telemetry, rank_slots

    cpu = torch.device("cpu")
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        tel = Telemetry("bench", "synthetic", 0, 0, 2, 0, cpu, {"METRICS_PORT": str(free_port())})
        log = RunLog(True, Path(tmp))
        log.line = lambda *a, **k: None  # the [TRAIN] line is printed with or without metrics
        acc = 0.0
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            t = time.perf_counter() - t
            acc += t
            acc += t
        per_step = (time.perf_counter() - t0) / n
        t0 = time.perf_counter()
        for i in range(n):
            tel.pace(i, 1, 0.01, 0.001)
        per_vote = (time.perf_counter() - t0) / n
        m = max(200, n // 50)
        t0 = time.perf_counter()
        for i in range(m):
            slots = rank_slots(2, 0, [0.01, 0.001], cpu)
            tel.interval(i, 1, 3, i, 100, 0.5, 1000.0)
            log.event("ranks", epoch=1, step=i, step_s=slots[:2].tolist(), data_s=slots[2:].tolist())
        per_interval = (time.perf_counter() - t0) / m
        tel.close()
    cost = per_step + per_vote + per_interval / log_interval
    return {"step_s": step_s, "batch": batch, "log_interval": log_interval, "fetch_timing_us": per_step * 1e6,
            "pace_us": per_vote * 1e6, "interval_us": per_interval * 1e6, "cost_per_step_us": cost * 1e6,
            "fraction": cost / step_s}


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def print_cpu(c: dict, reps: int) -> None:
    print(f"data: {c['data']}; {c['epochs']} epochs per run, the first one warm-up")
    for bs, b in c["batches"].items():
        print(f"batch {bs} per process; median of {reps} interleaved runs; spread = max/min - 1")
        print(f"{'config':<12} {'procs x threads':>15} {'samples/s':>10} {'min-max':>17} {'spread':>7} "
              f"{'train s':>8} {'cores busy':>10} {'CPU us/sample':>13} {'run wall s':>10} {'run CPU s':>9}")
        for name, r in b["rows"].items():
            cfg = c["configs"][name]
            print(f"{name:<12} {str(cfg['processes']) + ' x ' + str(cfg['threads']):>15} "
                  f"{r['median_samples_per_s']:>10,.0f} {r['min']:>8,.0f}-{r['max']:<8,.0f} {r['spread']:>6.1%} "
                  f"{r['median_train_s']:>8.1f} {r['median_cores_busy']:>10.2f} {r['median_cpu_us_per_sample']:>13.1f} "
                  f"{r['median_run_wall_s']:>10.1f} {r['median_run_cpu_s']:>9.1f}")
        for label, v in b["ratios"].items():
            print(f"  {v:.2f}x  {label}")
        scraped = {name: r["scrapes"] for name, r in b["rows"].items() if "scrapes" in r}
        for name, n in scraped.items():
            print(f"  {name}: its endpoints were scraped {n} times while it ran (every 0.5 s)")
    print("(samples/s: training time only, epochs after the first; cores busy: CPU seconds of all the run's "
          "processes per training second; run wall/CPU s: the whole run, start-up included, from getrusage)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=5, help="repetitions of each CPU configuration (median is quoted)")
    p.add_argument("--samples", type=int, default=262144, help="synthetic samples per epoch (CPU part)")
    p.add_argument("--batch-sizes", type=_int_list, default=[512], help="per-process batches (CPU part)")
    p.add_argument("--epochs", type=int, default=3, help="epochs per CPU run; the first is warm-up")
    p.add_argument("--gpu-batch-sizes", type=_int_list, default=[256, 1024])
    p.add_argument("--gpu-epochs", type=int, default=3, help="timed epochs per GPU configuration, after 1 warm-up")
    p.add_argument("--skip-cpu", action="store_true")
    p.add_argument("--loop-worker", action="store_true", help=argparse.SUPPRESS)  # one run of the anchor loop
    p.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    if args.loop_worker:
        args.batch_sizes = [args.batch_size or args.batch_sizes[0]]
        return loop_worker(args)

    print(f"bench_trainer: torch {torch.__version__}, python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}, CUDA "
          f"{'available: ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'not available'}",
          flush=True)
    results: dict = {"torch": torch.__version__, "cpus": os.cpu_count(), "load_average_start": os.getloadavg()[0]}
    t0 = time.perf_counter()
    if not args.skip_cpu:
        print(f"CPU: {', '.join(CONFIGS)}; {args.reps} interleaved reps ...", flush=True)
        results["cpu"] = cpu_comparison(args)
    if torch.cuda.is_available():
        print("GPU: MNIST-shaped epochs ...", flush=True)
        results["gpu"] = gpu_epochs(args)
        results["gpu"]["trainer"] = gpu_trainer_epoch(args)
    if "cpu" in results:  # the trainer's own step time, 1 process x 1 thread
        bs = args.batch_sizes[0]
        rate = results["cpu"]["batches"][str(bs)]["rows"]["trainer 1x1"]["median_samples_per_s"]
        results["metrics"] = metrics_overhead(bs / rate, bs)
    results["wall_s"] = round(time.perf_counter() - t0, 1)
    results["load_average_end"] = os.getloadavg()[0]

    print("\n== trainer benchmark ==")
    if "cpu" in results:
        print_cpu(results["cpu"], args.reps)
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
    if "metrics" in results:
        m = results["metrics"]
        verdict = "met" if m["fraction"] < METRICS_TARGET else "MISSED"
        print(f"metrics cost per step (in process, live endpoint): {m['cost_per_step_us']:.1f} us = "
              f"{m['fraction']:.3%} of the trainer 1x1 step ({m['step_s'] * 1e3:.1f} ms at batch {m['batch']}); "
              f"target < {METRICS_TARGET:.0%}: {verdict} (batch-fetch timing {m['fetch_timing_us']:.2f} us/step, "
              f"pace update {m['pace_us']:.2f} us/vote, per-rank figures + log update {m['interval_us']:.0f} us "
              f"per {m['log_interval']}-step interval)")
    print(f"wall time: {results['wall_s']} s; load average {results['load_average_start']:.2f} at the start, "
          f"{results['load_average_end']:.2f} at the end")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
