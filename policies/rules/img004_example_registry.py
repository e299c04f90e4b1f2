"""A real environment runs your image, not the template's example.

The template names `ghcr.io/example/ddp-trainer`, a registry nobody can pull your trainer from. An environment that
declares itself a real cluster (`real: true` in its `components/<env>/policy.yaml`, as `make new-env` writes it)
must run an image from your registry: an image of the example registry there is an error (run `make init
IMAGE=...`). An image pinned to the template's placeholder digest is an info line: whether your registry holds an
image with that digest is not something the manifests show (push the image and pin it, docs/deploy.md). Example
environments (no `real: true`) and manifests validated without a declaration are not checked.

Fails: `ghcr.io/example/ddp-trainer:0.1.0` where `real: true`.
Passes: `registry.acme.io/ml/ddp-trainer:0.1.0` where `real: true`; the example image in an example environment.
"""
from __future__ import annotations

from typing import Iterator

from ..argocd.identity import EXAMPLE_DIGEST, EXAMPLE_REGISTRY, is_example_image
from ..kube.image_ref import split_image
from ..kube.objects import INFO, Problem
from .kit import Context, obj_problem
from .img001_image_tag import images

ID = "IMG004"
NAME = "real-environment-own-image"


def check(ctx: Context) -> Iterator[Problem]:
    if ctx.env is None or not ctx.env.real:
        return
    for m, field, image in images(ctx):
        if "$" in image:
            continue
        if is_example_image(image):
            yield obj_problem(ID, m, field, f"image {image} is from the template's example registry "
                              f"({EXAMPLE_REGISTRY}), but environment {ctx.env.name} declares itself real "
                              "(real: true): its nodes cannot pull your trainer from there",
                              "run `make init REPO_URL=<your repository> IMAGE=<your registry>/ddp-trainer`, then "
                              "push and pin the image (docs/deploy.md)")
        elif split_image(image)[2] == EXAMPLE_DIGEST:
            yield obj_problem(ID, m, field, f"image {image} is pinned to the template's placeholder digest: "
                              "whether your registry holds an image with that digest was not checked",
                              "push the image and pin its digest (the image workflow or python -m "
                              "policies.edit.pin_image, docs/deploy.md)", severity=INFO)
