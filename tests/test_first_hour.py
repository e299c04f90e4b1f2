"""The first hour of a new user (docs/first-hour.md): the commands the docs give, run as written, print nothing
alarming: no torch or Python warning, no traceback, no C++ frame on the terminal."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

# torch's log lines at warning or error level (`W1124 03:25:51.470000 1213 run.py:865] ...` from Python,
# `[W1124 03:25:51.470992 socket.cpp:764] ...` from C++), each behind the pod's name on make simulate's terminal;
# Python's warnings (`UserWarning: ...`), tracebacks and C++ stack frames.
ALARMING = re.compile(r"^(\[[^\]]+\] )?\[?[WE]\d{4} |Warning\b|Traceback|^frame #")


def alarming(text: str) -> list[str]:
    """The lines of a terminal's output that a new user would read as something gone wrong."""
    return [ln for ln in text.splitlines() if ALARMING.search(ln)]


def checkout_commands(doc: Path) -> list[str]:
    """docs/trainer.md's first bash block, from `# from a checkout` to its first torchrun command."""
    block = doc.read_text().split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    start = next(i for i, ln in enumerate(block) if ln.startswith("# from a checkout"))
    end = next(i for i, ln in enumerate(block) if i > start and ln.startswith("torchrun "))
    return block[start:end + 1]


def test_alarming_lines_are_recognised():
    assert alarming("W1124 03:25:51.470000 1213 torch/distributed/run.py:865] node_rank is only used\n"
                    "[pod-1] W1124 03:25:51.470000 1213 x.py:1] y\nfoo.py:118: UserWarning: No artists\n"
                    "Traceback (most recent call last):\nframe #3: c10d::x\n[EPOCH] epoch=1/3 ok\n") != []
    assert len(alarming("W1124 0 x] a\n[p] E1124 0 x] b\nUserWarning: c\nTraceback (\nframe #0: d\n"
                        "[p] [W1124 03:48:04.075 socket.cpp:764] [c10d] e\n[E1124 0 f.cpp:1] g\n")) == 7
    assert alarming("[EPOCH] epoch=1/3 step=4 train_loss=1.3\n[DONE] world=4\nwarning: the input is empty\n") == []


@pytest.mark.timeout(300)
def test_the_checkout_commands_of_docs_trainer_run_as_written(tmp_path):
    # A new user's shell after `make setup`: the venv is not on PATH and OMP_NUM_THREADS is not set.
    lines = [ln.replace("/tmp/out", str(tmp_path / "out")) for ln in checkout_commands(REPO / "docs/trainer.md")]
    assert lines[-1].startswith("torchrun --nproc-per-node 2 trainer/train.py --task digits"), lines
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p).resolve() != Path(venv_bin).resolve())
    proc = subprocess.run(["bash", "-ec", "\n".join(lines)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=280)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "[DONE] world=2 epochs=3" in out, out[-3000:]
    assert alarming(out) == [], "\n".join(alarming(out))
