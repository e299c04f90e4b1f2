"""`make scale` and `make new-run`: change every topology field of one overlay (or its run id) in one step, with
round-trip YAML editing that keeps comments, order and quoting, validated on a copy before anything is written."""
from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from . import launchers, transaction
from .entry import guarded
from .kube import dig, parse_quantity
from .paths import overlay_path

REPO = Path(__file__).resolve().parent.parent
GPU = "nvidia.com/gpu"
# The launchers make scale can edit: those whose module says where a patch holds the topology.
LAUNCHERS = {launcher.id: launcher for launcher in launchers.LAUNCHERS if launcher.scale is not None}
RUN_ID = re.compile(r"run-(\d+)")


class ScaleError(Exception):
    """Bad input or an overlay this command does not understand: one line, nothing written."""


# ---------------------------------------------------------------- round-trip YAML


@dataclass
class YamlFile:
    """One file loaded for round-trip editing, with the dumper settings that reproduce it byte for byte."""

    path: Path
    original: str
    docs: list[Any]
    yaml: YAML

    @classmethod
    def load(cls, path: Path) -> "YamlFile":
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScaleError(f"{rel(path)}: cannot read: {exc.strerror}") from exc
        for seq, offset in ((4, 2), (2, 0)):
            y = YAML()
            y.preserve_quotes = True
            y.width = 4096
            y.indent(mapping=2, sequence=seq, offset=offset)
            try:
                docs = list(y.load_all(text))
            except Exception as exc:  # ruamel raises many types; each is bad YAML
                raise ScaleError(f"{rel(path)}: not valid YAML: {' '.join(str(exc).split())[:200]}") from exc
            f = cls(path, text, docs, y)
            if f.dump() == text:
                return f
        raise ScaleError(f"{rel(path)}: cannot be edited without reformatting it (indentation other than 2 spaces?)")

    def dump(self) -> str:
        out = io.StringIO()
        if len(self.docs) == 1:
            self.yaml.dump(self.docs[0], out)
        else:
            self.yaml.dump_all(self.docs, out)
        return out.getvalue()


def set_scalar(parent: Any, key: Any, value: Any) -> None:
    """Replace a scalar keeping its quoting style (a quoted "8" stays quoted, a plain 8 stays an int)."""
    old = parent[key]
    if isinstance(old, DoubleQuotedScalarString):
        value = DoubleQuotedScalarString(str(value))
    elif isinstance(old, SingleQuotedScalarString):
        value = SingleQuotedScalarString(str(value))
    elif isinstance(old, str):
        value = str(value)
    elif isinstance(old, bool) or not isinstance(old, int):
        raise ScaleError(f"unexpected value {old!r} where a number or string was expected")
    else:
        value = int(value)
    parent[key] = value


# ---------------------------------------------------------------- quantities


# The quantities make scale rewrites (parsed by kube.parse_quantity): a plain decimal number and a unit it can write
# back in the same form (no sign, exponent, n, u, E or Ei).
_WRITABLE_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_FACTOR = {None: Fraction(1), "m": Fraction(1, 1000), "k": Fraction(10**3), "M": Fraction(10**6),
           "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15), "Ki": Fraction(2**10),
           "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40), "Pi": Fraction(2**50)}
_SMALLER = {"Pi": "Ti", "Ti": "Gi", "Gi": "Mi", "Mi": "Ki", "Ki": None, "P": "T", "T": "G", "G": "M", "M": "k",
            "k": None, None: "m"}


def parse_qty(raw: Any) -> tuple[Fraction, str | None]:
    q = parse_quantity(str(raw))
    if q is None or (q.suffix or None) not in _FACTOR or not _WRITABLE_NUMBER.fullmatch(q.number):
        raise ScaleError(f"cannot scale the quantity {raw!r}")
    return q.value, q.suffix or None


def format_qty(value: Fraction, suffix: str | None) -> str:
    """Write `value` in the original unit when it is a whole number of it, else in the next smaller unit that makes
    it whole (Gi -> Mi -> Ki -> bytes; cores -> millicores), rounding only at bytes or millicores."""
    unit = suffix
    while True:
        n = value / _FACTOR[unit]
        if n.denominator == 1:
            return f"{n.numerator}{unit or ''}"
        if unit == "m" or (unit is None and suffix not in (None, "m")):
            return f"{round(n)}{unit or ''}"
        unit = _SMALLER[unit]


def scale_qty(raw: Any, ratio: Fraction) -> str:
    value, suffix = parse_qty(raw)
    return format_qty(value * ratio, suffix)


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


_ROOTS: list[Path] = []  # the repository being edited (--root), for messages relative to it


def rel(path: Path) -> str:
    """A path as the user would write it: relative to the repository being edited, else to the working folder."""
    for base in (*_ROOTS, Path.cwd()):
        try:
            return str(Path(path).resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)


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


def _pointer(path: tuple[Any, ...]) -> str:
    return "/" + "/".join(str(k) for k in path)


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
        if isinstance(doc, list) and any(
                _matches(str(op.get("path", "")), path) for op in doc if isinstance(op, dict)
                for path, _ in launcher.scale.pods):
            return launcher.id
    return None


def _matches(pointer: str, path: tuple[Any, ...]) -> bool:
    """A JSON-patch path against a ScaleSpec path (`*` matches any one key)."""
    parts = pointer.strip("/").split("/")
    return len(parts) == len(path) and all(p == "*" or str(p) == q for p, q in zip(path, parts))


@dataclass
class Current:
    pods: int
    nproc: int
    gpus: int  # per pod
    world: int
    workload: str


def current(ov: Overlay) -> Current:
    from .launchers import Bundle
    from .render import render
    from .topology import compute

    rendered = render(ov.folder)
    if rendered.error:
        raise ScaleError(f"{rel(ov.folder)}: does not render: {rendered.error}")
    topologies, _ = compute(Bundle.of(rendered.manifests))
    if len(topologies) != 1:
        raise ScaleError(f"{rel(ov.folder)}: expected one training workload, found {len(topologies)}")
    t = topologies[0]
    if t.nproc is None or t.pods is None:
        raise ScaleError(f"{rel(ov.folder)}: its processes per pod cannot be worked out (run make validate)")
    return Current(t.pods, t.nproc, t.gpus or 0, t.world_size or t.pods * t.nproc, t.manifest.ref)


# ---------------------------------------------------------------- the edit


@dataclass
class Plan:
    nodes: int
    nproc: int
    gpus: int
    ratio: Fraction  # new per-pod resources / old (GPUs or processes per pod)
    notes: list[str] = field(default_factory=list)


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


def _need(node: Any, what: str, path: Path, *keys: Any) -> Any:
    found = dig(node, *keys)
    if found is None:
        raise ScaleError(f"{rel(path)}: has no {what}; make scale edits the layout the repository's overlays use")
    return found


def _resources(res: Any, p: Plan, path: Path) -> None:
    """requests/limits: GPUs set, CPU and memory scaled by the per-GPU (or per-process) ratio."""
    if not isinstance(res, dict):
        raise ScaleError(f"{rel(path)}: resources is not a mapping")
    for section in ("requests", "limits"):
        block = res.get(section)
        if not isinstance(block, dict):
            continue
        for key in list(block):
            if key == GPU:
                set_scalar(block, key, p.gpus)
            elif key in ("cpu", "memory", "ephemeral-storage") and p.ratio != 1:
                set_scalar(block, key, scale_qty(block[key], p.ratio))


def _env(env: Any, p: Plan, path: Path) -> None:
    if not isinstance(env, list):
        raise ScaleError(f"{rel(path)}: the container has no env list")
    names = {e.get("name"): e for e in env if isinstance(e, dict)}
    for name, value in (("NNODES", p.nodes), ("NPROC_PER_NODE", p.nproc)):
        if name not in names:
            raise ScaleError(f"{rel(path)}: the container sets no {name}")
        set_scalar(names[name], "value", value)


def _walk(node: Any, path: tuple[Any, ...]) -> list[tuple[Any, Any]]:
    """(parent, key) of every place `path` reaches in a strategic-merge patch (`*`: every key of a mapping)."""
    places: list[tuple[Any, Any, Any]] = [(None, None, node)]
    for key in path:
        nxt = []
        for _, _, cur in places:
            if key == "*" and isinstance(cur, dict):
                nxt += [(cur, k, cur[k]) for k in cur]
            elif isinstance(key, int) and isinstance(cur, list) and key < len(cur):
                nxt.append((cur, key, cur[key]))
            elif isinstance(key, str) and isinstance(cur, dict) and key in cur:
                nxt.append((cur, key, cur[key]))
        places = nxt
    return [(parent, key) for parent, key, _ in places]


def edit_topology(f: YamlFile, launcher: str, p: Plan) -> None:
    """Write the plan into a topology patch where the launcher module's ScaleSpec says the pod count, processes per
    pod, container env and resources live: a strategic-merge patch (a mapping) or a JSON patch (a list of ops)."""
    spec = LAUNCHERS[launcher].scale if launcher in LAUNCHERS else None
    if spec is None:
        raise ScaleError(f"make scale does not understand launcher '{launcher}'")
    doc = f.docs[0]
    path = f.path
    pods = [(loc, p.nodes + offset) for loc, offset in spec.pods]
    if isinstance(doc, CommentedSeq):
        seen = set()
        for op in doc:
            target = str(op.get("path", ""))
            for loc, value in pods:
                if _matches(target, loc):
                    set_scalar(op, "value", value)
                    seen.add("replicas")
            for loc in spec.nproc:
                if _matches(target, loc):
                    set_scalar(op, "value", p.nproc)
                    seen.add(str(loc[-1]))
            for loc in spec.resources:
                if _matches(target, loc):
                    _resources(op["value"], p, path)
                    seen.add("resources")
        needs = ["replicas"] + [str(loc[-1]) for loc in spec.nproc] + (["resources"] if spec.resources else [])
        for need in needs:
            if need not in seen:
                raise ScaleError(f"{rel(path)}: has no operation for {need}; make scale edits the layout the "
                                 "repository's overlays use")
        return
    if not isinstance(doc, CommentedMap):
        raise ScaleError(f"{rel(path)}: expected a strategic-merge patch (a mapping) or a JSON patch (a list)")
    def places(loc: tuple[Any, ...]) -> list[tuple[Any, Any]]:
        found = _walk(doc, loc)
        if not found:
            raise ScaleError(f"{rel(path)}: has no {'.'.join(str(k) for k in loc)}; make scale edits the layout "
                             "the repository's overlays use")
        return found

    for loc, value in pods:
        for parent, key in places(loc):
            set_scalar(parent, key, value)
    for loc in spec.nproc:
        for parent, key in places(loc):
            set_scalar(parent, key, p.nproc)
    if spec.env_container is not None:
        parent, key = places(spec.env_container)[0]
        _env(parent[key].get("env"), p, path)
    for loc in spec.resources:
        for parent, key in places(loc):
            _resources(parent[key], p, path)


def edit_shm(f: YamlFile, p: Plan) -> None:
    for op in f.docs[0]:
        if str(op.get("path", "")).endswith("/emptyDir/sizeLimit") and op.get("op") == "replace":
            set_scalar(op, "value", scale_qty(op["value"], p.ratio))


_COMMENT_RULES: list[tuple[re.Pattern[str], Callable[[Plan, re.Match[str]], str]]] = [
    (re.compile(r"\b(\d+) nodes x (\d+) (\w+)"), lambda p, m: f"{p.nodes} nodes x {p.gpus} {m.group(3)}"),
    (re.compile(r"\b(\d+) pods x (\d+) processes"), lambda p, m: f"{p.nodes} pods x {p.nproc} processes"),
    (re.compile(r"\bworld size (\d+)"), lambda p, m: f"world size {p.nodes * p.nproc}"),
    (re.compile(r"\b1 Master \+ (\d+) Worker\(s\)"), lambda p, m: f"1 Master + {p.nodes - 1} Worker(s)"),
    (re.compile(r"\bnprocPerNode (\d+)"), lambda p, m: f"nprocPerNode {p.nproc}"),
]


def edit_header(text: str, p: Plan) -> str:
    """Keep the leading comment lines that state the topology true (`# 4 nodes x 1 T4: world size 4.`)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if not line.startswith("#"):
            break
        for pattern, repl in _COMMENT_RULES:
            line = pattern.sub(lambda m, r=repl: r(p, m), line)
        lines[i] = line
    return "".join(lines)


def bump_run(f: YamlFile, new: str | None) -> tuple[str, str]:
    """Replace the run id in every value of set-run-id.yaml; returns (old, new)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for k, v in list(items):
            if isinstance(v, (dict, list)):
                walk(v)
            elif isinstance(v, str):
                found.update(m.group(0) for m in RUN_ID.finditer(v))
    for d in f.docs:
        walk(d)
    if len(found) != 1:
        raise ScaleError(f"{rel(f.path)}: expected one run id (run-NNN) in it, found {sorted(found) or 'none'}")
    old = found.pop()
    if new is None:
        digits = RUN_ID.match(old).group(1)
        new = f"run-{int(digits) + 1:0{len(digits)}d}"
    if not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", new) or len(new) > 40:
        raise ScaleError(f"RUN_ID '{new}' must be lowercase letters, digits and '-' (it becomes part of object names)")
    if new == old:
        raise ScaleError(f"{rel(f.path)}: the run id is already {old}")

    def sub(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for k, v in list(items):
            if isinstance(v, (dict, list)):
                sub(v)
            elif isinstance(v, str) and old in v:
                set_scalar(node, k, re.sub(rf"\b{re.escape(old)}\b", new, v))
    for d in f.docs:
        sub(d)
    return old, new


# ---------------------------------------------------------------- validate on a copy, then write atomically


def validate_copy(ov: Overlay, changes: dict[Path, str], root: Path) -> list[str]:
    """Render and validate the overlay from a temporary copy of the repository's base/, components/ and
    overlays/ with the changes applied; the error lines (empty when it is clean)."""
    from .engine import collect, validate
    from .model import ERROR
    from .schema import make_validator

    with transaction.scratch() as copy:
        transaction.hook("validating")
        for d in ("base", "components", "overlays"):
            if (root / d).is_dir():
                # Not another overlay's half-done write (its files come and go while this copies).
                shutil.copytree(root / d, copy / d, symlinks=True,
                                ignore=shutil.ignore_patterns(f"*{transaction.TMP_SUFFIX}", transaction.JOURNAL))
        for path, text in changes.items():
            (copy / path.resolve().relative_to(root.resolve())).write_text(text, encoding="utf-8")
        target = copy / ov.folder.resolve().relative_to(root.resolve())
        units = collect([str(target)], target)
        validate(units, make_validator("auto"))
        prefix = str(copy) + os.sep
        return [p.line().replace(prefix, "") for u in units for p in u.problems if p.severity == ERROR]


def write_atomic(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unified(changes: dict[Path, str]) -> str:
    out = []
    for path, text in changes.items():
        old = path.read_text(encoding="utf-8")
        name = rel(path)
        out += difflib.unified_diff(old.splitlines(keepends=True), text.splitlines(keepends=True), f"a/{name}",
                                    f"b/{name}")
    return "".join(out)


def apply(ov: Overlay, changes: dict[Path, str], root: Path, dry_run: bool) -> int:
    changes = {p: t for p, t in changes.items() if p.read_text(encoding="utf-8") != t}
    if not changes:
        print(f"{rel(ov.folder)}: nothing to change")
        return 0
    errors = validate_copy(ov, changes, root)
    if errors:
        print(f"error: {rel(ov.folder)}: the result does not validate, so nothing was written:", file=sys.stderr)
        for line in errors:
            print(f"  {line}", file=sys.stderr)
        return 1
    if dry_run:
        sys.stdout.write(unified(changes))
        print(f"dry run: nothing was written ({len(changes)} file{'s' if len(changes) != 1 else ''} would change)",
              file=sys.stderr)
        return 0
    try:
        transaction.commit(ov.folder, changes)  # every file or none, under the overlay's lock
    except KeyboardInterrupt:
        # Ctrl-C waits for the renames: say whether they had begun (then every file is written) or not (none is).
        done = all(p.read_text(encoding="utf-8") == t for p, t in changes.items())
        print(f"interrupted: {'wrote ' + ', '.join(rel(p) for p in changes) if done else 'nothing was written'}",
              file=sys.stderr)
        raise
    print(f"wrote {', '.join(rel(p) for p in changes)}")
    return 0


def overlay_locked(raw: str, root: Path, dry_run: bool) -> Any:
    """Hold the overlay's lock (a second make scale on it waits for the first, then reads what it wrote) and finish
    what an interrupted run left there first; a dry run finishes nothing, so it refuses a half-written overlay."""
    ov = find_overlay(raw, root)
    transaction.sweep_scratch()
    stack = contextlib.ExitStack()
    stack.enter_context(transaction.locked(ov.folder, say=lambda m: print(m, file=sys.stderr)))
    try:
        if dry_run:
            half_written = transaction.pending(ov.folder)
            if half_written:
                raise ScaleError(half_written)
        else:
            finished = transaction.recover(ov.folder)
            if finished:
                print(f"{rel(ov.folder)}: finished the change an interrupted run began: wrote "
                      f"{', '.join(rel(p) for p in finished)}", file=sys.stderr)
    except BaseException:
        stack.close()
        raise
    return ov, stack


def committed_run_file(ov: Overlay, base: str) -> tuple[str, str | None] | None:
    """(ref, text) of set-run-id.yaml at `base` (else origin/`base`, else HEAD): the run Argo CD runs now;
    text None when the overlay is not on that ref yet. None when git cannot tell (not a repository)."""
    path = ov.run_file.resolve()

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", "-C", str(path.parent), *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
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
    _ROOTS[:] = [root]
    nodes = positive("NODES", args.nodes)
    if nodes is None:
        raise ScaleError("NODES is required, e.g. NODES=8")
    gpus = positive("GPUS_PER_NODE", args.gpus_per_node, allow_zero=True)
    procs = positive("PROCS_PER_NODE", args.procs_per_node)
    ov, lock = overlay_locked(args.overlay, root, args.dry_run)
    with lock:
        return _scale(ov, args, root, nodes, gpus, procs)


def _scale(ov: Overlay, args: argparse.Namespace, root: Path, nodes: int, gpus: int | None,
           procs: int | None) -> int:
    cur = current(ov)
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
    run_note = ""
    if args.new_run:
        run = YamlFile.load(ov.run_file)
        old, new = bump_run(run, args.run_id)
        changes[ov.run_file] = run.dump()
        run_note = f"; run id {old} -> {new}"
    print(f"{rel(ov.folder)}: {cur.pods} -> {p.nodes} pods, {cur.nproc} -> {p.nproc} processes per pod"
          + (f", {cur.gpus} -> {p.gpus} GPUs per pod" if cur.gpus else "")
          + f", world size {cur.world} -> {p.nodes * p.nproc}{run_note}", file=sys.stderr)
    rc = apply(ov, changes, root, args.dry_run)
    if rc == 0 and not args.new_run and ov.run_file.is_file():
        committed = committed_run_file(ov, args.base)
        here = ov.run_file.read_text(encoding="utf-8")
        if committed is not None and committed[1] is None:
            print(f"note: {rel(ov.folder)} is not on {committed[0]} yet: {cur.workload} is not deployed, so it may "
                  "change", file=sys.stderr)
        elif committed is not None and committed[1] != here:
            print(f"note: {cur.workload} is a new run not committed to {committed[0]} yet ({run_ids(committed[1])} "
                  f"there, {run_ids(here)} here): changing it before it is deployed is fine", file=sys.stderr)
        else:
            print(f"note: {cur.workload} cannot be changed in place under Argo CD; start the change as a new run: "
                  f"make new-run OVERLAY={rel(ov.folder).removeprefix('overlays/')} (or pass NEW_RUN=1)",
                  file=sys.stderr)
    return rc


def cmd_new_run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    _ROOTS[:] = [root]
    ov, lock = overlay_locked(args.overlay, root, args.dry_run)
    with lock:
        if not ov.run_file.is_file():
            raise ScaleError(f"{rel(ov.folder)}: has no patches/set-run-id.yaml")
        run = YamlFile.load(ov.run_file)
        old, new = bump_run(run, args.run_id)
        print(f"{rel(ov.folder)}: run id {old} -> {new}", file=sys.stderr)
        return apply(ov, {ov.run_file: run.dump()}, root, args.dry_run)


def cmd_recover(args: argparse.Namespace) -> int:
    """Finish (or clear away) what an interrupted make scale or make new-run left in one overlay."""
    root = Path(args.root).resolve()
    _ROOTS[:] = [root]
    ov, lock = overlay_locked(args.overlay, root, dry_run=False)
    with lock:
        pass  # overlay_locked has finished any pending change and said so
    print(f"{rel(ov.folder)}: no change is pending", file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m policies.scale", description=__doc__)
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
    r = sub.add_parser("recover", help="finish the change an interrupted scale or new-run left in one overlay")
    r.add_argument("overlay", nargs="?", default="")
    r.set_defaults(func=cmd_recover)
    for p in (s, n, r):
        p.add_argument("--root", default=str(REPO), help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return guarded(lambda: args.func(args), (ScaleError, transaction.TransactionError))


if __name__ == "__main__":
    sys.exit(main())
