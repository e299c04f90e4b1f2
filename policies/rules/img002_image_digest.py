"""Images are pinned by digest where the environment requires it.

A tag can be pushed again; only a digest (`@sha256:...`) names one image for good. An environment whose declaration
says `requireImageDigest: true` (a large shared cluster, where a silently changed image costs a whole run) needs a
digest on every image. Without an environment declaration the rule cannot run and says so.

Fails: `ghcr.io/example/ddp-trainer:0.1.0` where `requireImageDigest: true`.
Passes: `ghcr.io/example/ddp-trainer:0.1.0@sha256:<64 hex digits>`; any tag where digests are not required.
"""
from __future__ import annotations

import re
from typing import Iterator

from ..kube.image_ref import split_image
from ..kube.objects import Problem
from .kit import Context, not_run, obj_problem
from .img001_image_tag import images

ID = "IMG002"
NAME = "image-digest"
NEEDS = "requireImageDigest"  # from the environment's declaration
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def check(ctx: Context) -> Iterator[Problem]:
    found = images(ctx)
    if not found:
        return
    if ctx.env is None:
        yield not_run(ID, ctx, "requireImageDigest")
        return
    if not ctx.env.require_image_digest:
        return
    for m, field, image in found:
        if "$" in image:
            continue
        digest = split_image(image)[2]
        if not digest or not _DIGEST.match(digest):
            yield obj_problem(ID, m, field, f"image {image} is not pinned by a sha256 digest, which "
                              f"{ctx.env.name} requires", "append @sha256:<digest> (kustomize images: digest)")
