"""GPU requests equal GPU limits.

GPUs are an extended resource: they cannot be overcommitted, so the API server rejects a request that differs from
the limit or a request with no limit. Write the limit (the request then defaults to it), or both, equal. Checked on
every container of every pod template and on a TrainJob's `resourcesPerNode`.

Fails: `requests: {nvidia.com/gpu: 4}, limits: {nvidia.com/gpu: 8}`; a GPU request without a limit.
Passes: `requests` and `limits` both `nvidia.com/gpu: 8`; only `limits: {nvidia.com/gpu: 1}`.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.values import as_int
from ..launchers import gpu_resources
from ..kube.objects import Manifest, Problem
from .kit import Context, obj_problem, resource_blocks

ID = "RES002"
NAME = "gpu-request-equals-limit"


def _check(m: Manifest, field: str, resources: Any) -> Iterator[Problem]:
    if not isinstance(resources, dict):
        return
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    for key in gpu_resources(requests):
        if key not in limits:
            yield obj_problem(ID, m, f"{field}.requests", f"{key} request {requests[key]} has no limit: the API "
                              "server rejects it", f"set limits.{key} to {requests[key]}")
        elif as_int(limits[key]) != as_int(requests[key]):
            yield obj_problem(ID, m, f"{field}.requests", f"{key} request {requests[key]} differs from the limit "
                              f"{limits[key]}: the API server rejects it", f"make both {limits[key]}")


def check(ctx: Context) -> Iterator[Problem]:
    for m, field, resources in resource_blocks(ctx):
        yield from _check(m, field, resources)
