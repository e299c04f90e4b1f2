"""`make diff BASE=<ref>`: render every overlay (and argocd/) at a git ref and in the working tree (or a second ref)
with the same code, and say what changes: objects added, removed and changed, and the torchrun topology per overlay.
The pull-request workflow posts the markdown form as a comment."""
from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from . import git, launchers
from .entry import guarded
from .kube import group_of
from .schema.cel import has_transition_rules, transition_problems
from .model import Manifest

REPO = Path(__file__).resolve().parent.parent
MARKER = "<!-- ddp-gitops-diff -->"
Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name


class DiffError(Exception):
    """A ref that does not exist, a repository that is not one: one line, exit 2."""


# ---------------------------------------------------------------- trees


def _rev(root: Path, ref: str) -> str:
    proc = git.run(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", timeout=60)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def resolve_ref(root: Path, ref: str, what: str) -> tuple[str, str]:
    """(the ref as shown, its commit): a branch this clone has only as origin/<branch> (a clone of another
    branch has no local main) is read there, as `git checkout <branch>` would, and shown as origin/<branch>."""
    if ref and not _rev(root, ref) and "/" not in ref and _rev(root, f"origin/{ref}"):
        ref = f"origin/{ref}"
    return ref, resolve(root, ref, what)


def resolve(root: Path, ref: str, what: str) -> str:
    if not ref:
        raise DiffError(f"{what} is empty: give a git ref, e.g. {what}=main")
    sha = _rev(root, ref)
    if not sha:
        if git.run(root, "rev-parse", "--git-dir").returncode != 0:
            raise DiffError(f"{root} is not a git repository, so {what}={ref} cannot be read")
        raise DiffError(f"{what}={ref} is not a commit in this repository (try `git fetch`, or a branch, tag or sha)")
    return sha


def export(root: Path, sha: str, dest: Path) -> Path:
    """The tree of a commit, unpacked under dest (git archive: no worktree, nothing in .git changes)."""
    data = git.output(root, "archive", "--format=tar", sha, binary=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


# ---------------------------------------------------------------- rendering one side


@dataclass
class Side:
    label: str
    root: Path
    objects: dict[str, dict[Key, Manifest]] = field(default_factory=dict)  # overlay -> key -> object
    errors: dict[str, str] = field(default_factory=dict)
    apps: dict[str, str] = field(default_factory=dict)  # overlay path -> Application name


def build_options(root: Path) -> list[str]:
    """This side's gitops.yaml build options (a pull request may change them), else none."""
    from . import gitops

    path = root / "gitops.yaml"
    if not path.is_file():
        return []
    try:
        return gitops.build_options(path)
    except gitops.ConfigError:
        return []


def folders(root: Path) -> list[str]:
    from .kustomization import find_overlays

    found = [str(p.relative_to(root)) for p in find_overlays(root / "overlays")] if (root / "overlays").is_dir() else []
    if (root / "argocd" / "kustomization.yaml").is_file():
        found.append("argocd")
    return sorted(found)


def render_side(side: Side) -> Side:
    """Render every folder of one side through the one render (and its cache), with that side's build options."""
    from .render import render_all

    todo = folders(side.root)
    for rel, r in zip(todo, render_all([side.root / rel for rel in todo], options=build_options(side.root))):
        if r.error is not None:
            side.errors[rel] = r.error
            continue
        manifests = [Manifest(m.obj, rel, m.index) for m in r.manifests]
        if rel == "argocd":
            manifests = manifests + generated_apps(manifests, side)
        side.objects[rel] = {key(m): m for m in manifests}
    return side


def generated_apps(manifests: list[Manifest], side: Side) -> list[Manifest]:
    """The Applications the ApplicationSets generate, diffed like objects (a changed launcher shows here)."""
    from .argocd import applications

    apps, _ = applications(manifests)
    out = []
    for a in apps:
        if a.element is None:
            path = (a.spec.get("source") or {}).get("path")
        else:
            path = (a.spec.get("source") or {}).get("path")
            out.append(Manifest(a.obj, f"{a.manifest.ref} {a.field}"))
        if isinstance(path, str):
            side.apps[path.strip("/")] = a.name
    return out


def key(m: Manifest) -> Key:
    return (m.api_version, m.kind, m.namespace, m.name)


def ref(k: Key) -> str:
    return f"{k[1]}/{k[2]}/{k[3]}" if k[2] else f"{k[1]}/{k[3]}"


# ---------------------------------------------------------------- comparing


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
    from .launchers import Bundle, expand
    from .topology import compute

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
                refused = transition_problems(old[k].obj, new[k].obj)  # the CRD's own rules that read oldSelf
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


def unified_yaml(old: dict, new: dict, name: str, old_name: str | None = None) -> str:
    a = yaml.safe_dump(old, sort_keys=False).splitlines(keepends=True)
    b = yaml.safe_dump(new, sort_keys=False).splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{old_name or name}", f"b/{name}", n=2))


# ---------------------------------------------------------------- output


def counts(diffs: list[OverlayDiff]) -> tuple[int, int, int, int]:
    return (sum(1 for d in diffs if d.status != "unchanged"), sum(len(d.added) for d in diffs),
            sum(len(d.removed) for d in diffs), sum(len(d.changed) for d in diffs))


def field_lines(diffs_: list[tuple[str, Any, Any]]) -> list[str]:
    lines = [f"      {p}: {' -> '.join(short_pair(a, b))}" for p, a, b in diffs_[:12]]
    if len(diffs_) > 12:
        lines.append(f"      ... {len(diffs_) - 12} more")
    return lines


def display(path: str) -> str:
    return path.removeprefix("overlays/")


def text(diffs: list[OverlayDiff], base: str, head: str) -> str:
    lines = [f"make diff: {base} -> {head}"]
    topo = [(d, t) for d in diffs for t in d.topology if not t.startswith("new run:")]
    if topo:
        lines += ["", "Topology:"] + [f"  {display(d.path)}: {t}" for d, t in topo]
    for d in diffs:
        if d.status == "unchanged":
            continue
        app = f"  [Argo CD Application {d.app}]" if d.app else ""
        lines += ["", f"{d.path} ({d.status}){app}"]
        if d.error:
            lines.append(f"  error: {d.error}")
        lines += [f"  note: {t}" for t in d.topology if t.startswith("new run:")]
        lines += [f"  + {ref(k)}" for k in d.added]
        lines += [f"  - {ref(k)}" for k in d.removed]
        for old_ref, new_ref, diffs_, _ in d.renamed:
            if diffs_:
                lines.append(f"  ~ {ref(new_ref)} against {old_ref[3]} (besides the run id):")
                lines += field_lines(diffs_)
            else:
                lines.append(f"  = {ref(new_ref)}: the same as {old_ref[3]} besides the run id")
        for k, diffs_, _ in d.changed:
            lines.append(f"  ~ {ref(k)}")
            lines += field_lines(diffs_)
        lines += [f"  warning: {w}" for w in d.warnings]
    n, a, r, c = counts(diffs)
    lines += ["", f"{n} of {len(diffs)} rendered folders differ: {a} object{'' if a == 1 else 's'} added, {r} removed, "
                  f"{c} changed"]
    return "\n".join(lines) + "\n"


def markdown(diffs: list[OverlayDiff], base: str, head: str) -> str:
    n, a, r, c = counts(diffs)
    lines = [MARKER, f"### Rendered difference: `{base}` → `{head}`", "",
             f"{n} of {len(diffs)} rendered folders differ: **{a}** object{'' if a == 1 else 's'} added, **{r}** removed, "
             f"**{c}** changed "
             "(rendered with the repository's pinned kustomize and build options, as Argo CD renders them)."]
    topo = [(d, t) for d in diffs for t in d.topology if not t.startswith("new run:")]
    if topo:
        lines += ["", "**Topology**", ""] + [f"- `{display(d.path)}`: {t}" + (f" (Argo CD: `{d.app}`)" if d.app
                                                                            else "") for d, t in topo]
    warnings = [w for d in diffs for w in d.warnings]
    if warnings:
        lines += ["", "**Warnings**", ""] + [f"- :warning: {w}" for w in warnings]
    errors = [d for d in diffs if d.error]
    if errors:
        lines += ["", "**Does not render**", ""] + [f"- `{d.path}`: {d.error}" for d in errors]
    changed = [d for d in diffs if d.status not in ("unchanged", "error")]
    if changed:
        lines += ["", "| folder | Argo CD | added | removed | changed |", "|---|---|---|---|---|"]
        for d in changed:
            lines.append(f"| `{d.path}` | {('`' + d.app + '`') if d.app else ''} | "
                         f"{', '.join(ref(k) for k in d.added) or '-'} | {', '.join(ref(k) for k in d.removed) or '-'}"
                         f" | {', '.join(ref(k) for k, _, _ in d.changed) or '-'} |")
        for d in changed:
            for old_ref, new_ref, diffs_, udiff in d.renamed:
                lines += ["", f"<details><summary><code>{d.path}</code>: new run <code>{ref(new_ref)}</code> against "
                          f"<code>{old_ref[3]}</code>: {len(diffs_) or 'no'} field{'s' if len(diffs_) != 1 else ''} "
                          "changed besides the run id</summary>", ""]
                if udiff:
                    lines += ["```diff", udiff.rstrip("\n")[:6000], "```"]
                lines += ["", "</details>"]
            if not d.changed:
                continue
            lines += ["", f"<details><summary><code>{d.path}</code>: {len(d.changed)} changed</summary>", ""]
            for _, _, udiff in d.changed:
                lines += ["```diff", udiff.rstrip("\n")[:6000], "```"]
            lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def run(root: Path, base_ref: str, head_ref: str | None) -> tuple[list[OverlayDiff], str, str]:
    root = root.resolve()
    base_ref, base_sha = resolve_ref(root, base_ref, "BASE")
    head_ref, head_sha = resolve_ref(root, head_ref, "HEAD") if head_ref else (None, None)
    from .transaction import hook, scratch, sweep_scratch

    sweep_scratch()  # what killed runs left in the temporary folder
    with scratch() as tmp:  # locked while this run lives, so a killed run's copy goes with the next run's sweep
        base_tree = export(root, base_sha, Path(tmp) / "base")
        head_tree = export(root, head_sha, Path(tmp) / "head") if head_sha else root
        hook("exported")
        base_label = f"{base_ref} ({base_sha[:7]})"
        head_label = f"{head_ref} ({head_sha[:7]})" if head_sha else "working tree"
        with ThreadPoolExecutor(max_workers=2) as pool:
            base, head = pool.map(render_side, [Side(base_label, base_tree), Side(head_label, head_tree)])
        return compare(base, head), base_label, head_label


def only_folder(root: Path, raw: str) -> str:
    from .paths import overlay_path

    try:
        return Path(overlay_path(raw, root, inside=True)).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise DiffError(f"OVERLAY={raw} is not a folder of {root}") from None


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policies.diff", description=__doc__)
    ap.add_argument("--base", default="main", help="git ref to compare against (default: main)")
    ap.add_argument("--head", default=None, help="git ref to compare (default: the working tree)")
    ap.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    ap.add_argument("--root", default=str(REPO), help="the repository (default: this one)")
    ap.add_argument("--output", help="also write the result to this file")
    ap.add_argument("--overlay", help="only this folder (<env>/<launcher>, overlays/<env>/<launcher> or argocd)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    return guarded(lambda: report(args), (DiffError, git.GitError), prefix="make diff: ")


def report(args: argparse.Namespace) -> int:
    diffs, base, head = run(Path(args.root), args.base, args.head)
    if args.overlay:
        only = only_folder(Path(args.root), args.overlay)
        diffs = [d for d in diffs if d.path == only]
        if not diffs:
            raise DiffError(f"OVERLAY={args.overlay}: no such rendered folder at either side")
    if args.format == "markdown":
        out = markdown(diffs, base, head)
    elif args.format == "json":
        out = json.dumps({"base": base, "head": head, "overlays": [
            {"path": d.path, "application": d.app, "status": d.status, "added": [ref(k) for k in d.added],
             "removed": [ref(k) for k in d.removed],
             "changed": {ref(k): [[p, a, b] for p, a, b in ch] for k, ch, _ in d.changed},
             "new_runs": {ref(a): {"replaces": ref(r), "changed": [[p, x, y] for p, x, y in ch]}
                          for r, a, ch, _ in d.renamed},
             "topology": d.topology, "warnings": d.warnings, "error": d.error} for d in diffs]}, indent=2) + "\n"
    else:
        out = text(diffs, base, head)
    sys.stdout.write(out)
    if args.output:
        Path(args.output).write_text(out, encoding="utf-8")
    return 1 if any(d.error for d in diffs) else 0


if __name__ == "__main__":
    sys.exit(main())
