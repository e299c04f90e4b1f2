"""What `make scale` and `make new-run` write into an overlay's files: the topology in its patch (pod count,
processes per node, resources scaled per GPU or per process, the NNODES / NPROC_PER_NODE env), the /dev/shm size, the
topology comment at the top of a file, and the run id; each edit round-trip (yamledit.py). The overlay, the plan and
the command line are scale.py's."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from ..rules import environment
from .. import launchers
from ..kube.values import SUFFIX_FACTORS, dig, parse_quantity
from .yamledit import EditError, YamlFile, rel, set_scalar

# The launchers make scale can edit: those whose module says where a patch holds the topology.
LAUNCHERS = {launcher.id: launcher for launcher in launchers.LAUNCHERS if launcher.scale is not None}
RUN_ID = re.compile(r"run-(\d+)")


class ScaleError(EditError):
    """Bad input or an overlay this command does not understand: one line, nothing written."""


# The quantities make scale rewrites (parsed by kube.parse_quantity): a plain decimal number and a unit it can write
# back in the same form (no sign, exponent, n, u, E or Ei).
_WRITABLE_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_FACTOR: dict[str | None, Fraction] = {None: Fraction(1), **{u: SUFFIX_FACTORS[u] for u in (
    "m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "Pi")}}
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


@dataclass
class Plan:
    nodes: int
    nproc: int
    gpus: int
    ratio: Fraction  # new per-pod resources / old (GPUs or processes per pod)
    notes: list[str] = field(default_factory=list)



def _resources(res: Any, p: Plan, path: Path) -> None:
    """requests/limits: GPUs set (under the resource name the patch already uses), CPU and memory scaled by the
    per-GPU (or per-process) ratio."""
    if not isinstance(res, dict):
        raise ScaleError(f"{rel(path)}: resources is not a mapping")
    for section in ("requests", "limits"):
        block = res.get(section)
        if not isinstance(block, dict):
            continue
        gpus = launchers.gpu_resources(block)
        for key in list(block):
            if key in gpus:
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
        nxt: list[tuple[Any, Any, Any]] = []
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
                if matches(target, loc):
                    set_scalar(op, "value", value)
                    seen.add("replicas")
            for loc in spec.nproc:
                if matches(target, loc):
                    set_scalar(op, "value", p.nproc)
                    seen.add(str(loc[-1]))
            for loc in spec.resources:
                if matches(target, loc):
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


COMMENT_RULES: list[tuple[re.Pattern[str], Callable[[Plan, re.Match[str]], str]]] = [
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
        for pattern, repl in COMMENT_RULES:
            line = pattern.sub(lambda m: repl(p, m), line)  # called here, in this iteration
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
        found_id = RUN_ID.match(old)
        assert found_id is not None  # `old` is a RUN_ID match
        digits = found_id.group(1)
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


def matches(pointer: str, path: tuple[Any, ...]) -> bool:
    """A JSON-patch path against a ScaleSpec path (`*` matches any one key)."""
    parts = pointer.strip("/").split("/")
    return len(parts) == len(path) and all(p == "*" or str(p) == q for p, q in zip(path, parts))


def pod_losses(folder: Path) -> int:
    """The pod losses the overlay's environment asks every training workload to survive (its declaration's
    podLosses, read by environment.for_overlay as validation reads it; 0 where there is no declaration or it declares
    none). A declaration the loader refuses is its first error, one line: nothing is written."""
    env, problems = environment.for_overlay(folder)
    if problems:
        first = problems[0]
        where = f"{rel(Path(first.location[0]))}:{first.location[1]}" if first.location else rel(Path(first.source))
        raise ScaleError(f"{where}: {first.message}" + (f" (fix: {first.hint})" if first.hint else ""))
    return (env.pod_losses or 0) if env is not None else 0


def edit_restart_budget(folder: Path, launcher: str, pods: int, losses: int) -> dict[Path, str]:
    """The overlay's patches that write the launcher's restart budget (Launcher.restart_budget_path), set to
    losses x pods + 1, with the figures of their comments; {} where none does or nothing changes."""
    path = getattr(launchers.BY_ID.get(launcher), "restart_budget_path", None)
    if path is None or losses < 1:
        return {}
    want = losses * pods + 1
    out: dict[Path, str] = {}
    for patch in sorted((folder / "patches").glob("*.yaml")):
        f = YamlFile.load(patch)
        ops = f.docs[0] if f.docs else None
        if not isinstance(ops, CommentedSeq):
            continue
        hit = [op for op in ops if isinstance(op, CommentedMap) and op.get("path") == path
               and op.get("op") in ("add", "replace") and isinstance(op.get("value"), int)]
        if not hit or all(op["value"] == want for op in hit):
            continue
        for op in hit:
            op["value"] = want
        text = f.dump()
        text = re.sub(r"(?m)^(#.*?)\b\d+( per lost pod)", lambda m: f"{m.group(1)}{pods}{m.group(2)}", text)
        text = re.sub(r"(?m)^(#.*?backoffLimit )\d+( survives)", lambda m: f"{m.group(1)}{want}{m.group(2)}", text)
        out[patch] = text
    return out
