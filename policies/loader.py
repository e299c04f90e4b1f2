"""Read Kubernetes objects from YAML text (a file, standard input or kustomize's output) into Manifests.
Every failure is an InputError with one line naming the file, document and what is wrong."""
from __future__ import annotations

import json
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
    """Safe loader that rejects duplicate keys (kubectl keeps the last one silently; strict validation refuses) and
    reads what is not JSON the way kubectl's sigs.k8s.io/yaml does: keys become strings (`5:` -> "5", `true:` ->
    "true"), timestamps stay the text written, `!!binary` is its UTF-8 text; `!!set`, `!!omap` and `!!pairs` are
    refused."""


def key_text(key: Any, node: yaml.Node) -> Any:
    """A mapping key as the JSON the API server receives has it (sigs.k8s.io/yaml turns scalar keys into strings)."""
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        text = repr(key)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(node, yaml.ScalarNode):
        return node.value
    return key  # a list or mapping as a key: construct_mapping below refuses it with its line


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = key_text(loader.construct_object(key_node, deep=deep), key_node)
        if isinstance(key, (list, dict)):
            raise yaml.constructor.ConstructorError(None, None, f"a {type(key).__name__} as a mapping key (keys must "
                                                    "be strings)", key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'", key_node.start_mark)
        seen.add(key)
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = key_text(loader.construct_object(key_node, deep=deep), key_node)
        out[key] = loader.construct_object(value_node, deep=deep)
    return out


def _timestamp(loader: _StrictLoader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


def _binary(loader: _StrictLoader, node: yaml.ScalarNode) -> str:
    data = loader.construct_yaml_binary(node)
    try:
        return data.decode("utf-8")  # what sigs.k8s.io/yaml hands the API server
    except UnicodeDecodeError:
        raise yaml.constructor.ConstructorError(None, None, "!!binary value is not UTF-8 text (JSON has no bytes; "
                                                "write it base64-encoded as a string)", node.start_mark) from None


def _refuse(loader: _StrictLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(None, None, f"tag {node.tag.rsplit(':', 1)[-1]} has no JSON form (a "
                                            "Kubernetes manifest holds mappings, lists and scalars)", node.start_mark)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)
_StrictLoader.add_constructor("tag:yaml.org,2002:binary", _binary)
for _tag in ("set", "omap", "pairs"):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse)


def parse(text: str, source: str) -> list[Manifest]:
    """All objects in a multi-document YAML text; `List` kinds are unpacked; empty documents are skipped."""
    try:
        docs = list(yaml.load_all(text, Loader=_StrictLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{source}{where}: invalid YAML: {problem}") from None
    return objects(docs, source)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key '{key}'")
        out[key] = value
    return out


def parse_json(text: str, source: str) -> list[Manifest]:
    """One JSON document (an object, a `List` of objects); duplicate keys are refused as in YAML."""
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:  # a duplicate key (JSON gives no position for it)
        raise InputError(f"{source}: invalid JSON: {exc}") from None
    return objects([doc], source)


def objects(docs: list[Any], source: str) -> list[Manifest]:
    """Parsed documents -> Manifests: `List` kinds (`v1/List`, `kubectl get -o yaml`) are unpacked."""
    out: list[Manifest] = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError(f"{source}: document {i + 1} is a {type(doc).__name__}, not a Kubernetes object")
        kind = doc.get("kind")
        if kind == "List" or isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items")
            if items is None:
                continue
            if not isinstance(items, list):
                raise InputError(f"{source}: document {i + 1} ({kind}) field items is a {type(items).__name__}, "
                                 "not a list of Kubernetes objects")
            for j, item in enumerate(items):
                if not isinstance(item, dict):
                    raise InputError(f"{source}: document {i + 1} ({kind}) items[{j}] is a {type(item).__name__}, "
                                     "not a Kubernetes object")
                out.append(Manifest(item, source, len(out)))
            continue
        out.append(Manifest(doc, source, len(out)))
    return out


def parse_any(text: str, source: str) -> list[Manifest]:
    """A `.json` file as JSON; anything else as YAML, except standard input that holds one JSON document."""
    if source.lower().endswith(".json"):
        return parse_json(text, source)
    if source == "<stdin>" and text.lstrip().startswith("{"):
        try:
            return parse_json(text, source)
        except InputError:
            pass  # YAML's flow style starts with `{` too: let the YAML reader say what is wrong
    return parse(text, source)


def read(path: str) -> list[Manifest]:
    """Objects from a manifest file (YAML, or JSON for `.json`), or from standard input for `-`."""
    if path == "-":
        return parse_any(sys.stdin.read(), "<stdin>")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file or folder") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_any(text, path)
