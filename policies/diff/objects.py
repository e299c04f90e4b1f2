"""`make diff`'s comparison of two rendered sides: objects added, removed and changed (leaf differences, lists of
named items matched by name), a new run told apart from a new object, fields the controller never updates, and the
torchrun world of each overlay before and after."""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from .. import launchers
from ..kube.values import group_of
from ..kube.objects import Manifest
from ..schema.cel_transition import has_transition_rules, transition_problems
from .trees import Key, Side, key, ref


def changes(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Leaf differences as (dotted path, old, new); lists of named items are matched by name."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in old:
                out.append((p, None, new[k]))
            elif k not in new:
                out.append((p, old[k], None))
            else:
                out += changes(old[k], new[k], p)
        return out
    if isinstance(old, list) and isinstance(new, list):
        named = all(isinstance(x, dict) and "name" in x for x in old + new)
        if named and len({x["name"] for x in old}) == len(old) and len({x["name"] for x in new}) == len(new):
            o, n = {x["name"]: x for x in old}, {x["name"]: x for x in new}
            out = []
            for name in list(o) + [x for x in n if x not in o]:
                out += changes(o.get(name), n.get(name), f"{path}[{name}]")
            return out
        if len(old) == len(new):
            out = []
            for i, (a, b) in enumerate(zip(old, new)):
                out += changes(a, b, f"{path}[{i}]")
            return out
    return [] if old == new else [(path, old, new)]


def short(value: Any, skip: int = 0) -> str:
    """The value in at most 60 characters; `skip` leaves out (as "...") that many characters at its start."""
    if value is None:
        return "(none)"
    text = json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else str(value)
    if len(text) <= 60:
        return text
    if skip:
        text = "..." + text[skip:]
    return text if len(text) <= 60 else text[:57] + "..."


def short_pair(old: Any, new: Any) -> tuple[str, str]:
    """Both sides of a change, each in at most 60 characters (63 with a leading "..."): long values that share their
    start begin shortly before the first character that differs, so the difference is on the line."""
    texts = [json.dumps(v, separators=(",", ":")) if isinstance(v, (dict, list)) else str(v) for v in (old, new)]
    skip = 0
    if None not in (old, new) and max(map(len, texts)) > 60:
        same = len(os.path.commonprefix(texts))
        skip = max(0, same - 20) if same > 40 else 0
    return short(old, skip if len(texts[0]) > 60 else 0), short(new, skip if len(texts[1]) > 60 else 0)


# Fields that cannot be changed in place, or whose change the controller does not apply to a running workload:
# each launcher module says which (Launcher.immutable).
# Keyed by API group and kind: two groups can share a kind (batch Job, Volcano's Job).
IMMUTABLE = {gk: launcher.immutable for launcher in launchers.LAUNCHERS for gk in launcher.kinds if launcher.immutable}


def immutable_hits(api_version: str, kind: str, diffs: list[tuple[str, Any, Any]]) -> list[str]:
    prefixes = IMMUTABLE.get((group_of(api_version), kind), ())
    return sorted({p.split("[")[0] for p, _, _ in diffs if any(p == x or p.startswith(x + ".") or
                                                             p.startswith(x + "[") for x in prefixes)})


@dataclass
class World:
    pods: int = 0
    procs: str = "?"
    world: int | None = 0
    gpus: int = 0


def world_of(objs: dict[Key, Manifest]) -> World | None:
    """The training worlds the objects start, summed: pods, processes and GPUs in use at once (a Katib
    Experiment's trial job counted once per trial it runs at the same time, as `make validate` models it)."""
    from ..launchers import Bundle, expand
    from ..model.topology import compute

    manifests, children, _ = expand(list(objs.values()))
    topologies, _ = compute(Bundle.of(manifests, children))
    if not topologies:
        return None
    w = World()
    procs = set()
    for t in topologies:
        copies = t.workload.copies
        w.pods += (t.pods or 0) * copies
        procs.add(str(t.nproc) if t.nproc is not None else "?")
        w.world = None if (w.world is None or t.world_size is None) else w.world + t.world_size * copies
        w.gpus += (t.gpus or 0) * (t.pods or 0) * copies
    w.procs = "/".join(sorted(procs))
    return w


@dataclass
class OverlayDiff:
    path: str
    app: str | None
    status: str  # "added" | "removed" | "changed" | "unchanged" | "error"
    added: list[Key] = field(default_factory=list)
    removed: list[Key] = field(default_factory=list)
    changed: list[tuple[Key, list[tuple[str, Any, Any]], str]] = field(default_factory=list)
    # A new run's workload against the one it replaces: (old key, new key, differences, unified diff), the run id's
    # own renaming left out.
    renamed: list[tuple[Key, Key, list[tuple[str, Any, Any]], str]] = field(default_factory=list)
    topology: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


def compare(base: Side, head: Side) -> list[OverlayDiff]:
    out: list[OverlayDiff] = []
    for path in sorted(set(base.objects) | set(head.objects) | set(base.errors) | set(head.errors)):
        app = head.apps.get(path) or base.apps.get(path)
        if path in head.errors:
            out.append(OverlayDiff(path, app, "error", error=f"does not render at {head.label}: {head.errors[path]}"))
            continue
        old, new = base.objects.get(path), head.objects.get(path)
        if old is None and path in base.errors:
            old = {}
        d = OverlayDiff(path, app, "added" if old is None else "removed" if new is None else "unchanged")
        old, new = old or {}, new or {}
        d.added = sorted(k for k in new if k not in old)
        d.removed = sorted(k for k in old if k not in new)
        for k in sorted(k for k in new if k in old):
            diffs = changes(old[k].obj, new[k].obj)
            if diffs:
                d.changed.append((k, diffs, unified_yaml(old[k].obj, new[k].obj, ref(k))))
                hits = immutable_hits(k[0], k[1], diffs)
                transition = transition_problems(old[k].obj, new[k].obj)  # the CRD's own rules that read oldSelf
                refused = transition.refused
                if transition.unchecked:
                    d.warnings.append(f"{ref(k)} {'; '.join(transition.unchecked)} (its CRD's transition rule, not "
                                      "checked here): the API server decides whether this change to the existing "
                                      "object is admitted (kubectl apply --dry-run=server)")
                if refused:
                    d.warnings.append(f"{ref(k)} {'; '.join(refused)} (its CRD's transition rule): the API server "
                                      "refuses this change to the existing object; start a new run"
                                      + (f": make new-run OVERLAY={path.removeprefix('overlays/')}" if app else ""))
                elif hits and app:
                    more = f" and {len(hits) - 3} more" if len(hits) > 3 else ""
                    d.warnings.append(f"{ref(k)} changes {', '.join(hits[:3])}{more} under the same name: Argo CD cannot "
                                      f"apply that to the existing object (immutable, or not restarted by its "
                                      f"operator); start a new run: make new-run OVERLAY={path.removeprefix('overlays/')}")
        if d.status == "unchanged" and (d.added or d.removed or d.changed):
            d.status = "changed"
        d.topology = topology_change(world_of(old) if old else None, world_of(new) if new else None)
        for a, r in successors(d.added, d.removed):
            d.topology.append(f"new run: {ref(r)} -> {a[3]}")
            before = renamed_as(old[r].obj, r[3], a[3])
            diffs = changes(before, new[a].obj)
            d.renamed.append((r, a, diffs, unified_yaml(before, new[a].obj, ref(a), ref(r)) if diffs else ""))
        out.append(d)
    return out


def successors(added: list[Key], removed: list[Key]) -> list[tuple[Key, Key]]:
    """(new, old) workloads that are one run after another: same apiVersion, kind and namespace, a kind that cannot
    change in place; each old workload paired once, in order."""
    pairs, taken = [], set()
    for r in removed:
        if (group_of(r[0]), r[1]) not in IMMUTABLE and not has_transition_rules(r[0], r[1]):
            continue
        for a in added:
            if a[:3] == r[:3] and a not in taken:
                pairs.append((a, r))
                taken.add(a)
                break
    return pairs


def renamed_as(obj: Any, old_name: str, new_name: str) -> Any:
    """`obj` with its run id renamed as the new run's (`ddp-train-run-001` -> `ddp-train-run-002` renames every
    whole-word `run-001`), so what is left to compare is what the new run changes besides its name."""
    import re

    prefix = 0
    for x, y in zip(old_name, new_name):
        if x != y:
            break
        prefix += 1
    cut = old_name.rfind("-", 0, prefix) + 1  # back to a word boundary: run-001 -> run-002, not 1 -> 2
    old_id, new_id = old_name[cut:], new_name[cut:]
    if not old_id:
        return obj
    pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(old_id)}(?![A-Za-z0-9])")

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {walk(k): walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return pattern.sub(new_id, node) if isinstance(node, str) else node
    return walk(obj)


def topology_change(old: World | None, new: World | None) -> list[str]:
    if old is None:
        return [] if new is None else [
            f"new: {new.pods} pods x {new.procs} processes, world size {new.world}, GPUs {new.gpus}"]
    if new is None:
        return [f"removed: was {old.pods} pods x {old.procs} processes, world size {old.world}, GPUs {old.gpus}"]
    parts = []
    for label, a, b in (("world size", old.world, new.world), ("GPUs", old.gpus, new.gpus),
                        ("pods", old.pods, new.pods), ("processes per pod", old.procs, new.procs)):
        if a != b:
            parts.append(f"{label} {a if a is not None else '?'} -> {b if b is not None else '?'}")
    return [", ".join(parts)] if parts else []


def unified_yaml(old: dict[str, Any], new: dict[str, Any], name: str, old_name: str | None = None) -> str:
    a = yaml.safe_dump(old, sort_keys=False).splitlines(keepends=True)
    b = yaml.safe_dump(new, sort_keys=False).splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{old_name or name}", f"b/{name}", n=2))
