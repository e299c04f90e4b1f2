"""`make diff`'s three forms of one comparison: text for the terminal, markdown for the pull-request comment (the
workflow finds its own comment by MARKER), and JSON."""
from __future__ import annotations

import json
from typing import Any, Sequence

from .objects import OverlayDiff, short_pair
from .trees import ref

MARKER = "<!-- ddp-gitops-diff -->"


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


def text(diffs: list[OverlayDiff], base: str, head: str, warnings: Sequence[str] = ()) -> str:
    lines = [f"make diff: {base} -> {head}"] + [f"warning: {w}" for w in warnings]
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


def markdown(diffs: list[OverlayDiff], base: str, head: str, side_warnings: Sequence[str] = ()) -> str:
    n, a, r, c = counts(diffs)
    lines = [MARKER, f"### Rendered difference: `{base}` → `{head}`", "",
             f"{n} of {len(diffs)} rendered folders differ: **{a}** object{'' if a == 1 else 's'} added, **{r}** removed, "
             f"**{c}** changed "
             "(rendered with the repository's pinned kustomize and build options, as Argo CD renders them)."]
    topo = [(d, t) for d in diffs for t in d.topology if not t.startswith("new run:")]
    if topo:
        lines += ["", "**Topology**", ""] + [f"- `{display(d.path)}`: {t}" + (f" (Argo CD: `{d.app}`)" if d.app
                                                                            else "") for d, t in topo]
    warnings = [*side_warnings, *(w for d in diffs for w in d.warnings)]
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


def as_json(diffs: list[OverlayDiff], base: str, head: str, warnings: Sequence[str] = ()) -> str:
    return json.dumps({"base": base, "head": head, "warnings": list(warnings), "overlays": [
        {"path": d.path, "application": d.app, "status": d.status, "added": [ref(k) for k in d.added],
         "removed": [ref(k) for k in d.removed],
         "changed": {ref(k): [[p, a, b] for p, a, b in ch] for k, ch, _ in d.changed},
         "new_runs": {ref(a): {"replaces": ref(r), "changed": [[p, x, y] for p, x, y in ch]}
                      for r, a, ch, _ in d.renamed},
         "topology": d.topology, "warnings": d.warnings, "error": d.error} for d in diffs]}, indent=2) + "\n"
