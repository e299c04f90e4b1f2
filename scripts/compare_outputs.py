"""Capture what the commands users run print, so that a restructuring can show it changed none of it.

    git clone -q --no-checkout . BASE && git -C BASE checkout -q af0b82a   # BASE: a path as long as this checkout's
    python scripts/compare_outputs.py capture --repo BASE --out /tmp/before         # the starting commit
    python scripts/compare_outputs.py capture --out /tmp/after                      # this checkout
    python scripts/compare_outputs.py compare /tmp/before /tmp/after                # exit 1 and a diff if they differ

Each command runs from the checkout's root with this interpreter (`python -m policies...` imports the checkout's own
code): `make validate` (text and JSON), `make plan FORMAT=json` (and PODS=1), `make diff` between two fixed commits
(text, markdown, JSON), each on the repository's overlays and argocd/ and on the public corpus (tests/corpus) where
the command reads files, and a few short `make simulate` runs (a faulted kind-cpu run, a scaled-down GPU overlay,
a corpus manifest that fails here). What varies from run to run is masked: the checkout's and the interpreter's paths, seconds,
the lines the trainer processes print (their interleaving is the scheduler's), torch's own log lines."""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
# Two commits whose overlays differ (make diff renders both with the code under test).
DIFF_REFS = (("8052a49", "af0b82a"), ("586bfd7", "af0b82a"))
CORPUS = "tests/corpus"
# (name, argv after `python -m`, seconds allowed)
COMMANDS: list[tuple[str, list[str], int]] = [
    ("validate-text", ["policies.cli", "validate", "overlays", "argocd"], 600),
    ("validate-json", ["policies.cli", "validate", "--format", "json", "overlays", "argocd"], 600),
    ("validate-corpus-text", ["policies.cli", "validate", CORPUS], 600),
    ("validate-corpus-json", ["policies.cli", "validate", "--format", "json", CORPUS], 600),
    ("plan-json", ["policies.cli", "plan", "--format", "json"], 600),
    ("plan-pods-json", ["policies.cli", "plan", "--format", "json", "--pods"], 600),
    ("plan-corpus-json", ["policies.cli", "plan", "--format", "json", "--pods", CORPUS], 600),
    ("plan-text", ["policies.cli", "plan"], 600),
]
for base, head in DIFF_REFS:
    for fmt in ("text", "markdown", "json"):
        COMMANDS.append((f"diff-{base}-{fmt}", ["policies.diff", "--base", base, "--head", head, "--format", fmt], 600))
SIMULATIONS: list[tuple[str, list[str]]] = [
    ("simulate-kind-cpu-pytorchjob-fault", ["overlays/kind-cpu/pytorchjob", "--deadline", "240",
                                            "--fault", "kill:1@step=6"]),
    ("simulate-gke-t4-indexed-job-scaled", ["overlays/gke-t4/indexed-job", "--scale-to", "2", "--deadline", "150"]),
    ("simulate-corpus-jobset", [f"{CORPUS}/jobset/jobset-cnn-mnist.yaml", "--deadline", "60"]),
]

_SECONDS = re.compile(r"\b\d+(?:\.\d+)?(?= ?(?:s|ms|seconds)\b)")
_POD_LINE = re.compile(r"^\[(?!sim\])[^\]\s]+\] ")


def normalise(text: str, repo: Path, run_dir: Path | None = None, simulation: bool = False) -> str:
    text = text.replace(str(Path(sys.executable).parent.parent), "<VENV>")  # the tools this interpreter runs
    text = text.replace(str(repo), "<REPO>")
    if run_dir is not None:
        text = text.replace(str(run_dir), "<RUN>")
        # also where a command line cut at 200 characters cuts the run folder's random name
        text = re.sub(re.escape(str(run_dir.parent)) + r"/cmp-sim-\w*", "<RUN>", text)
    out = []
    for line in text.splitlines():
        if simulation:
            if _POD_LINE.match(line):  # what a pod's processes print: the scheduler orders it
                continue
            if line.startswith("trainer: "):  # the trainer's [DONE] line: its timings
                line = "trainer: <DONE line>"
            if line.startswith("  [") and "] " in line:  # a pod's last words in the diagnosis
                line = line.split("] ", 1)[0] + "] <last words>"
        line = _SECONDS.sub("<T>", line)
        out.append(line)
    return "\n".join(out) + "\n"


def mask_json(text: str) -> str:
    """A JSON report with its timings masked, re-serialised with sorted keys."""
    try:
        doc = json.loads(text)
    except ValueError:
        return text

    def walk(node):
        if isinstance(node, dict):
            return {k: ("<T>" if k in ("seconds", "elapsed", "duration", "time", "timings") else walk(v))
                    for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return json.dumps(walk(doc), indent=1, sort_keys=True) + "\n"


def capture(repo: Path, out: Path, simulate: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1"}
    env.pop("DEADLINE", None)
    for name, argv, limit in COMMANDS:
        proc = subprocess.run([sys.executable, "-m", *argv], cwd=repo, env=env, capture_output=True, text=True,
                              timeout=limit)
        stdout = mask_json(proc.stdout) if "json" in name else proc.stdout
        (out / f"{name}.txt").write_text(f"exit {proc.returncode}\n--- stdout\n{normalise(stdout, repo)}"
                                         f"--- stderr\n{normalise(proc.stderr, repo)}")
        print(f"{name}: exit {proc.returncode}", flush=True)
    if not simulate:
        return
    for name, args in SIMULATIONS:
        run_dir = Path(tempfile.mkdtemp(prefix="cmp-sim-"))
        try:
            proc = subprocess.run([sys.executable, "-m", "policies.simulate", *args, "--run-dir", str(run_dir)],
                                  cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        # simulate prints each pod's command cut at 200 characters, paths and all: the cut falls at one place only
        # where the checkouts' paths are as long (clone the starting commit at a path of the same length).
        (out / f"{name}.txt").write_text(
            f"checkout path length {len(str(repo))}\n"
            f"exit {proc.returncode}\n--- stdout\n{normalise(proc.stdout, repo, run_dir, True)}"
            f"--- stderr\n{normalise(proc.stderr, repo, run_dir, True)}")
        print(f"{name}: exit {proc.returncode}", flush=True)


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.glob("*.txt")} | {p.name for p in after.glob("*.txt")})
    differ = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"{name}: only in {'after' if not a.exists() else 'before'}")
            differ += 1
            continue
        if a.read_text() != b.read_text():
            differ += 1
            print(f"{name}: DIFFERS")
            sys.stdout.writelines(difflib.unified_diff(a.read_text().splitlines(True), b.read_text().splitlines(True),
                                                       str(a), str(b), n=2))
        else:
            print(f"{name}: same")
    print(f"{len(names) - differ} of {len(names)} outputs the same")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    cap = sub.add_parser("capture")
    cap.add_argument("--repo", type=Path, default=HERE)
    cap.add_argument("--out", type=Path, required=True)
    cap.add_argument("--no-simulate", action="store_true", help="leave the simulations out (minutes of CPU)")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "capture":
        capture(args.repo.resolve(), args.out, not args.no_simulate)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
