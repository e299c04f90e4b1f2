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
out: bench/), after every step as well as at the end (a partial table says PARTIAL); `--deadline S` bounds all the
trainer runs together (a lent GPU's time per call). A step that fails is a FAILED row with its last error line, the others still run, and the exit
status is 1. Without CUDA it says so and exits 0 (CI has no GPU); `--cpu-fallback` runs the same steps on the
CPU at toy sizes (gloo, a 2-layer GPT-2; no GPU memory, MFU or sync count there): tests/test_trainer_bench_gpu.py
runs that with 2 processes, so the script cannot rot between the sessions that have a GPU.

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
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Collection

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))

import torch  # noqa: E402

import bench_lm  # noqa: E402
import bench_trainer as bt  # noqa: E402
import tiny_lm  # noqa: E402
from sync_count import SYNC_WARNING  # noqa: E402
from trainer.idx import encode_idx  # noqa: E402
from trainer.telemetry import GAUGES, PREFIX  # noqa: E402

# The anchor the issue names: hand-tuned MNIST reaches 99 % in about 0.76 s per epoch on one A100 (our data is
# random, so only the epoch time compares, not the accuracy).
ANCHOR_EPOCH_S = 0.76
METRIC_RE = re.compile(r"^(trainer_\w+)\{[^}]*\}\s+(\S+)$")


@dataclass
class Sizes:
    device: str
    backend: str
    train_images: int
    test_images: int
    ddp_batch: int
    ddp_epochs: int
    lm: dict
    lm_seq: int
    lm_batch: int
    lm_epochs: int
    lm_repeat: int
    kernel_batch: int
    log_interval: int
    lm_strategy: str = "fsdp"
    lm_resume: int = 1
    nproc: int = 1  # --nproc-per-node: processes (GPUs) of the torchrun runs; above 1, a world-1 run is the baseline


GPU = Sizes("cuda", "nccl", 60_000, 10_000, 512, 4, bench_lm.GPU_MODEL, 1024, 8, 3, 24, 512, 20)
CPU = Sizes("cpu", "gloo", 1_024, 256, 128, 2, {"layers": 2, "width": 64, "heads": 4, "positions": 128}, 128, 8, 2,
            1, 128, 2)


@dataclass
class Row:
    step: str
    figure: str
    value: str
    note: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    data: dict = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)

    def add(self, step: str, figure: str, value: str, note: str = "") -> None:
        self.rows.append(Row(step, figure, value, note))

    def fail(self, step: str, why: str) -> None:
        self.failed.append(step)
        self.rows.append(Row(step, "FAILED", why[:300]))


class StepFailed(Exception):
    pass


# --deadline: when (time.monotonic()) every trainer run must have ended; None: each has --timeout alone. A run with
# less than LEAST_RUN_S left is not started: its step is a FAILED row that says so.
deadline: float | None = None
LEAST_RUN_S = 20.0


def run(cmd: list[str], env_extra: dict[str, str], timeout: float) -> tuple[str, float]:
    """stdout of a command (stderr appended) and its wall seconds; StepFailed with the last error line if it fails,
    or if --deadline leaves too little time to start it."""
    if deadline is not None:
        left = deadline - time.monotonic()
        if left < LEAST_RUN_S:
            raise StepFailed(f"not run: --deadline leaves {max(0.0, left):.0f} s (a run needs {LEAST_RUN_S:.0f})")
        timeout = min(timeout, left)
    env = bt._env(1)
    env.pop("OMP_NUM_THREADS")
    env.update(env_extra)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        raise StepFailed(f"timed out after {timeout:.0f} s") from e
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        errors = ([ln for ln in lines if ln.startswith("[ERROR]")][:1]  # the trainer's own line first
                  or [ln for ln in lines if "[ERROR]" in ln or "Error" in ln or "error" in ln])
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-6000:])
        raise StepFailed(f"exit {proc.returncode}: {(errors or lines or ['no output'])[-1].strip()}")
    return proc.stdout + proc.stderr, wall


TRAIN = ROOT / "trainer" / "train.py"


def torchrun_cmd(args: list[str], out_dir: Path, nproc: int = 1, script: Path = TRAIN) -> list[str]:
    return [bt.torchrun(), "--nnodes", "1", "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{bt.free_port()}", str(script), *args, "--out-dir", str(out_dir)]


def scaling(rep: Report, step: str, unit: str, one: float, many: float, n: int) -> None:
    """Weak scaling: the same per-rank batch at world size 1 and `n`; efficiency = rate(n) / (n x rate(1))."""
    eff = many / (n * one)
    rep.data[step.replace("-", "_")] = {"world_size": n, "rate_1": one, "rate_n": many, "efficiency": eff}
    rep.add(step, f"{unit} at world size 1", f"{one:,.0f}", "the same per-rank batch in one process: the baseline")
    rep.add(step, f"scaling efficiency, {n} against 1", f"{eff:.1%}",
            f"{many:,.0f} / ({n} x {one:,.0f}) {unit}")


def lines(output: str, tag: str) -> list[dict[str, str]]:
    return [dict(bt.FIELD_RE.findall(ln)) for ln in output.splitlines() if ln.startswith(f"[{tag}] ")]


class Scraper:
    """Reads a Prometheus endpoint every `every` seconds while a run trains; keeps each trainer_* metric's
    largest value (GPU memory, step, epoch grow) and the names served."""

    def __init__(self, port: int, every: float = 0.5):
        self.url, self.every = f"http://127.0.0.1:{port}/metrics", every
        self.values: dict[str, float] = {}
        self.last: dict[str, float] = {}  # each metric's value at the last scrape
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "Scraper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                with urllib.request.urlopen(self.url, timeout=2) as r:
                    text = r.read().decode()
            except OSError:
                continue  # not serving yet, or already gone
            self.scrapes += 1
            for ln in text.splitlines():
                if m := METRIC_RE.match(ln):
                    name, value = m.group(1), float(m.group(2))
                    self.values[name] = max(value, self.values.get(name, float("-inf")))
                    self.last[name] = value


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


def median_after_first(values: list[float]) -> float:
    return statistics.median(values[1:] if len(values) > 1 else values)


def ddp_steps(rep: Report, sizes: Sizes, tmp: Path, timeout: float) -> None:
    data_root = write_mnist(tmp, sizes)
    amp = ["--amp", "bf16", "--channels-last"] if sizes.device == "cuda" else []
    common = ["--task", "mnist", "--data-root", str(data_root), "--batch-size", str(sizes.ddp_batch),
              "--backend", sizes.backend, "--log-interval", str(sizes.log_interval), "--run-id", "ddp", *amp]
    port = bt.free_port()
    try:
        with Scraper(port) as scraper:
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
    resume = next((r for r in lines(out, "DDP") if "resumed_from" in r), None)
    trained = [int(e["epoch"].split("/")[0]) for e in lines(out, "EPOCH")]
    rep.data["ddp_resume"] = {"resume": resume, "epochs_trained": trained, "run_wall_s": wall}
    if resume is None or trained != [sizes.ddp_epochs + 1]:
        rep.fail("ddp-resume", f"expected a resume line and epoch {sizes.ddp_epochs + 1} alone; got resume="
                               f"{resume is not None}, epochs trained {trained}")
    else:
        rep.add("ddp-resume", "resumed, trained epoch", f"{trained[0]}",
                f"from {Path(resume['resumed_from']).name}; run {wall:.1f} s with start-up")


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


@dataclass
class LmRun:
    """One causal-lm run's figures: tokens/s over the epochs after the first (all ranks), model-FLOPs utilisation
    over the world's GPUs."""
    out: str
    wall: float
    nproc: int
    start: dict
    epochs: list[dict[str, str]]
    rate: float
    tokens: float
    seconds: float
    mfu: float | None

    def record(self) -> dict:
        return {"world_size": self.nproc, "tokens_per_s": self.rate, "tokens": self.tokens, "seconds": self.seconds,
                "mfu": self.mfu, "start": self.start, "epochs": self.epochs, "run_wall_s": self.wall}


class Lm:
    """The causal-lm steps' model, data and common arguments; `run` starts one torchrun of the trainer."""

    def __init__(self, sizes: Sizes, tmp: Path, timeout: float):
        self.sizes, self.tmp, self.timeout = sizes, tmp, timeout
        self.info = tiny_lm.build(tmp / "lm", seed=0, name="gpt2-bench", **sizes.lm)
        train = Path(self.info["data"]) / "train.jsonl"
        train.write_text(train.read_text() * sizes.lm_repeat)  # more tokens per epoch: an epoch outlasts start-up
        self.params = self.info["params"]
        # FLOPs per token: 6N + 12 x layers x width x seq-len (PaLM, appendix B)
        self.per_token = 6 * self.params + 12 * sizes.lm["layers"] * sizes.lm["width"] * sizes.lm_seq
        self.name = torch.cuda.get_device_name(0) if sizes.device == "cuda" else "cpu"
        self.peak = bench_lm.peak_flops(self.name) if sizes.device == "cuda" else None
        amp = ["--amp", "bf16"] if sizes.device == "cuda" else []
        self.common = [
            "--task", "causal-lm", "--model-local-dir", self.info["model"], "--data-root", self.info["data"],
            "--seq-len", str(sizes.lm_seq), "--batch-size", str(sizes.lm_batch), "--strategy", sizes.lm_strategy,
            "--backend", sizes.backend, "--log-interval", "1000000", "--save-epochs", "false", "--run-id", "lm",
            *amp,
            # a phase that hangs (start-up, model load, first step, checkpoint save, ...) ends the run with one
            # [ERROR] line naming it before the step's own timeout kills it silently (the H200's LM step, 2026-11-26)
            "--phase-timeout", f"{max(30.0, timeout / 2):g}"]

    def run(self, folder: str, epochs: int, nproc: int, extra: tuple[str, ...] = (), env: dict | None = None,
            script: Path = TRAIN) -> LmRun:
        out, wall = run(torchrun_cmd([*self.common, *extra, "--epochs", str(epochs)], self.tmp / folder, nproc, script),
                        env or {}, self.timeout)
        epoch_lines = lines(out, "EPOCH")
        if not epoch_lines:
            raise StepFailed("no [EPOCH] line in the trainer's output")
        rate, tokens, seconds = bench_lm.tokens_per_s(out)
        start = next((s for s in lines(out, "DDP") if s.get("strategy")), {})
        mfu = self.per_token * rate / (nproc * self.peak) if self.peak else None
        return LmRun(out, wall, nproc, start, epoch_lines, rate, tokens, seconds, mfu)

    def mfu_row(self, rep: Report, step: str, r: LmRun) -> None:
        gpus = f"{r.nproc} x " if r.nproc > 1 else ""
        rep.add(step, "model-FLOPs utilisation", f"{r.mfu:.1%}" if r.mfu is not None else "n/a",
                f"{self.per_token / 1e9:.2f} GFLOP/token against {gpus}{self.peak / 1e12:,.0f} TFLOP/s dense bf16 "
                "(datasheet)" if self.peak else
                ("no GPU" if self.sizes.device == "cpu" else f"no datasheet peak for {self.name!r} in bench_lm.PEAK"))


def lm_steps(rep: Report, sizes: Sizes, tmp: Path, timeout: float, steps: Collection[str] = ()) -> None:
    """lm-<strategy> at world size --nproc-per-node (tokens/s, MFU, rank 0's peak GPU memory), lm-resume, and with
    more than one process lm-scaling (a world-1 baseline); `steps` may add lm-compile and lm-syncs."""
    step, n = f"lm-{sizes.lm_strategy}", sizes.nproc
    try:
        lm = Lm(sizes, tmp, timeout)
    except Exception as e:  # noqa: BLE001 - the row says what failed; the other steps run
        rep.fail(step, f"building the model: {type(e).__name__}: {e}")
        return
    port = bt.free_port()
    try:
        with Scraper(port) as scraper:
            eager = lm.run("out", sizes.lm_epochs, n, env={"METRICS_PORT": str(port)})
    except StepFailed as e:
        rep.fail(step, str(e))
        return
    memory = scraper.values.get(PREFIX + "gpu_memory_peak_bytes")
    rep.data[step.replace("-", "_")] = {**eager.record(), "params": lm.params, "flops_per_token": lm.per_token,
                                        "peak_flops": lm.peak, "gpu_memory_peak_bytes": memory}
    start = eager.start
    rep.add(step, "tokens/s (epochs after the 1st)", f"{eager.rate:,.0f}",
            f"GPT-2 {lm.params / 1e6:.1f} M params, seq {sizes.lm_seq}, batch {sizes.lm_batch} per rank, world size "
            f"{n}, strategy {start.get('strategy', '?')} ({start.get('fsdp_units', '?')} FSDP units), amp "
            f"{start.get('amp', '?')}, {eager.tokens:,.0f} tokens in {eager.seconds:.1f} s")
    lm.mfu_row(rep, step, eager)
    rep.add(step, "peak GPU memory (rank 0)", f"{memory / 2**30:,.2f} GiB" if memory is not None else "not served",
            "largest torch.cuda.max_memory_allocated scraped from rank 0's metrics endpoint" if memory is not None else
            ("expected: the CPU serves no GPU memory" if sizes.device == "cpu" else "the GPU path must serve it"))
    if memory is None and sizes.device == "cuda":
        rep.failed.append(f"{step}:gpu_memory_peak_bytes")
    # Whether the host keeps the GPU fed: rank 0's mean step and data (batch building) time over the last stop-vote
    # interval scraped (trainer_step_seconds and trainer_data_seconds, set at each vote)
    step_s, data_s = (scraper.last.get(PREFIX + g) for g in ("step_seconds", "data_seconds"))
    rep.data[step.replace("-", "_")].update(step_seconds=step_s, data_seconds=data_s)
    rep.add(step, "data s / step s (rank 0)", f"{data_s:.4f} / {step_s:.4f}" if step_s and data_s is not None else
            "not served", "the last vote interval scraped: building the batches on the host against the whole step")
    rep.add(step, "val_loss per epoch", ", ".join(f"{float(e['val_loss']):.3f}" for e in eager.epochs),
            "random weights, so the loss must fall from about ln(vocab)")
    if sizes.lm_resume:
        lm_resume(rep, lm, sizes)
    if n > 1:
        try:
            one = lm.run("out-1", sizes.lm_epochs, 1)
        except StepFailed as e:
            rep.fail("lm-scaling", f"world size 1: {e}")
        else:
            scaling(rep, "lm-scaling", "tokens/s", one.rate, eager.rate, n)
    if "compile" in steps:
        lm_compile(rep, lm, sizes, eager)
    if "syncs" in steps:
        lm_syncs(rep, lm, sizes)


def lm_resume(rep: Report, lm: Lm, sizes: Sizes) -> None:
    """One epoch more in the eager run's folder: a DCP checkpoint saved from GPU memory and loaded back."""
    try:
        again = lm.run("out", sizes.lm_epochs + 1, sizes.nproc)
    except StepFailed as e:
        rep.fail("lm-resume", str(e))
        return
    resume = next((r for r in lines(again.out, "DDP") if "resumed_from" in r), None)
    trained = [int(e["epoch"].split("/")[0]) for e in again.epochs]
    rep.data["lm_resume"] = {"resume": resume, "epochs_trained": trained, "run_wall_s": again.wall}
    if resume is None or trained != [sizes.lm_epochs + 1]:
        rep.fail("lm-resume", f"expected a resume line and epoch {sizes.lm_epochs + 1} alone; got resume="
                              f"{resume is not None}, epochs trained {trained}")
    else:
        rep.add("lm-resume", "resumed (DCP), trained epoch", f"{trained[0]}",
                f"from {resume['resumed_from']}; run {again.wall:.1f} s with start-up")


def lm_compile(rep: Report, lm: Lm, sizes: Sizes, eager: LmRun) -> None:
    """The same run with --compile (the transformer blocks and the loss, trainer/engine.py): tokens/s and MFU after
    the first epoch, against eager; the first epoch's extra seconds are the compile."""
    try:
        r = lm.run("out-compile", sizes.lm_epochs, sizes.nproc, extra=("--compile", "true"))
    except StepFailed as e:
        rep.fail("lm-compile", str(e))
        return
    if not r.start.get("compile"):
        rep.fail("lm-compile", "the [DDP] start line names nothing compiled")
        return
    first = float(r.epochs[0]["train_s"]) - float(eager.epochs[0]["train_s"])
    rep.data["lm_compile"] = {**r.record(), "against_eager": r.rate / eager.rate, "first_epoch_extra_s": first}
    rep.add("lm-compile", "tokens/s (epochs after the 1st)", f"{r.rate:,.0f}",
            f"--compile: {r.rate / eager.rate:.2f} x eager's {eager.rate:,.0f}; the first epoch took {first:+.1f} s "
            "against eager's (the compile)")
    lm.mfu_row(rep, "lm-compile", r)


def lm_syncs(rep: Report, lm: Lm, sizes: Sizes) -> None:
    """One epoch under bench/sync_count.py: torch.cuda.set_sync_debug_mode("warn") counts rank 0's host syncs by
    phase and trainer line; the syncs inside `step N` phases over the steps are what the fast step must keep near 0."""
    folder = lm.tmp / "syncs"
    try:
        r = lm.run("out-syncs", 1, sizes.nproc, env={"SYNC_COUNT_OUT": str(folder)},
                   script=ROOT / "bench" / "sync_count.py")
        record = json.loads((folder / "syncs-rank0.json").read_text())
    except (StepFailed, OSError, ValueError) as e:
        rep.fail("lm-syncs", f"{type(e).__name__}: {e}" if not isinstance(e, StepFailed) else str(e))
        return
    rep.data["lm_syncs"] = {**record, "tokens_per_s": r.rate}
    if record["mode"] != "warn":
        rep.add("lm-syncs", "host syncs in steps (rank 0)", "n/a", record["mode"])
        if sizes.device == "cuda":
            rep.failed.append("lm-syncs")
        return
    in_steps, steps = record["by_phase"].get("step", 0), record["steps"]
    every = [f"{site} ({count})" for site, count in record["sites"].items() if steps and count >= steps]
    # A sync outside Python (the autograd engine's own threads) is not a Python warning: c10 prints it on stderr,
    # every rank's, where the counter (which swallows the ones it counts) cannot see it.
    native = r.out.count(SYNC_WARNING)
    rep.data["lm_syncs"]["stderr_warnings"] = native
    rep.add("lm-syncs", "host syncs in steps (rank 0)", f"{in_steps:,}",
            f"{in_steps / max(1, steps):.2f} per step over {steps} steps after the first; {record['total']:,} in the "
            f"run; lines syncing every step: {', '.join(every) or 'none'}; {native:,} more printed by C++ threads "
            "(all ranks)")


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
    global deadline
    deadline = time.monotonic() + args.deadline if args.deadline is not None else None
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
