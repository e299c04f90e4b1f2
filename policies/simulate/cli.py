"""`make simulate` / `python -m policies.simulate`: the command line. Reads one overlay (or rendered file), runs the
same static checks as `make validate` for the diagnosis, scales it down where asked, and runs the simulation (with its
faults, where FAULT= gives some); prints what it set up, the summary, and the trainer's report."""
from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
from pathlib import Path
from typing import TextIO

from ..report import engine
from ..render import paths
from ..entry import guarded
from ..launchers import Bundle
from ..kube.objects import ERROR
from . import ask_trainer, faults as F, provenance, pvc
from .diagnose import clip
from .fault_run import FaultRun
from ..render.paths import REPO
from .host import SimulationError
from .pods import IMAGE_ROOT
from .processes import STOP_SIGNALS, Stopped, stop_on_signal
from .result import default_run_dir, prepare_run_dir
from .scale_down import needs_scaling, scale_down
from .simulation import Simulation


# GitHub Actions events whose runs hold the base repository's secrets and a write token while a fork's pull request
# can start them: the simulator runs what the manifests say, so it refuses to run there (tests/test_workflow_forks.py
# keeps the workflows from asking it to).
PRIVILEGED_EVENTS = frozenset({"pull_request_target", "workflow_run", "issue_comment", "pull_request_review",
                               "pull_request_review_comment", "discussion_comment"})


def refuse_privileged_ci() -> None:
    event = os.environ.get("GITHUB_EVENT_NAME", "")
    if os.environ.get("GITHUB_ACTIONS") == "true" and event in PRIVILEGED_EVENTS:
        raise SimulationError(f"refused on a GitHub Actions {event} run: it holds the base repository's secrets and "
                              "a write token, and the code may be a fork's; simulate on pull_request (read-only)")


def positive_seconds(text: str, what: str = "DEADLINE") -> float:
    """A deadline as given on the command line or in DEADLINE: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value <= 7 * 24 * 3600):
        raise SimulationError(f"{what} must be a positive number of seconds (at most a week), got {text!r}")
    return value


def simulate(source: str, run_dir: Path, deadline: float, scale_to: int | None, out: TextIO = sys.stdout,
             fault_spec: str | None = None, pvcs: list[str] | None = None) -> int:
    faults = F.parse(fault_spec) if fault_spec is not None else []
    seeds = pvc.check(pvcs or [], run_dir)  # before anything is written, the run folder emptied included
    units = engine.collect([source], REPO / "overlays")
    if len(units) != 1:
        raise SimulationError(f"{source}: names {len(units)} overlays; simulate one at a time")
    unit = units[0]
    if unit.failed_input:
        first = unit.problems[0]  # the input's own error (file and line), without the report's severity and rule
        raise SimulationError(first.line().removeprefix(f"{first.severity} {first.rule} "))
    manifests = unit.manifests
    # First: whether what the pods will run is the default branch's (provenance.py says what counts).
    unreviewed = provenance.warning(source, [m.obj for m in manifests], REPO)
    if unreviewed:
        print(unreviewed, file=out, flush=True)
    bundle = Bundle.of(manifests)
    reasons = needs_scaling(bundle)
    if reasons and scale_to is None:
        raise SimulationError(f"{source} cannot run on this machine as written: {'; '.join(reasons)}. "
                              f"Set SCALE_TO=<pods> to run it scaled down (1 process per pod, no GPUs, gloo)")
    if scale_to is not None:
        if scale_to < 1:
            raise SimulationError(f"SCALE_TO must be a positive number of pods, got {scale_to}")
        manifests, changes = scale_down(manifests, scale_to)
        print(f"simulate: SCALED DOWN on request to {scale_to} pods; not the overlay as written:", file=out)
        for c in changes:
            print(f"  {c}", file=out)
    # The same static checks `make validate` runs, for the diagnosis.
    check = engine.Unit(source, "overlay", manifests)
    engine.check_policies(check)
    static_problems = [p.line() for p in check.problems if p.severity == ERROR]
    # Pod names resolve under the environment's cluster domain (its clusterDomain; cluster.local without one).
    sim = Simulation(manifests, run_dir, deadline, out, source,
                     cluster_domain=unit.environment.cluster_domain if unit.environment else None)
    fault_run = FaultRun(sim, faults) if faults else None
    # Every input is checked before the run folder is emptied: a refused fault or PVC keeps the last run's results.
    pods = sim.plan()
    if fault_run is not None:
        fault_run.check()
    prepare_run_dir(run_dir)
    for line in pvc.copy(run_dir, seeds):
        print(f"simulate: PVC {line} (copied before the pods start)", file=out)
    print(f"simulate: {source}: {len(pods)} pods; deadline {deadline:.0f} s; run folder {run_dir}", file=out)
    print(f"simulate: {IMAGE_ROOT} is mapped to the checkout {REPO}; volumes to folders under {run_dir} "
          "(emptyDir per pod, each PVC shared by claim name); pod names resolve through libnss_wrapper, only where "
          "a headless Service (or the launcher's own) publishes them", file=out)
    loopback = "the world's own loopback" if sim.sandbox.isolated else "this machine's loopback"
    if sim.network.swrap:
        print("simulate: network: each pod has its own address (libsocket_wrapper, 127.0.0.11 on): a port is open "
              "only at the address of the pod that listens on it; pods that do not train (an etcd) run on the host "
              "network and their declared ports are relayed to their address", file=out)
    else:
        print(f"simulate: network: every pod shares {loopback} network "
              f"({sim.network.host_network_reason}): a port open in one pod answers at every pod's address", file=out)
    print(sim.sandbox.line(), file=out)
    print("simulate: added to each pod's env: LOGLEVEL=INFO (to see who joined), PYTHONUNBUFFERED=1, TMPDIR=<the pod's "
          "/tmp folder> and, where the "
          f"manifest sets no rendezvous config, PET_RDZV_CONF=join_timeout={sim.rdzv_timeout},timeout={sim.rdzv_timeout}"
          " (short rendezvous timeouts, so a world that cannot form fails inside the deadline)", file=out)
    for sp in pods:
        where = f", on the host network at {sp.host_ip}, ports relayed" if sim.network.swrap and sp.host_ip else ""
        print(f"simulate: pod {sp.name} ({sp.ip}, {'trainer' if sp.training else 'service'}{where}): "
              f"{clip(' '.join(sp.argv), 200)}", file=out)
    try:
        result = sim.run(fault_run.run if fault_run is not None else None)
    except Stopped as stop:  # every pod was stopped on the way out (Simulation.run)
        name = signal.Signals(stop.signum).name
        if sim.left:
            print(f"simulate: stopped by {name}; processes of {', '.join(sim.left)} are still running", file=out)
        else:
            print(f"simulate: stopped by {name}; every process of every pod stopped, none left", file=out)
        return 128 + stop.signum
    print(result.report(static_problems), file=out)
    if fault_run is not None:
        print(fault_run.report(check), file=out)
    for line in ask_trainer.report_lines(run_dir):
        print(line, file=out)
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="simulate", description=importlib.import_module(__package__).__doc__)
    ap.add_argument("overlay", help="an overlay folder or a rendered manifest file")
    ap.add_argument("--deadline", default=os.environ.get("DEADLINE") or "180",
                    help="seconds before a world that has not finished is stopped and diagnosed (default 180)")
    ap.add_argument("--scale-to", default=None,
                    help="run an overlay that does not fit this machine at this many pods (1 process each, no GPUs)")
    ap.add_argument("--run-dir", type=Path, default=None, help="where logs and volumes go (default .sim/<overlay>)")
    ap.add_argument("--pvc", action="append", default=[], metavar="CLAIM=FOLDER",
                    help="copy FOLDER into the volume of PVC CLAIM before the pods start (repeatable)")
    ap.add_argument("--fault", default=None, help="faults to inject, e.g. 'kill:1@step=6 term:0@epoch=1' "
                    "(docs/simulate.md; policies/simulate/faults.py)")
    args = ap.parse_args(argv)
    args.overlay = paths.overlay_path(args.overlay)  # kind-cpu/indexed-job as make scale takes it, or overlays/...
    run_dir = args.run_dir or default_run_dir(args.overlay)

    def body() -> int:
        refuse_privileged_ci()
        scale_to = None
        if args.scale_to is not None:
            if not re.fullmatch(r"\s*\d+\s*", args.scale_to) or int(args.scale_to) < 1:
                raise SimulationError(f"SCALE_TO must be a positive number of pods, got {args.scale_to!r}")
            scale_to = int(args.scale_to)
        deadline = positive_seconds(args.deadline)
        for s in STOP_SIGNALS:
            signal.signal(s, stop_on_signal)
        try:
            return simulate(args.overlay, run_dir, deadline, scale_to, fault_spec=args.fault, pvcs=args.pvc)
        except Stopped as stop:  # before any pod started
            return 128 + stop.signum

    return guarded(body, (SimulationError, F.FaultError))
