"""The causal-lm steps of bench/bench_gpu.py: lm-<strategy> (tokens/s, model-FLOPs utilisation, rank 0's peak GPU
memory and its data time against its step time), lm-resume, lm-scaling with more than one process, lm-compile and
lm-syncs (bench/sync_count.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Collection

import torch

import bench_lm
import bench_trainer as bt
import tiny_lm
from gpu_run import ROOT, TRAIN, Report, Sizes, StepFailed, lines, resumed, run, scaling, torchrun_cmd
from sync_count import SYNC_WARNING
from trainer.telemetry import PREFIX


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
        docs = train.read_text().splitlines(keepends=True)
        docs = docs[:max(1, round(len(docs) * sizes.lm_share))]
        train.write_text("".join(docs) * sizes.lm_repeat)  # more tokens per epoch: an epoch outlasts start-up
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
        start: dict[str, str] = next((s for s in lines(out, "DDP") if s.get("strategy")), {})
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
        with bt.Scraper(port) as scraper:
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
    resumed(rep, "lm-resume", "resumed (DCP), trained epoch", again.out, again.wall, sizes.lm_epochs + 1)


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
