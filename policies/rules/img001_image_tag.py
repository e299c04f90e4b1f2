"""Every image names a version: a tag other than `latest`, or a digest.

An image without a tag is `latest`, and `latest` moves: two pods of the same world pulled minutes apart can run
different code, and a restart next week runs code nobody reviewed. A warning (upstream examples run this way; an
environment can make it an error). Checked on every container and init container of every pod template and on a
TrainJob's `spec.trainer.image`.

Fails: `gcr.io/k8s-staging-jobset/pytorch-mnist:latest`; `pytorch/pytorch` without a tag.
Passes: `ghcr.io/example/ddp-trainer:0.1.0`; `...@sha256:<digest>`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.image_ref import split_image
from ..kube.objects import WARNING, Manifest, Problem
from .kit import Context, obj_problem

ID = "IMG001"
NAME = "image-tag-not-latest"
SEVERITY = WARNING


def images(ctx: Context) -> list[tuple[Manifest, str, str]]:
    """(object, field, image) for every image in the manifests (worked out once per overlay)."""
    found: list[tuple[Manifest, str, str]] | None = ctx.memo.get("images")
    if found is None:
        found = [(cs.manifest, f"{cs.field}.image", str(cs.container["image"]))
                 for cs in ctx.containers if cs.container.get("image")]
        for m, launcher in ctx.launched:
            for field, image in launcher.container_settings(m, "image"):
                found.append((m, field, str(image)))
        ctx.memo["images"] = found
    return found


def check(ctx: Context) -> Iterator[Problem]:
    for m, field, image in images(ctx):
        if "$" in image:
            continue
        name, tag, digest = split_image(image)
        if digest:
            continue
        if tag is None or tag == "latest":
            what = "has no tag (so latest)" if tag is None else "is tagged latest"
            yield obj_problem(ID, m, field, f"image {image} {what}: pods pulled at different times can run "
                              "different code", "pin a version tag (or a digest)", severity=WARNING)
