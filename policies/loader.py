"""Read Kubernetes objects from YAML text (a file, standard input or kustomize's output) into Manifests.
Every failure is an InputError with one line naming the file, document and what is wrong."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from .model import Manifest

try:  # libyaml is several times faster on large renders; the pure-Python loader behaves the same
    _Base: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Base = yaml.SafeLoader


class InputError(Exception):
    """Bad input: the message is the whole one-line report."""


class _StrictLoader(_Base):  # type: ignore[misc, valid-type]
    """Safe loader that rejects duplicate keys (kubectl keeps the last one silently; strict validation refuses)."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def parse(text: str, source: str) -> list[Manifest]:
    """All objects in a multi-document YAML text; `List` kinds are unpacked; empty documents are skipped."""
    out: list[Manifest] = []
    try:
        docs = list(yaml.load_all(text, Loader=_StrictLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{source}{where}: invalid YAML: {problem}") from None
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError(f"{source}: document {i + 1} is a {type(doc).__name__}, not a Kubernetes object")
        if doc.get("kind") in ("List",) or str(doc.get("kind", "")).endswith("List") and "items" in doc:
            for j, item in enumerate(doc.get("items") or []):
                if isinstance(item, dict):
                    out.append(Manifest(item, source, len(out)))
                else:
                    raise InputError(f"{source}: document {i + 1} item {j + 1} is not a Kubernetes object")
            continue
        out.append(Manifest(doc, source, len(out)))
    return out


def read(path: str) -> list[Manifest]:
    """Objects from a manifest file, or from standard input for `-`."""
    if path == "-":
        return parse(sys.stdin.read(), "<stdin>")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file or folder") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    return parse(text, path)
