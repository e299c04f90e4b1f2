"""Helpers for the trainer tests: launch real torchrun on CPU, parse the tagged log lines, write IDX data."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from conftest import reap, run_bounded

ROOT = Path(__file__).resolve().parent.parent
TRAIN_PY = ROOT / "trainer" / "train.py"
PYTHON = sys.executable
TORCHRUN = str(Path(sys.executable).parent / "torchrun")

_FIELD_RE = re.compile(r"([A-Za-z_][\w/]*)=(.*?)(?= [A-Za-z_][\w/]*=|$)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without torchrun's variables, one thread per process."""
    drop = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TASK",
            "EPOCHS", "BATCH_SIZE", "LR", "SEED", "SAMPLES", "FEATURES", "CLASSES", "DATA_ROOT", "OUT_DIR",
            "RUN_ID", "DIST_BACKEND", "AMP", "CHANNELS_LAST", "LOG_INTERVAL", "CHECKPOINT_EVERY",
            "CHECKPOINT_STEPS", "MAX_STEPS", "RECORD_SHARDS", "PG_TIMEOUT", "TERMINATION_GRACE_PERIOD_SECONDS",
            "AFTER_DONE", "PAUSE_AT_STEPS", "COMPILE", "PHASE_TIMEOUT",
            # the causal-lm task's
            "MODEL_LOCAL_DIR", "TOKENIZER_LOCAL_DIR", "MODEL_ID", "LOCAL_FILES_ONLY", "TRAIN_FILE", "VAL_FILE",
            "SEQ_LEN", "GRAD_ACCUM", "CLIP_GRAD", "WARMUP_STEPS", "LR_SCHEDULE", "MIN_LR_RATIO", "WEIGHT_DECAY",
            "STRATEGY", "TOKEN_CACHE", "SAVE_EPOCHS",
            "METRICS_PORT", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "KUBEFLOW_TRAINER_SERVER_URL",
            "KUBEFLOW_TRAINER_SERVER_CA_CERT", "KUBEFLOW_TRAINER_SERVER_TOKEN"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("TORCHELASTIC_", "PET_"))}
    env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def torchrun_cmd(trainer_args: list[str], nproc: int = 2, nnodes: int = 1, rdzv_port: int | None = None,
                 max_restarts: int = 0, run_id: str = "test", master_port: int | None = None,
                 node_rank: int = 0) -> list[str]:
    """c10d rendezvous when `rdzv_port` is given, else static rendezvous (torchrun's default, the one a
    PyTorchJob without elasticPolicy uses) on `master_port` or a free port."""
    cmd = [TORCHRUN, "--nnodes", str(nnodes), "--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts),
           "--monitor-interval", "0.1"]
    if rdzv_port is not None:
        cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{rdzv_port}", "--rdzv-id", run_id]
    else:
        cmd += ["--master-addr", "127.0.0.1", "--master-port", str(master_port or free_port()),
                "--node-rank", str(node_rank)]
    return cmd + [str(TRAIN_PY), *trainer_args]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> Result:
    """Run `cmd` to its end; past `timeout` it is stopped with every process below it (torchrun's workers run in
    sessions of their own and would outlive a plain kill)."""
    t0 = time.monotonic()
    proc = run_bounded(cmd, timeout, env=env or clean_env(), cwd=ROOT)
    return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def run_nodes(cmds: list[list[str]], timeout: float, env: dict[str, str] | None = None,
              envs: list[dict[str, str]] | None = None) -> list[Result]:
    """Start several torchrun "nodes" (or independent runs) at once and wait for all of them (killing all on
    timeout); `envs` gives each command its own environment."""
    t0 = time.monotonic()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=envs[i] if envs else env or clean_env(), cwd=ROOT) for i, c in enumerate(cmds)]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, timeout - (time.monotonic() - t0)))
            results.append(Result(p.returncode, out, err, time.monotonic() - t0))
    finally:
        for p in procs:
            reap(p)
    return results


def sigterm_on(cmd: list[str], env: dict[str, str], line_start: str, timeout: float = 150) -> tuple[int, list[str]]:
    """Start `cmd` (torchrun), send it SIGTERM, as the kubelet sends it to the pod's process, once an output line
    starts with `line_start`; (exit code, output lines)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    lines, deadline, sent = [], time.monotonic() + timeout, False
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if not sent and line.startswith(line_start):
                proc.send_signal(signal.SIGTERM)
                sent = True
            assert time.monotonic() < deadline, "".join(lines[-40:])
        proc.wait(timeout=60)
    finally:
        reap(proc)
        proc.stdout.close()  # type: ignore[union-attr]
    assert sent, "".join(lines[-40:])
    return proc.returncode, lines


def tagged(text: str, tag: str) -> list[dict[str, str]]:
    """Fields of every `[TAG] key=value ...` line."""
    prefix = f"[{tag}] "
    return [dict(_FIELD_RE.findall(line[len(prefix):])) for line in text.splitlines() if line.startswith(prefix)]


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def worker_exit_codes(torchrun_output: str) -> dict[int, int]:
    """{global rank: exit code} from torchrun's failure summary."""
    codes = {}
    for m in re.finditer(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)", torchrun_output):
        codes[int(m.group(1))] = int(m.group(2))
    return codes


def trainer_errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("[ERROR]")]


def has_trainer_traceback(text: str) -> bool:
    """A traceback through the trainer's own code (torchrun's own report of a failed child does not count)."""
    return bool(re.search(r'File ".*trainer/[\w/]+\.py", line \d+', text))


def write_idx_dataset(folder: Path, n_train: int = 256, n_val: int = 64, gz: bool = False, seed: int = 0) -> Path:
    """MNIST-shaped IDX files whose label is visible in the image (a bright 7x7 block per class), so a CNN
    learns them in a few steps."""
    from trainer.idx import encode_idx

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for prefix, n in (("train", n_train), ("t10k", n_val)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for i, k in enumerate(labels):
            r, c = divmod(int(k), 4)
            images[i, r * 7:(r + 1) * 7, c * 7:(c + 1) * 7] = 255
        for kind, arr in (("images-idx3-ubyte", images), ("labels-idx1-ubyte", labels)):
            data = encode_idx(arr)
            path = folder / f"{prefix}-{kind}"
            if gz:
                import gzip

                path = path.with_name(path.name + ".gz")
                data = gzip.compress(data)
            path.write_bytes(data)
    return folder
