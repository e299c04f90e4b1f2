"""`make scale` and `make new-run`: change every topology field of one overlay (or its run id) in one step, with
round-trip YAML editing that keeps comments, order and quoting (yamledit.py). The change goes through the one edit
pipeline (policies/edit/pipeline.py) with the overlay as its scope: validated on a copy before anything is written, then
every file written or none (policies/render/transaction.py); `make recover` is the pipeline's recovery alone."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import pipeline as edit, repo_edit
from ..render import transaction
from ..entry import guarded
from ..git import GitError, run as run_git
from ..render.paths import overlay_path
from .scale_edits import (LAUNCHERS, RUN_ID, Plan, ScaleError, bump_run, edit_header, edit_restart_budget, edit_shm,
                          edit_topology, matches, pod_losses)
from .yamledit import EditError, YamlFile, edit_relative_to, rel
from ..render.paths import REPO

if TYPE_CHECKING:
    from ..launchers.base import MpiWorld



# ---------------------------------------------------------------- the overlay and its current topology


@dataclass
class Overlay:
    folder: Path
    env: str
    launcher: str

    @property
    def topology_file(self) -> Path:
        return self.folder / "patches" / "set-topology.yaml"

    @property
    def run_file(self) -> Path:
        return self.folder / "patches" / "set-run-id.yaml"

    @property
    def shm_file(self) -> Path:
        return self.folder / "patches" / "set-shm.yaml"

    @property
    def kustomization(self) -> Path:
        return self.folder / "kustomization.yaml"


def find_overlay(raw: str, root: Path = REPO) -> Overlay:
    if not raw:
        raise ScaleError("OVERLAY is required, e.g. OVERLAY=gke-t4/indexed-job")
    folder = Path(overlay_path(raw, root, inside=True)).resolve()
    if not (folder / "kustomization.yaml").is_file() or root.resolve() not in folder.parents:
        raise ScaleError(f"OVERLAY '{raw}' is not an overlay folder (overlays/<environment>/<launcher> with a "
                         "kustomization.yaml)")
    env = folder.parent.name
    patch = folder / "patches" / "set-topology.yaml"
    if not patch.is_file():
        raise ScaleError(f"{rel(folder)}: not an overlay make scale understands: it has no patches/set-topology.yaml")
    launcher = folder.name if folder.name in LAUNCHERS else _launcher_of(patch)
    if launcher is None:
        raise ScaleError(f"{rel(patch)}: patches a kind make scale does not understand (it edits "
                         f"{', '.join(sorted(l.kind for l in LAUNCHERS.values()))})")
    return Overlay(folder, env, launcher)



def _launcher_of(patch: Path) -> str | None:
    """The launcher a set-topology.yaml patches, for overlays whose folder is not named after it: a strategic-merge
    patch names its kind; a JSON patch is recognised by the paths its launcher's ScaleSpec edits."""
    import yaml

    try:
        doc = yaml.safe_load(patch.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    for launcher in LAUNCHERS.values():
        if isinstance(doc, dict) and str(doc.get("kind")) == launcher.kind:
            return launcher.id
        spec = launcher.scale
        assert spec is not None  # LAUNCHERS holds the launchers that have one
        if isinstance(doc, list) and any(
                matches(str(op.get("path", "")), path) for op in doc if isinstance(op, dict)
                for path, _ in spec.pods):
            return launcher.id
    return None


@dataclass
class Current:
    pods: int
    nproc: int
    gpus: int  # per pod
    world: int
    workload: str
    # Where the pods form mpirun's world (Launcher.mpi_world): `pods` and `nproc` are its hosts and slots, and this
    # the world, to say the pods created (the launcher too) and the hosts a node count gives.
    mpi: MpiWorld | None = None


def current(ov: Overlay) -> Current:
    from ..launchers import Bundle
    from ..render.render import render
    from ..model.topology import resolve

    rendered = render(ov.folder)
    if rendered.error:
        raise ScaleError(f"{rel(ov.folder)}: does not render: {rendered.error}")
    found = resolve(Bundle.of(rendered.manifests))
    topologies = found.topologies
    mpi = [(u.workload, world) for u in found.undetermined
           for world in [u.workload.launcher.mpi_world(u.workload)] if world is not None]
    if not topologies and len(mpi) == 1:
        # mpirun's world, as the workload's controller lays it out: NODES is its hosts, the processes its slots.
        w, world = mpi[0]
        hosts = len(world.hosts)
        return Current(hosts, world.slots, world.gpus, hosts * world.slots, w.manifest.ref, world)
    if len(topologies) != 1:
        raise ScaleError(f"{rel(ov.folder)}: expected one training workload, found {len(topologies)}")
    t = topologies[0]
    if t.nproc is None or t.pods is None:
        raise ScaleError(f"{rel(ov.folder)}: its processes per pod cannot be worked out (run make validate)")
    return Current(t.pods, t.nproc, t.gpus or 0, t.world_size or t.pods * t.nproc, t.manifest.ref)


# ---------------------------------------------------------------- the edit


def positive(name: str, raw: str | None, allow_zero: bool = False) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ScaleError(f"{name} must be a whole number, got '{raw}'") from None
    if value < 0 or (value == 0 and not allow_zero):
        raise ScaleError(f"{name} must be {'0 or more' if allow_zero else 'at least 1'}, got {value}")
    return value


def plan(ov: Overlay, cur: Current, nodes: int, gpus: int | None, procs: int | None) -> Plan:
    if cur.gpus:
        if gpus is None:
            gpus = cur.gpus
        if gpus == 0:
            raise ScaleError(f"{rel(ov.folder)} runs on GPUs ({cur.gpus} per pod): GPUS_PER_NODE must be at least 1")
        if procs is not None and procs != gpus:
            raise ScaleError(f"PROCS_PER_NODE={procs} differs from GPUS_PER_NODE={gpus}: on GPU nodes torchrun starts "
                             "one process per GPU")
        return Plan(nodes, gpus, gpus, Fraction(gpus, cur.gpus))
    if gpus:
        raise ScaleError(f"{rel(ov.folder)} has no GPUs (environment {ov.env}): leave GPUS_PER_NODE out or 0, and set "
                         "PROCS_PER_NODE")
    nproc = procs if procs is not None else cur.nproc
    return Plan(nodes, nproc, 0, Fraction(nproc, cur.nproc))


# ---------------------------------------------------------------- the overlay as the scope of one edit


def scope(ov: Overlay) -> edit.Scope:
    """The overlay as the scope of one edit (policies/edit/pipeline.py): its own lock and journal, so a second make scale on it
    waits for the first, then reads what it wrote, and make scale on another overlay runs alongside."""
    name = rel(ov.folder)
    return edit.Scope(folder=ov.folder, locks=(edit.Lock(ov.folder),), name=name,
                      half_written=lambda: transaction.pending(ov.folder) or "", shown=rel, error=ScaleError,
                      words=edit.Words(line_per_file=False, interrupted_names_files=True, finished_prefix=f"{name}: ",
                                       finished_verb_per_file=False))


def validate_copy(ov: Overlay, changes: dict[Path, str | None], root: Path) -> list[str]:
    """make scale's and make new-run's validator: render and validate the overlay from a temporary copy of the
    repository's base/, components/ and overlays/ with the changes applied; the error lines (empty when it is
    clean)."""
    from ..report.engine import collect, validate
    from ..kube.objects import ERROR
    from ..schema import make_validator

    with transaction.scratch() as copy:
        transaction.hook("validating")
        for d in ("base", "components", "overlays"):
            if (root / d).is_dir():
                # Not another overlay's half-done write (its files come and go while this copies).
                shutil.copytree(root / d, copy / d, symlinks=True,
                                ignore=shutil.ignore_patterns(f"*{transaction.TMP_SUFFIX}", transaction.JOURNAL))
        for path, text in changes.items():
            target = copy / path.resolve().relative_to(root.resolve())
            if text is None:
                target.unlink(missing_ok=True)
            else:
                target.write_text(text, encoding="utf-8")
        target = copy / ov.folder.resolve().relative_to(root.resolve())
        units = collect([str(target)], target)
        validate(units, make_validator("auto"))
        prefix = str(copy) + os.sep
        return [p.line().replace(prefix, "") for u in units for p in u.problems if p.severity == ERROR]


def edit_overlay(ov: Overlay, root: Path, plan: edit.Plan | None, dry_run: bool) -> int:
    """One edit of the overlay through the pipeline: locked, recovered (or refused on a dry run), planned, validated
    on a copy, then the diff or every file written or none."""
    return edit.apply(scope(ov), plan, lambda changes: validate_copy(ov, changes, root), dry_run)


def committed_run_file(ov: Overlay, base: str) -> tuple[str, str | None] | None:
    """(ref, text) of set-run-id.yaml at `base` (else origin/`base`, else HEAD): the run Argo CD runs now;
    text None when the overlay is not on that ref yet. None when git cannot tell (not a repository)."""
    path = ov.run_file.resolve()

    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return run_git(path.parent, *args, timeout=60)
        except GitError:
            return None

    # A branch this clone has only as origin/<branch> (a clone of another branch has no local main) is read there,
    # as `make diff` reads BASE (diff.resolve_ref).
    tracked = [f"origin/{base}"] if base and "/" not in base else []
    for ref in dict.fromkeys((base, *tracked, "HEAD")):
        known = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if known is None:
            return None
        if known.returncode == 0:
            shown = git("show", f"{ref}:./{path.name}")
            return ref, (shown.stdout if shown is not None and shown.returncode == 0 else None)
    return None


def run_ids(text: str) -> str:
    return "/".join(sorted({m.group(0) for m in RUN_ID.finditer(text)})) or "another run id"


def cmd_scale(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    edit_relative_to(root)
    nodes = positive("NODES", args.nodes)
    if nodes is None:
        raise ScaleError("NODES is required, e.g. NODES=8")
    gpus = positive("GPUS_PER_NODE", args.gpus_per_node, allow_zero=True)
    procs = positive("PROCS_PER_NODE", args.procs_per_node)
    ov = find_overlay(args.overlay, root)
    planned: list[Current] = []
    rc = edit_overlay(ov, root, lambda _session: _scale(ov, args, root, nodes, gpus, procs, planned), args.dry_run)
    if rc == 0 and planned and not args.new_run and ov.run_file.is_file():
        _run_note(ov, args, planned[0])
    return rc


def _scale(ov: Overlay, args: argparse.Namespace, root: Path, nodes: int, gpus: int | None,
           procs: int | None, planned: list[Current]) -> dict[Path, str]:
    """make scale's plan (run under the overlay's lock, after any recovery); the overlay's topology before it is
    added to `planned`."""
    cur = current(ov)
    planned.append(cur)
    p = plan(ov, cur, nodes, gpus, procs)
    changes: dict[Path, str] = {}
    topo = YamlFile.load(ov.topology_file)
    edit_topology(topo, ov.launcher, p)
    changes[ov.topology_file] = edit_header(topo.dump(), p)
    changes[ov.kustomization] = edit_header(ov.kustomization.read_text(encoding="utf-8"), p)
    if ov.shm_file.is_file() and p.ratio != 1:
        shm = YamlFile.load(ov.shm_file)
        edit_shm(shm, p)
        changes[ov.shm_file] = shm.dump()
    changes.update(edit_restart_budget(ov.folder, ov.launcher, p.nodes, pod_losses(ov.folder)))
    run_note = ""
    if args.new_run:
        run = YamlFile.load(ov.run_file)
        old, new = bump_run(run, args.run_id)
        changes[ov.run_file] = run.dump()
        run_note = f"; run id {old} -> {new}"
    if cur.mpi is not None:
        # The node count written is the hosts' count except with the Trainer's runLauncherAsNode at 1 (2 hosts).
        hosts = cur.mpi.hosts_for(p.nodes)
        print(f"{rel(ov.folder)}: mpirun's world: {cur.pods} -> {hosts} hosts ({cur.mpi.pods} -> "
              f"{cur.mpi.pods_for(p.nodes)} pods with the launcher), {cur.nproc} -> {p.nproc} slots per host"
              + (f", {cur.gpus} -> {p.gpus} GPUs per host" if cur.gpus else "")
              + f", {cur.world} -> {hosts * p.nproc} ranks{run_note}; an -np written in the launcher's command is "
              "not edited (make validate checks it against the slots)", file=sys.stderr)
        return changes
    print(f"{rel(ov.folder)}: {cur.pods} -> {p.nodes} pods, {cur.nproc} -> {p.nproc} processes per pod"
          + (f", {cur.gpus} -> {p.gpus} GPUs per pod" if cur.gpus else "")
          + f", world size {cur.world} -> {p.nodes * p.nproc}{run_note}", file=sys.stderr)
    return changes


def _run_note(ov: Overlay, args: argparse.Namespace, cur: Current) -> None:
    """After make scale without a new run: whether its workload may change in place (not deployed yet) or not."""
    committed = committed_run_file(ov, args.base)
    here = ov.run_file.read_text(encoding="utf-8")
    if committed is not None and committed[1] is None:
        print(f"note: {rel(ov.folder)} is not on {committed[0]} yet: {cur.workload} is not deployed, so it may "
              "change", file=sys.stderr)
    elif committed is not None and committed[1] is not None and committed[1] != here:  # (None: the branch above)
        print(f"note: {cur.workload} is a new run not committed to {committed[0]} yet ({run_ids(committed[1])} "
              f"there, {run_ids(here)} here): changing it before it is deployed is fine", file=sys.stderr)
    else:
        print(f"note: {cur.workload} cannot be changed in place under Argo CD; start the change as a new run: "
              f"make new-run OVERLAY={rel(ov.folder).removeprefix('overlays/')} (or pass NEW_RUN=1)",
              file=sys.stderr)


def cmd_new_run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    edit_relative_to(root)
    ov = find_overlay(args.overlay, root)

    def new_run(_session: edit.Session) -> dict[Path, str]:
        if not ov.run_file.is_file():
            raise ScaleError(f"{rel(ov.folder)}: has no patches/set-run-id.yaml")
        run = YamlFile.load(ov.run_file)
        old, new = bump_run(run, args.run_id)
        print(f"{rel(ov.folder)}: run id {old} -> {new}", file=sys.stderr)
        return {ov.run_file: run.dump()}

    return edit_overlay(ov, root, new_run, args.dry_run)


def cmd_recover(args: argparse.Namespace) -> int:
    """Finish (or clear away) what an interrupted make scale or make new-run left in one overlay: the pipeline's
    first steps alone (lock, recover, say what it finished)."""
    root = Path(args.root).resolve()
    edit_relative_to(root)
    if not args.overlay.strip():  # the repository's own journal (and the image pinning's in components/)
        edit.apply(repo_edit.scope(root, "recover"), None, None, dry_run=False)
        print("the repository: no change is pending (make recover OVERLAY=<env>/<launcher> finishes an overlay's)",
              file=sys.stderr)
        return 0
    ov = find_overlay(args.overlay, root)
    edit_overlay(ov, root, None, dry_run=False)
    print(f"{rel(ov.folder)}: no change is pending", file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m policies.edit.scale", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("scale", help="change the pods, processes, GPUs and resources of one overlay")
    s.add_argument("overlay", nargs="?", default="", help="overlays/<env>/<launcher> or <env>/<launcher>")
    s.add_argument("--nodes", help="pods (nodes) in the world")
    s.add_argument("--gpus-per-node", help="GPUs per pod; one process per GPU (0 or unset on CPU overlays)")
    s.add_argument("--procs-per-node", help="processes per pod on CPU overlays")
    s.add_argument("--new-run", action="store_true", help="also bump the run id (a new workload under Argo CD)")
    s.add_argument("--run-id", help="with --new-run: the new run id (default: the next run-NNN)")
    s.add_argument("--dry-run", action="store_true", help="print the unified diff, write nothing")
    s.set_defaults(func=cmd_scale)
    n = sub.add_parser("new-run", help="bump the run id of one overlay (its workload's name and RUN_ID)")
    n.add_argument("overlay", nargs="?", default="")
    n.add_argument("--run-id", help="the new run id (default: the next run-NNN)")
    n.add_argument("--dry-run", action="store_true", help="print the unified diff, write nothing")
    n.set_defaults(func=cmd_new_run)
    s.add_argument("--base", default="main", help="the git ref Argo CD deploys, to tell a run id not merged yet from "
                   "the running one (default: main, else HEAD)")
    r = sub.add_parser("recover", help="finish the change an interrupted scale or new-run left in one overlay; "
                                       "without one, what an interrupted init, new-env, remove-env or image pinning "
                                       "left in the repository")
    r.add_argument("overlay", nargs="?", default="")
    r.set_defaults(func=cmd_recover)
    for p in (s, n, r):
        p.add_argument("--root", default=str(REPO), help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return guarded(lambda: args.func(args), (EditError, transaction.TransactionError))


if __name__ == "__main__":
    sys.exit(main())
