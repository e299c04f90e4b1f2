"""Trace a problem back to the source: the file and line that define the object (and, as far as it can be followed,
the field) among the files kustomize read for the overlay, or in the manifest file itself. What cannot be traced
(an object a generator or a JSON patch made, standard input) stays "rendered"."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .files import read_text, rel as _rel
from .loader import InputError
from ..kube.objects import Manifest

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader

_TOKEN = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)")


def field_tokens(field: str | None) -> list[str | int]:
    """`spec.template.spec.containers[0].env[3]` -> ['spec', 'template', 'spec', 'containers', 0, 'env', 3]."""
    if not field or " " in field.strip():
        return []  # "(runtime) ...", "Job controller": not a path in this object
    out: list[str | int] = []
    for bracket, plain in _TOKEN.findall(field):
        if plain:
            out.append(plain)
        else:
            key = bracket.strip("'\"")
            out.append(int(key) if key.isdigit() else key)
    return out


def _scalar(node: Any) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def _get(node: Any, key: str) -> tuple[Any, Any] | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if _scalar(k) == key:
                return k, v
    return None


class _Doc:
    """One object found in a source file: its kind, name, file, order among the files and its YAML node."""

    def __init__(self, kind: str, name: str, path: str, order: int, node: Any, generator: bool = False) -> None:
        self.kind, self.name, self.path, self.order, self.node, self.generator = kind, name, path, order, node, generator


class Tracer:
    """Index of the objects defined in a unit's source files, built once per unit and only when it has problems."""

    def __init__(self, files: list[Path]) -> None:
        self.docs: list[_Doc] = []
        for order, f in enumerate(files):
            try:
                text = read_text(f)  # within the loader's bounds: composing nests in C, without a depth limit
                nodes = list(yaml.compose_all(text, Loader=_Loader))
            except (InputError, yaml.YAMLError):
                continue
            rel = _rel(f)
            for node in nodes:
                self._index(node, rel, order)

    def _index(self, node: Any, path: str, order: int) -> None:
        if not isinstance(node, yaml.MappingNode):
            return
        kind = _scalar((_get(node, "kind") or (None, None))[1])
        if kind in ("Kustomization", "Component"):
            for key, gkind in (("configMapGenerator", "ConfigMap"), ("secretGenerator", "Secret")):
                gens = _get(node, key)
                if gens and isinstance(gens[1], yaml.SequenceNode):
                    for g in gens[1].value:
                        name = _scalar((_get(g, "name") or (None, None))[1])
                        if name:
                            self.docs.append(_Doc(gkind, name, path, order, g, generator=True))
            return
        if kind in ("List",) or kind is None:
            items = _get(node, "items")
            if items and isinstance(items[1], yaml.SequenceNode):
                for item in items[1].value:
                    self._index(item, path, order)
            return
        meta = _get(node, "metadata")
        name = _scalar((_get(meta[1], "name") or (None, None))[1]) if meta else None
        if name:
            self.docs.append(_Doc(kind, name, path, order, node))

    def locate(self, m: Manifest | None, kind: str, name: str, field: str | None) -> tuple[str, int] | None:
        best: tuple[int, int, int, str] | None = None  # (depth, order, line, path)
        tokens = field_tokens(field)
        for d in self.docs:
            if d.kind != kind or not _same_name(d.name, name):
                continue
            depth, line = (_walk_generator(d.node, tokens) if d.generator
                           else _walk(d.node, tokens, m.obj if m else None))
            # Deeper wins; on a tie the later file (a patch, applied after the resource) wins when it reaches the
            # field itself, the earlier (the resource that defines the object) for the object as a whole.
            key = (depth, d.order if depth == len(tokens) and depth >= 2 else -d.order)
            if best is None or key > best[:2]:
                best = (key[0], key[1], line, d.path)
        return (best[3], best[2]) if best else None


def _same_name(source: str, rendered: str) -> bool:
    """Exact, or renamed by a namePrefix / nameSuffix / generator hash (`team-x`, `x-5f8k7`)."""
    return source == rendered or (source + "-") in rendered or rendered.endswith("-" + source)


def _walk(node: Any, tokens: list[str | int], rendered: Any) -> tuple[int, int]:
    """How deep `tokens` can be followed in the source node, and the line reached (metadata.name at depth 0)."""
    meta = _get(node, "metadata")
    name = _get(meta[1], "name") if meta else None
    line = (name[0].start_mark.line + 1) if name else node.start_mark.line + 1
    depth = 0
    cur = node
    for tok in tokens:
        if isinstance(tok, int):
            if not isinstance(cur, yaml.SequenceNode):
                break
            item = None
            want = rendered[tok].get("name") if isinstance(rendered, list) and tok < len(rendered) and \
                isinstance(rendered[tok], dict) else None
            if want is not None:
                item = next((i for i in cur.value if _scalar((_get(i, "name") or (None, None))[1]) == str(want)), None)
            elif tok < len(cur.value):
                item = cur.value[tok]
            if item is None:
                break
            cur = item
            rendered = rendered[tok] if isinstance(rendered, list) and tok < len(rendered) else None
            line = cur.start_mark.line + 1
        else:
            found = _get(cur, tok)
            if not found:
                break
            line = found[0].start_mark.line + 1
            cur = found[1]
            rendered = rendered.get(tok) if isinstance(rendered, dict) else None
        depth += 1
    return depth, line


def _walk_generator(node: Any, tokens: list[str | int]) -> tuple[int, int]:
    """A generated ConfigMap or Secret: `data.KEY` is the literal `KEY=...`; otherwise the generator's name."""
    name = _get(node, "name")
    line = (name[0].start_mark.line + 1) if name else node.start_mark.line + 1
    if len(tokens) == 2 and tokens[0] in ("data", "stringData"):
        lits = _get(node, "literals")
        if lits and isinstance(lits[1], yaml.SequenceNode):
            for lit in lits[1].value:
                if (_scalar(lit) or "").split("=", 1)[0] == str(tokens[1]):
                    return 2, lit.start_mark.line + 1
    return 0, line


def _ref_parts(ref: str) -> tuple[str, str]:
    parts = ref.split("/")
    return parts[0], parts[-1]


def trace_unit(unit: Any) -> None:
    """Set `location` on every problem of `unit` (and its suppressed ones) that names an object."""
    todo = [p for p in [*unit.problems, *unit.suppressed] if p.obj and p.location is None]
    if not todo:
        return
    if unit.kind == "overlay":
        from .kustomization import inputs

        _, files = inputs(Path(unit.source))
        _trace(todo, files, unit.manifests)
    elif unit.kind == "folder":  # (engine.FOLDER, --bundle): each problem in its own object's file
        for source in dict.fromkeys(p.source for p in todo):
            _trace([p for p in todo if p.source == source], [Path(source)],
                   [m for m in unit.manifests if m.source == source])
    elif unit.source != "<stdin>":
        _trace(todo, [Path(unit.source)], unit.manifests)


def _trace(problems: list[Any], files: list[Path], manifests: list[Any]) -> None:
    tracer = Tracer(files)
    by_ref = {m.ref: m for m in manifests}
    for p in problems:
        kind, name = _ref_parts(p.obj or "")
        p.location = tracer.locate(by_ref.get(p.obj or ""), kind, name, p.field)


def place(units: list[Any]) -> None:
    """Where every problem of these units is shown, in one pass at the end: its object's (and field's) source line
    traced (`location`), and its path relative to the checkout. The reporters read problems placed."""
    for u in units:
        trace_unit(u)
        for p in [*u.problems, *u.suppressed]:
            p.source = _rel(p.source)
