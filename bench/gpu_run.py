"""What the steps of bench/bench_gpu.py share: their sizes, the report and its rows, one trainer run under torchrun
(bounded by --timeout and --deadline, failing with its last error line), the tagged lines a run prints, and the
scaling and resume rows. The metrics endpoint is scraped by bench_trainer.Scraper, as `make bench-trainer` scrapes it."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import bench_trainer as bt

ROOT = Path(__file__).resolve().parent.parent


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
    lm_share: float = 1.0  # the share of the corpus's documents an lm epoch trains on (before lm_repeat)


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
# OMP_NUM_THREADS for every run (None: the trainer picks, cpus over local processes). The CPU fallback sets 1: on a
# machine other jobs share, two spinning OpenMP threads per process made its lm runs up to 30 times slower (21,070 against
# 640 tokens/s, 2026-11-30), where one thread each only waits its turn.
threads: int | None = None
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
    if threads is None:
        env.pop("OMP_NUM_THREADS")
    else:
        env["OMP_NUM_THREADS"] = str(threads)
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


def median_after_first(values: list[float]) -> float:
    return statistics.median(values[1:] if len(values) > 1 else values)


def resumed(rep: Report, step: str, figure: str, out: str, wall: float, epoch: int) -> None:
    """A resume run's rows: its `[DDP] resume` line, and epoch `epoch` alone trained (a FAILED row otherwise)."""
    resume = next((r for r in lines(out, "DDP") if "resumed_from" in r), None)
    trained = [int(e["epoch"].split("/")[0]) for e in lines(out, "EPOCH")]
    rep.data[step.replace("-", "_")] = {"resume": resume, "epochs_trained": trained, "run_wall_s": wall}
    if resume is None or trained != [epoch]:
        rep.fail(step, f"expected a resume line and epoch {epoch} alone; got resume={resume is not None}, epochs "
                       f"trained {trained}")
    else:
        rep.add(step, figure, f"{trained[0]}", f"from {Path(resume['resumed_from']).name}; run {wall:.1f} s with "
                                               "start-up")
