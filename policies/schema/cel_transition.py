"""The CRD transition rules (those that read `oldSelf`) in `make diff`: what they say about changing the base's
object into the change's in place, evaluated by cel.py as the API server evaluates them on an update."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .cel import REFUSED, findings, rule_tree
from .lookup import find_schema
from .messages import dotted


def has_transition_rules(api_version: str, kind: str) -> bool:
    """Whether the kind's CRD forbids some change in place (a rule that reads `oldSelf`)."""
    path = find_schema(api_version, kind)
    todo = [rule_tree(path)] if path is not None else []
    while todo:
        node = todo.pop()
        if node is None:
            continue
        if any(r.transition for r in node.rules):
            return True
        todo += [*node.props.values(), node.items, node.additional]
    return False


@dataclass
class Transition:
    """What the CRD's transition rules say about a change in place, as lines `<field>: <message>`: those the change
    fails (the API server refuses it), and those not evaluated here or that the API server may refuse on cost."""

    refused: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)


def transition_problems(old: Any, new: Any) -> Transition:
    """What the CRD's transition rules (those that read `oldSelf`) say about changing `old` into `new` in place
    (make diff)."""
    out = Transition()
    if not isinstance(old, dict) or not isinstance(new, dict):
        return out
    path = find_schema(str(new.get("apiVersion") or ""), str(new.get("kind") or ""))
    if path is None:
        return out
    for f in findings(new, path, old, transitions_only=True):
        (out.refused if f.kind == REFUSED else out.unchecked).append(f"{dotted(f.path) or '(object)'}: {f.message}")
    return out
