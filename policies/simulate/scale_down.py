"""Scaling an overlay down to this machine, only on request (SCALE_TO=N): every training workload at N pods of one
process each, no GPUs, gloo; the output lists each change, so that nobody takes the run for the overlay as written."""
from __future__ import annotations

import copy
import re
from typing import Any

from .. import launchers
from ..launchers import Bundle, drop_gpus
from ..kube.objects import Manifest
from ..model.topology import compute

MAX_PODS = 8


def needs_scaling(bundle: Bundle) -> list[str]:
    """Why the overlay cannot run here as it is: GPU requests, more pods than this machine takes."""
    reasons = []
    for t in compute(bundle)[0]:
        if t.gpus:
            reasons.append(f"{t.manifest.ref} requests {t.gpus} GPUs per pod (this machine has none)")
        if t.pods > MAX_PODS:
            reasons.append(f"{t.manifest.ref} has {t.pods} pods (at most {MAX_PODS} run here)")
    return reasons


_FLAG_NUM = re.compile(r"(--(?:nnodes|nproc[-_]per[-_]node)[= ])(\d+(?::\d+)?)")


def scale_down(manifests: list[Manifest], nodes: int) -> tuple[list[Manifest], list[str]]:
    """A copy of the manifests with every training workload at `nodes` pods x 1 process, no GPUs, gloo.
    Returns the copy and the list of changes, which the output prints."""
    out = [Manifest(copy.deepcopy(m.obj), m.source, m.index) for m in manifests]
    changes: list[str] = []
    bundle = Bundle.of(out)
    training = {id(t.manifest.obj) for t in compute(bundle)[0]}
    for m in out:
        if id(m.obj) not in training:
            if m.kind == "ConfigMap" and (m.obj.get("data") or {}).get("DIST_BACKEND") == "nccl":
                m.obj["data"]["DIST_BACKEND"] = "gloo"
                changes.append(f"{m.ref}: DIST_BACKEND nccl -> gloo")
            continue
        launcher = launchers.of(m)
        if launcher is not None:
            changes += launcher.scale_down(m, nodes)
        for c in _containers(m.obj):
            changes += [f"{m.ref}: container {c.get('name')} {gone} removed" for gone in drop_gpus(c.get("resources"))]
            for v in c.get("env") or []:
                if v.get("name") == "NNODES" and "value" in v:
                    v["value"] = str(nodes)
                elif v.get("name") == "NPROC_PER_NODE" and "value" in v:
                    v["value"] = "1"
                elif v.get("name") == "DIST_BACKEND" and v.get("value") == "nccl":
                    v["value"] = "gloo"
            for key in ("command", "args"):
                c[key] = [_FLAG_NUM.sub(lambda mm: mm.group(1) + (str(nodes) if "nnodes" in mm.group(1) else "1"), str(t))
                          for t in c.get(key) or []] or c.get(key)
    return out, changes


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container list in a workload object, wherever its pod template sits."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("containers", "initContainers") and isinstance(v, list):
                    found.extend(c for c in v if isinstance(c, dict))
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(obj)
    return found
