"""What the simulator asks of the repository's trainer, each in a process of its own, as it runs the trainer in the
pods: the settings its own parser reads from a pod's arguments and env (a fault run's planned steps), and the report
of a finished run. The validation layer never imports the trainer (nor torch, which it pulls in)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..render.paths import REPO

# The trainer's parser over a pod's script arguments, its env as the process env (the flags' defaults read it); exit
# 2 where it refuses them. The keys a fault run's plan reads.
_SETTINGS = """
import json, sys
from trainer import train
try:
    args, _ = train.build_parser().parse_known_args(sys.argv[1:])
except SystemExit:
    sys.exit(2)
print(json.dumps({k: getattr(args, k) for k in ("task", "samples", "batch_size", "epochs", "max_steps")}))
"""
_REPORT = """
import sys
from pathlib import Path
from trainer.report import for_folder
for line in for_folder(Path(sys.argv[1])):
    print(line)
"""
# What the pods' env holds for the simulator, not the trainer: left out of the parser's env.
_SIMULATOR_ENV = ("LD_PRELOAD", "SOCKET_WRAPPER_DIR", "SOCKET_WRAPPER_DEFAULT_IFACE")


def settings(script_args: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    """The trainer's settings (task, samples, batch_size, epochs, max_steps) for these arguments and env, as
    trainer/train.py's own parser reads them; None where it refuses them or cannot run here."""
    run_env = {k: v for k, v in env.items() if k not in _SIMULATOR_ENV}
    proc = subprocess.run([sys.executable, "-c", _SETTINGS, *script_args], cwd=REPO, env=run_env,
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return None
    settings: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return settings


def report_lines(run_dir: Path) -> list[str]:
    """`report: <report.html>` for every run of the trainer under `run_dir` (trainer/report.py), one line each."""
    proc = subprocess.run([sys.executable, "-c", _REPORT, str(run_dir)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["it exited " + str(proc.returncode)])[-1]
        lines.append(f"report: not written for {run_dir}: {why}")
    return lines
