"""What the API server does to a custom resource before it validates it: it fills in the defaults its CRD's schema
declares. apiextensions-apiserver v0.36.0 (the module of Kubernetes v1.36.0) decodes a custom resource through a
codec whose defaulter (pkg/apiserver/customresource_handler.go 966, 1195; `unstructuredDefaulter.Default` 1240-1248)
runs pkg/apiserver/schema/defaulting/algorithm.go `Default` (34-70) on it: every property its schema gives a
non-null `default` and the object leaves unset (or sets to null where the schema does not allow null) takes that
default, at every level (properties, additionalProperties, array items), before the schema, its `required` lists
and its CEL rules are checked. So a CRD field that is both required and defaulted (KubeRay's workerGroupSpecs[]
minReplicas and maxReplicas) may be left out.

Built-in kinds are defaulted by Go code the committed OpenAPI schemas do not carry; only CRD schemas (schemas/crds/)
are applied here. The validators (builtin.py, kubeconform.py) check `as_validated`'s object; the CRD rules (cel.py
evaluate_schema) default the object they are given with `defaulted`, so the three see the same object."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ..kube.objects import Manifest
from .lookup import load_schema
from .messages import _resolve, as_applied

# Deeper than any Kubernetes object; past it the object is left as it is (bounded time and stack on any input).
MAX_DEPTH = 256


def is_crd_schema(path: Path) -> bool:
    """A schema `make schemas` wrote from a CRD: schemas/crds/<group>/<kind>_<version>.json."""
    return path.parent.parent.name == "crds"


def _allows_null(node: Any) -> bool:
    kind = node.get("type") if isinstance(node, dict) else None
    return kind == "null" or (isinstance(kind, list) and "null" in kind) or bool(node and node.get("nullable"))


def defaulted(obj: Any, schema: dict[str, Any]) -> Any:
    """`obj` with `schema`'s defaults filled in as algorithm.go's Default does; `obj` itself is left unchanged."""
    return _default(obj, schema, schema, 0)


def _default(x: Any, node: Any, root: dict[str, Any], depth: int) -> Any:
    node = _resolve(root, node)
    if not isinstance(node, dict) or depth > MAX_DEPTH:
        return x
    if isinstance(x, dict):
        found = node.get("properties")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        extra = node.get("additionalProperties")
        out = dict(x)
        for key, prop in props.items():  # algorithm.go 40-47: an unset (or non-nullable null) property's default
            prop = _resolve(root, prop)
            if isinstance(prop, dict) and prop.get("default") is not None and (
                    key not in out or (out[key] is None and not _allows_null(prop))):
                out[key] = copy.deepcopy(prop["default"])
        for key, value in out.items():  # 48-57: then every property, defaulted ones included, recursively
            if key in props:
                out[key] = _default(value, props[key], root, depth + 1)
            elif isinstance(extra, dict):
                sub = _resolve(root, extra)
                if value is None and isinstance(sub, dict) and sub.get("default") is not None and not _allows_null(sub):
                    value = copy.deepcopy(sub["default"])
                out[key] = _default(value, sub, root, depth + 1)
        return out
    if isinstance(x, list):  # 58-64: each item; a non-nullable null item takes the items' default
        items = _resolve(root, node.get("items"))
        if not isinstance(items, dict):
            return x
        fill = items.get("default") is not None and not _allows_null(items)
        return [_default(copy.deepcopy(items["default"]) if v is None and fill else v, items, root, depth + 1)
                for v in x]
    return x


def as_validated(m: Manifest, path: Path | None) -> Any:
    """The object the API server validates: as the admission webhooks leave it (launchers.as_admitted), nulls unset
    (messages.as_applied), and, for a custom resource, its CRD's defaults filled in."""
    from ..launchers import as_admitted

    obj = as_applied(as_admitted(m))
    if path is not None and is_crd_schema(path):
        obj = defaulted(obj, load_schema(path))
    return obj
