"""Every image is a reference the kubelet can parse.

The kubelet parses a container's image before pulling it, with the Docker reference grammar
(`[host[:port]/]path[:tag][@algorithm:hex]`: a lowercase path, a tag of at most 128 word characters, a sha256, sha384
or sha512 digest of the right length; policies/kube/image_ref.py ports it from the kubelet's library). An image it
cannot parse is never pulled: the container waits with reason InvalidImageName for as long as the pod lives, and the
world it belongs to never forms. An error: uppercase letters in the repository, a digest cut short, `//`, a URL
scheme, `$(VAR)` (the kubelet expands variables only in command, args and env, never in an image); an image with
whitespace at either end is refused earlier, by the API server, for every pod.

An image that holds a template's placeholder (`<ACCOUNT_ID>.dkr.ecr...`, `<CHANGE ME>`, `${REGISTRY}/trainer`,
`{{ .Values.image }}`, `IMAGE_NAME`) is the same error, as a `<user_namespace>` is for the API server (ARGO003): the
manifests do not run as written, and the message names the placeholder. Validate what is applied: the files after the
step that fills it in (envsubst, a Helm or kustomize edit), as `make validate` checks overlays after kustomize.

Checked on every container and init container of every pod template and on a TrainJob's `spec.trainer.image`.

Fails: `ghcr.io/Acme/Trainer:1.0`; `pytorch/pytorch@sha256:abc`; `$(IMAGE)`;
`<ACCOUNT_ID>.dkr.ecr.us-west-2.amazonaws.com/trainer:1.0`.
Passes: `pytorch/pytorch`, `localhost:5000/ddp:0.1.0`, `[::1]:5000/ddp@sha256:<64 lowercase hex digits>`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.image_ref import image_problem, placeholder
from ..kube.objects import ERROR, Problem
from .kit import Context, obj_problem
from .img001_image_tag import images

ID = "IMG005"
NAME = "image-reference-parses"
SEVERITY = ERROR


def check(ctx: Context) -> Iterator[Problem]:
    for m, field, image in images(ctx):
        found = image_problem(image)
        if found is None:
            continue
        who, why = found
        mark = placeholder(image)
        if mark is None:
            yield obj_problem(ID, m, field, f"image {image!r} is not a valid image reference ({why}): {who}",
                              "write [registry/]path[:tag][@sha256:<64 hex>] with a lowercase path and no spaces")
        else:
            yield obj_problem(ID, m, field, f"image {image!r} holds the placeholder {mark!r} ({why}): {who}",
                              "fill the placeholder in and validate what is applied (after envsubst or the edit "
                              "that fills it)")
