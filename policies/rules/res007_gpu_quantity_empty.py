"""A GPU request or limit states a number.

`nvidia.com/gpu:` with nothing after it is YAML's null, not a number of GPUs. In a custom resource (a PyTorchJob, a
TrainJob, a JobSet) the API server drops a null that its schema does not mark nullable before it stores the object
(k8s.io/apiextensions-apiserver pkg/apiserver/schema/defaulting/prunenulls.go@v0.36.0 21-22, 44-52), so the pods
the controller makes ask for no GPU of that kind; in a built-in kind (a Job, a StatefulSet) the null reads as a
quantity of 0. Either way the device plugin gives the container no GPU: it sees GPUs only where the node's container
runtime hands every GPU to every container. Seen in a real manifest (tests/corpus/pytorchjob/aws-nsight-eks-fsdp.yaml,
a template whose GPU count was left blank): a warning, as whether the node's runtime does so is not in the manifest.

Fails: `limits: {nvidia.com/gpu: }` on a container that runs 8 processes per pod.
Passes: `limits: {nvidia.com/gpu: 8}`; no GPU resource at all (a CPU pod).
"""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.objects import WARNING, Manifest, Problem
from ..launchers import gpu_resources
from .kit import Context, obj_problem, resource_blocks

ID = "RES007"
NAME = "gpu-quantity-stated"
SEVERITY = WARNING


def _check(m: Manifest, field: str, resources: Any) -> Iterator[Problem]:
    if not isinstance(resources, dict):
        return
    for section in ("limits", "requests"):
        block = resources.get(section)
        if not isinstance(block, dict):
            continue
        for key in gpu_resources(block):
            if block[key] is None:
                yield obj_problem(ID, m, f"{field}.{section}.{key}", f"{section}.{key} has no value: the pods ask "
                                  "for no GPU (the API server drops or zeroes a null), and see GPUs only if the "
                                  "node's container runtime exposes every GPU to every container",
                                  f"write the number of GPUs each pod needs, e.g. {key}: 8")


def check(ctx: Context) -> Iterator[Problem]:
    for m, field, resources in resource_blocks(ctx):
        yield from _check(m, field, resources)
