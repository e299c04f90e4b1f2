"""Container image references, read as the kubelet reads them.

The kubelet parses a container's image before it looks for it (kubernetes pkg/kubelet/images/image_manager.go,
EnsureImageExists -> applyDefaultImageTag -> pkg/util/parsers/parsers.go ParseImageName, which calls
github.com/distribution/reference ParseNormalizedNamed; kubernetes pins reference v0.6.0). An image that does not
parse is never pulled: the container waits with reason InvalidImageName ("Failed to apply default image tag ...:
couldn't parse image name ...") for as long as the pod lives. Ported here from distribution/reference v0.6.0
(regexp.go: the grammar; normalize.go 47-84 ParseNormalizedNamed and 137-171 splitDockerDomain; reference.go 186-231
Parse and its errors 46-68) and opencontainers/go-digest v1.0.0 (digest.go 103-117 Validate, algorithm.go 32-62 and
179-193: sha256, sha384 and sha512, lowercase hex of the hash's size; the kubelet links all three).

Before that, the API server refuses a pod whose container or init container image has leading or trailing
whitespace (pkg/apis/core/validation/validation.go validateContainersOnlyForPod, called by ValidatePod for both).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# regexp.go: the grammar's parts, as the Go constants build them. Go's \w is ASCII (re.ASCII here), and its `$`
# matches only at the end of the text (fullmatch here, never `$`, which Python lets match before a final newline).
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"  # a host name or IPv4 address, no port
_DOMAIN = rf"(?:{DOMAIN_NAME}|\[(?:[a-fA-F0-9:]+)\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9A-Fa-f]{32,}"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
REMOTE_NAME = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"  # the path: lowercase components
_REFERENCE = re.compile(rf"((?:{_DOMAIN}/)?{REMOTE_NAME})(?::({_TAG}))?(?:@({_DIGEST}))?", re.ASCII)
_NAME = re.compile(rf"(?:({_DOMAIN})/)?({REMOTE_NAME})", re.ASCII)
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
REPOSITORY_NAME_MAX = 255  # reference.go RepositoryNameTotalLengthMax
# go-digest: the algorithms the kubelet can verify, and the length of each one's hex.
_DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
_DIGEST_ANY = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")  # digest.go DigestRegexp
DEFAULT_DOMAIN, LEGACY_DOMAIN, OFFICIAL_PREFIX = "docker.io", "index.docker.io", "library/"
# A template's placeholder, for a step before `kubectl apply` to fill in: `<ACCOUNT_ID>`, `${REGISTRY}` (envsubst),
# `{{ .Values.image }}`, or a whole part in capitals such as `IMAGE_NAME` (never a valid repository: it must be
# lowercase). `$(VAR)` is not one: it is the Kubernetes expansion syntax, which the kubelet applies only to command,
# args and env values, never to an image.
_TEMPLATE_MARK = re.compile(r"<[^<>]*>|\$\{[^{}]*\}|\{\{.*?\}\}")
_CAPITALS = re.compile(r"(?:^|[/:])([A-Z][A-Z0-9_]*[A-Z0-9])(?=$|[/:])")


class ImageRefError(ValueError):
    """The error text ParseNormalizedNamed returns."""


@dataclass(frozen=True)
class ImageRef:
    domain: str
    path: str
    tag: str | None
    digest: str | None


def _split_docker_domain(name: str) -> tuple[str, str]:
    """normalize.go splitDockerDomain: the registry a name is on (docker.io where the first part is no host)."""
    maybe_domain, slash, maybe_remote = name.partition("/")
    if not slash:
        return DEFAULT_DOMAIN, OFFICIAL_PREFIX + name
    if maybe_domain == "localhost" or any(c in maybe_domain for c in ".:") or maybe_domain.lower() != maybe_domain:
        domain, remote = maybe_domain, maybe_remote
    else:
        domain, remote = DEFAULT_DOMAIN, name
    if domain == LEGACY_DOMAIN:
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in remote:
        remote = OFFICIAL_PREFIX + remote
    return domain, remote


def _check_digest(digest: str) -> None:
    """go-digest Digest.Validate."""
    algorithm, colon, hexpart = digest.partition(":")
    if not algorithm or not hexpart:
        raise ImageRefError("invalid checksum digest format")
    size = _DIGEST_HEX.get(algorithm)
    if size is None:
        raise ImageRefError("invalid checksum digest format" if not _DIGEST_ANY.fullmatch(digest)
                            else "unsupported digest algorithm")
    if len(hexpart) != size:
        raise ImageRefError("invalid checksum digest length")
    if not re.fullmatch(r"[a-f0-9]+", hexpart):
        raise ImageRefError("invalid checksum digest format")


def parse_reference(text: str) -> ImageRef:
    """reference.go Parse(text), or ImageRefError with its message."""
    match = _REFERENCE.fullmatch(text)
    if match is None:
        if not text:
            raise ImageRefError("repository name must have at least one component")
        if _REFERENCE.fullmatch(text.lower()):
            raise ImageRefError("repository name must be lowercase")
        raise ImageRefError("invalid reference format")
    name = _NAME.fullmatch(match.group(1))
    host, path = (name.group(1) or "", name.group(2)) if name else ("", match.group(1))
    if len(path) > REPOSITORY_NAME_MAX:
        raise ImageRefError(f"repository name must not be more than {REPOSITORY_NAME_MAX} characters")
    if match.group(3):
        _check_digest(match.group(3))
    return ImageRef(host, path, match.group(2), match.group(3))


def parse_image(image: str) -> ImageRef:
    """normalize.go ParseNormalizedNamed(image), as the kubelet calls it, or ImageRefError with its message."""
    if _IDENTIFIER.fullmatch(image):
        raise ImageRefError(f"invalid repository name ({image}), cannot specify 64-byte hexadecimal strings")
    domain, remainder = _split_docker_domain(image)
    remote = remainder.split(":", 1)[0]
    if remote.lower() != remote:
        raise ImageRefError(f"invalid reference format: repository name ({remote}) must be lowercase")
    return parse_reference(f"{domain}/{remainder}")


@functools.lru_cache(maxsize=4096)  # bounded; an image is written in many pod templates and inputs
def image_problem(image: str) -> tuple[str, str] | None:
    """(who refuses, why) for an image the pod can never run with as written, or None: the API server for
    whitespace at either end, the kubelet for a reference ParseNormalizedNamed refuses. Worked out once per image
    text (the answer is a pair of strings, which nobody changes)."""
    if image != image.strip():
        return "the API server refuses its pods", "must not have leading or trailing whitespace"
    try:
        parse_image(image)
    except ImageRefError as e:
        return "the kubelet cannot parse it (InvalidImageName), so the container never starts", str(e)
    return None


def placeholder(image: str) -> str | None:
    """The first placeholder the image holds (a part in capitals only before any digest), or None."""
    mark = _TEMPLATE_MARK.search(image)
    if mark:
        return mark.group(0)
    capitals = _CAPITALS.search(image.partition("@")[0])
    return capitals.group(1) if capitals else None


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """`host:5000/a/b:tag@sha256:x` -> (`host:5000/a/b`, `tag`, `sha256:x`), as written (not normalised); read
    loosely, so that any text gives an answer (image_problem says whether the kubelet can parse it)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = None
    if ":" in last:
        tag = last.rsplit(":", 1)[1]
        name = name[: len(name) - len(tag) - 1]
    return name, tag, digest or None
