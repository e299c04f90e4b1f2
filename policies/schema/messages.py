"""A validator's errors as Problems: the object as the API server checks it, the field path written as users write
it, a hint for a mistyped field name, at most MAX_ERRORS_PER_OBJECT per object, in the manifests' order."""
from __future__ import annotations

import difflib
import json
import re
from typing import Any, Iterable

from ..kube.objects import Manifest, Problem
from .lookup import MAX_ERRORS_PER_OBJECT, MAX_MESSAGE, RULE

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")

def as_applied(obj: Any) -> Any:
    """The object as the API server validates it: a field written as null (`metadata:` with nothing under it) is
    unset. A null in a nullable field is allowed and unset is equivalent there; in a required field both fail."""
    if isinstance(obj, dict):
        return {k: as_applied(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [as_applied(v) for v in obj]
    return obj


def dotted(path: Iterable[str | int]) -> str:
    """`["spec", "containers", 0, "env"]` -> `spec.containers[0].env`; odd keys quoted: `annotations["a.io/b"]`."""
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif _PLAIN_KEY.match(seg):
            out += f".{seg}" if out else seg
        else:
            out += f"[{json.dumps(seg)}]"
    return out


def one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    for _ in range(32):  # local refs only; the bound stops a ref cycle
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not (isinstance(ref, str) and ref.startswith("#/")):
            return node
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        node = target
    return node


def allowed_fields(schema: dict[str, Any], path: list[str | int]) -> list[str]:
    """Property names the schema allows at the object found at path (following $ref, items, additionalProperties)."""
    node: Any = _resolve(schema, schema)
    for seg in path:
        if not isinstance(node, dict):
            return []
        if isinstance(seg, int):
            node = node.get("items")
        else:
            props = node.get("properties") or {}
            node = props.get(seg, node.get("additionalProperties"))
        node = _resolve(schema, node)
    return sorted((node.get("properties") or {}).keys()) if isinstance(node, dict) else []


def unknown_field_problems(m: Manifest, schema: dict[str, Any] | None, path: list[str | int], names: list[str],
                           message: str) -> list[Problem]:
    problems = []
    allowed = allowed_fields(schema, path) if schema else []
    for name in names:
        close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.75)
        hint = f'did you mean "{close[0]}"?' if close else "remove the field or fix its name (unknown fields are errors)"
        problems.append(Problem(RULE, one_line(message), m.source, obj=m.ref, field=dotted([*path, name]) or None,
                                hint=hint))
    return problems


def missing_field_problems(m: Manifest, path: list[str | int], names: list[str], message: str) -> list[Problem]:
    return [Problem(RULE, one_line(message), m.source, obj=m.ref, field=dotted([*path, name]),
                    hint=f'add the required field "{name}"') for name in names]


def in_order(found: list[tuple[int, Problem]]) -> list[Problem]:
    """Problems in the order of the manifests they concern (stable within one manifest)."""
    return [p for _, p in sorted(found, key=lambda ip: ip[0])]


def cap(m: Manifest, problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_ERRORS_PER_OBJECT:
        return problems
    more = len(problems) - MAX_ERRORS_PER_OBJECT
    return problems[:MAX_ERRORS_PER_OBJECT] + [
        Problem(RULE, f"{more} more schema errors in this object not shown", m.source, obj=m.ref)]
