"""The fault table of docs/simulate.md, from real runs: every kind-cpu overlay simulated with each fault of FAULTS,
then the runs of EXTRA (pod 0 of the elastic job, a lost node, two faults in a row) (`python -m policies.simulate
<overlay> --fault <fault>`), one row each, written between the table's markers.

  python scripts/fault_table.py            # run every combination and rewrite the table in docs/simulate.md
  python scripts/fault_table.py --check    # run them and fail (exit 1) where an outcome differs from the doc
  python scripts/fault_table.py --only statefulset --faults kill:1@step=6   # a part of it, printed only
"""
from __future__ import annotations

import argparse
import concurrent.futures
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "simulate.md"
BEGIN, END = "<!-- fault-table:begin (scripts/fault_table.py) -->", "<!-- fault-table:end -->"
# Pod 1 (node rank 1) at step 6 of 12: inside epoch 2, two steps after the epoch-1 checkpoint.
FAULTS = ("kill:1@step=6", "term:1@step=6")
HEADER = ("| overlay | fault | outcome | steps (from metrics.jsonl) | decided by | the rules predicted |",
          "|---|---|---|---|---|---|")
# Generous: every row ends by itself (finished, failed, a crash loop or a pod waiting for its lost node are told at
# once: one run is about a minute here), so the deadline only bounds a run that hangs, which the simulator then
# reports with what its world was waiting for. Ten times a run here, and small enough that the test running --check
# still ends within CI's limit when one hangs (tests/test_simulate_faults.py).
DEADLINE = 600
# Not among the overlays of every fault: the elastic PyTorchJob trains 16 times the data (so that a returning worker
# is taken back before the run ends: one run is about two minutes here) and is shown shrinking and growing by its own
# fault, kill:1@step=6 return:1@step=8 (tests/test_simulate_elastic.py; docs/simulate.md, "The elastic PyTorchJob").
ELSEWHERE = {"overlays/kind-cpu/pytorchjob-elastic"}
# Rows of their own: the elastic job's worker 0, whose torchrun holds the c10d store (every torchrun ends: all three
# containers restart, which its backoffLimit 4 allows); a lost node (no kubelet restarts the pod, and a controller that
# names its pods waits until the node is deleted or the pod force-deleted); two faults in a row (the second loss
# reaches the kind-cpu PyTorchJob's backoffLimit; the StatefulSet restarts for ever).
EXTRA = (("overlays/kind-cpu/pytorchjob-elastic", "kill:0@step=6"),
         ("overlays/kind-cpu/statefulset", "node-lost:1@step=6"),
         ("overlays/kind-cpu/pytorchjob", "node-lost:1@step=6"),
         ("overlays/kind-cpu/pytorchjob", "kill:1@step=6 kill:1@step=9"),
         ("overlays/kind-cpu/statefulset", "kill:1@step=6 kill:0@step=9"))


def runs() -> list[tuple[str, str]]:
    """Every (overlay, fault) the table has a row for, in its order."""
    return [(o, f) for o in overlays() for f in FAULTS] + list(EXTRA)


def overlays() -> list[str]:
    return sorted(o for o in (str(p.parent.relative_to(REPO)) for p in (REPO / "overlays/kind-cpu").glob(
        "*/kustomization.yaml")) if o not in ELSEWHERE)


def row(overlay: str, fault: str, out: str) -> str:
    """One table row from a faulted run's output (its `== faults` section)."""
    outcome = re.search(r"^outcome: (finished|failed|hung)\b(.*)$", out, re.M)
    kind = outcome.group(1) if outcome else "no outcome (see the run's output)"
    steps = "-"
    if kind == "finished":
        m = re.search(r"^  steps: (\d+) of (\d+)", out, re.M)
        again = [int(n) for n in re.findall(r"^  restart: .*: (\d+) steps? done again$", out, re.M)]
        beyond = re.search(r"outcome: finished at step \d+: steps lost or done again", out)
        reached = re.findall(r"^  restart: reached step (\d+),", out, re.M)
        final = re.search(r"^outcome: finished at step (\d+)", out, re.M)
        if m or final:
            # A world whose size varies (elastic) has no planned total: its last step alone.
            steps = f"{m.group(1)} of {m.group(2)}" if m else f"{final.group(1)} (an elastic world: no planned total)"
            if reached:  # where each fault landed: a step fault at its step exactly
                steps += f", stopped at step {', '.join(reached)}"
            steps += (", none done again" if not any(again) else
                      ", done again beyond the last checkpoint" if beyond else
                      ", done again only since the last checkpoint")
    # Which pod ends first after a fault (the faulted one, or a peer that lost it) is a matter of timing: the rows
    # keep the policies that decided, not the exit codes or the order.
    decisions = re.findall(r"^  pod \S+ (.*?) -> (.*?) \[", out, re.M)
    if kind == "failed" and outcome:
        decided = policy(outcome.group(2).lstrip(": "))
    else:
        decided = "; ".join(sorted({policy(who) for _, who in decisions})) or "-"
    predicted = re.search(r"^the rules predicted: (\w+)", out, re.M)
    pred = predicted.group(1) if predicted else "-"
    blocked = re.search(r"^the rules predicted: \w+ \(.*, but ([A-Z0-9, ]+): the world does not re-form", out, re.M)
    if blocked:
        pred += f" ({blocked.group(1)})"
    if "DISAGREEMENT" in out:
        pred += " (DISAGREES)"
    return f"| `{overlay.removeprefix('overlays/')}` | `{fault}` | {kind} | {steps} | {decided} | {pred} |"


def policy(decision: str) -> str:
    """A decision without what varies from run to run: counts, back-offs, exit codes, pod numbers, replica roles."""
    text = re.sub(r" \(restart \d+, back-off \d+ s\)| \(\d+ restarts counted\)| \(\d+ of \d+ used\)"
                  r"|, pod deleted \(DisruptionTarget\)| matches exit code \d+|(?<=-> pod )\d+ |(?<=: )(Master|Worker) ",
                  "", decision)
    return re.sub(r"\s+", " ", text).replace("|", "/").strip()


def _children_cpu() -> float:
    """CPU seconds this process's finished children (the simulations and their pods) have used."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(overlay: str, fault: str) -> tuple[str, float]:
    with tempfile.TemporaryDirectory(prefix="fault-table-") as tmp:
        start = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-m", "policies.simulate", overlay, "--fault", fault,
                                   "--deadline", str(DEADLINE), "--run-dir", str(Path(tmp) / "run")], cwd=REPO,
                                  capture_output=True, text=True, timeout=DEADLINE + 120)
        except subprocess.TimeoutExpired as e:  # the simulator itself did not end: its row says so, with its output
            said = "".join(x.decode(errors="replace") if isinstance(x, bytes) else x for x in (e.stdout, e.stderr) if x)
            return (f"{said}\nthe simulator did not end within {DEADLINE + 120} s (killed)",
                    time.monotonic() - start)
        return proc.stdout + proc.stderr, time.monotonic() - start


def table(rows: list[str]) -> str:
    return "\n".join([BEGIN, *HEADER, *rows, END])


def documented() -> list[str]:
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        return []
    body = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    return [ln for ln in body.strip().splitlines() if ln.startswith("| `")]


def key(line: str) -> tuple[str, str]:
    cells = [c.strip() for c in line.strip("|").split("|")]
    return cells[0], cells[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with docs/simulate.md instead of writing it")
    ap.add_argument("--only", nargs="*", default=None, help="launcher folders (e.g. statefulset); print only")
    ap.add_argument("--faults", nargs="*", default=list(FAULTS))
    ap.add_argument("--jobs", type=int, default=2, help="overlays simulated at once (default 2)")
    args = ap.parse_args(argv)
    if args.only is None and args.faults == list(FAULTS):
        chosen = runs()
    else:
        chosen = [(o, f) for o in overlays() if args.only is None or o.rsplit("/", 1)[1] in args.only
                  for f in args.faults]
    start, cpu = time.monotonic(), _children_cpu()
    by_overlay: dict[str, list[str]] = {}
    for overlay, fault in chosen:
        by_overlay.setdefault(overlay, []).append(fault)

    outputs: dict[tuple[str, str], str] = {}

    def overlay_rows(overlay: str) -> dict[tuple[str, str], str]:
        # One overlay's faults one after another: two runs of one overlay would share its host-network ports (etcd).
        out_rows = {}
        for fault in by_overlay[overlay]:
            out, seconds = run(overlay, fault)
            outputs[(overlay, fault)] = out
            out_rows[(overlay, fault)] = row(overlay, fault, out)
            print(f"{out_rows[(overlay, fault)]}  ({seconds:.0f} s)", file=sys.stderr, flush=True)
        return out_rows

    done: dict[tuple[str, str], str] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for found in pool.map(overlay_rows, by_overlay):
            done.update(found)
    rows = [done[c] for c in chosen]
    print(f"{len(rows)} runs, {time.monotonic() - start:.0f} s with {args.jobs} at a time, "
          f"{_children_cpu() - cpu:.0f} s of CPU", file=sys.stderr)
    if args.check:
        doc = {key(r): r for r in documented()}
        # A row that differs comes with the end of its run's output: what the simulator said of the world (CI keeps
        # nothing else of a run).
        wrong = [f"  run: {r}\n  doc: {doc.get(key(r), '(missing)')}\n  the run's last lines:\n"
                 + "\n".join("    " + ln for ln in outputs[c].splitlines()[-25:])
                 for c, r in zip(chosen, rows) if doc.get(key(r)) != r]
        if wrong:
            print("docs/simulate.md's fault table differs from the runs (python scripts/fault_table.py rewrites it):\n"
                  + "\n".join(wrong))
            return 1
        print(f"the fault table matches {len(rows)} runs")
        return 0
    if args.only is not None or args.faults != list(FAULTS):
        print("\n".join(rows))
        return 0
    text = DOC.read_text()
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + table(rows) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + table(rows) + "\n"
    tmp = DOC.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(DOC)
    print(f"docs/simulate.md: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
