"""Who this repository is, declared once in gitops.yaml: the repository URL Argo CD clones (`argocd.repoURL`), the
trainer image's repository (`identity.image`) and, per environment, the Argo CD cluster and namespace its Application
syncs to (`identity.environments`). Everything else that repeats it (argocd/, the bases' and components' images, the
Makefile) is checked against it here; `make init` (policies/edit/init.py) rewrites it all at once and `make new-env`
(policies/edit/new_env.py) adds an environment.

`python -m policies.argocd.identity` prints the identity and checks every repetition (exit 1 on a disagreement);
`python -m policies.argocd.identity image` prints the image repository alone (for scripts and workflows)."""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from ..render.files import read_config, rel
from ..render.loader import InputError
from ..kube.image_ref import DOMAIN_NAME, REMOTE_NAME, split_image
from ..kube.values import DNS1123_LABEL
from ..render.paths import REPO

CONFIG_NAME = "gitops.yaml"

# The template's own placeholders: a fork that still names them in an environment that declares itself real
# (`real: true` in components/<env>/policy.yaml) is refused (rules ARGO010 and IMG004).
EXAMPLE_REPO_URL = "https://github.com/example/ddp-k8s-gitops.git"
EXAMPLE_IMAGE = "ghcr.io/example/ddp-trainer"
EXAMPLE_REGISTRY = "ghcr.io/example/"
# The digest the template pins before any image was pushed: it names no image of yours.
EXAMPLE_DIGEST = "sha256:cdd42983f830240e773f4c40e1c83c4e86ed9ddbd551b4fe8fa17de610c004dc"

# Argo CD's own namespace where the repository's Applications do not say (argocd/applicationset.yaml does).
ARGOCD_NAMESPACE = "argocd"


def system_namespace(namespace: str, argocd_namespace: str = ARGOCD_NAMESPACE) -> str | None:
    """Why a namespace is no place for a training environment, or None: the cluster's own (every `kube-*`:
    kube-system, kube-public, kube-node-lease) or Argo CD's, where its Applications and secrets live."""
    if namespace.startswith("kube-"):
        return "the cluster's own namespace (kube-*)"
    if namespace == argocd_namespace:
        return "Argo CD's own namespace"
    return None


def argocd_namespace(root: Path = REPO) -> str:
    """The namespace the repository's Applications live in: the ApplicationSet's, else Argo CD's default."""
    try:
        doc = read_config(root / "argocd" / "applicationset.yaml")
    except (InputError, yaml.YAMLError):
        return ARGOCD_NAMESPACE
    ns = ((doc or {}).get("metadata") or {}).get("namespace") if isinstance(doc, dict) else None
    return ns if isinstance(ns, str) and ns else ARGOCD_NAMESPACE


# An Argo CD cluster name (a Secret's `name` field): any non-empty text without spaces or template braces.
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,252}$")
# An image repository without tag or digest: [registry[:port]/]path, lowercase path components (the distribution
# reference grammar's parts, kube/image_ref.py; a registry written as a host name or IPv4 address).
IMAGE_REPOSITORY = re.compile(rf"^(?:{DOMAIN_NAME}(?::[0-9]+)?/)?{REMOTE_NAME}$")
# A repository URL Argo CD clones: https://, ssh:// or scp-like git@host:path.
REPO_URL = re.compile(r"^(?:https?://[^\s/]+/\S+|ssh://\S+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+)$")


class IdentityError(Exception):
    """gitops.yaml's identity is missing or malformed, or an argument is: one line naming the file and key."""


@dataclass(frozen=True)
class Place:
    """Where one environment's Application syncs: an Argo CD cluster name and a namespace."""

    cluster: str
    namespace: str


@dataclass
class Identity:
    repo_url: str
    image: str
    environments: dict[str, Place] = field(default_factory=dict)
    source: Path = REPO / CONFIG_NAME


def config_path(root: Path = REPO) -> Path:
    return Path(root) / CONFIG_NAME


def load(root: Path = REPO) -> Identity:
    """The identity declared in `root`/gitops.yaml; IdentityError (one line) for what is missing or malformed."""
    path = config_path(root)
    try:
        doc = read_config(path)
    except InputError as exc:  # unreadable, or past a bound
        raise IdentityError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise IdentityError(f"{_shown(path)}: cannot read: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict):
        raise IdentityError(f"{_shown(path)}: expected a mapping")
    url = (doc.get("argocd") or {}).get("repoURL") if isinstance(doc.get("argocd"), dict) else None
    if not isinstance(url, str) or not url.strip():
        raise IdentityError(f"{_shown(path)}: argocd.repoURL must be the repository URL Argo CD clones")
    ident = doc.get("identity")
    if not isinstance(ident, dict):
        raise IdentityError(f"{_shown(path)}: expected an `identity` mapping (image, environments)")
    image = ident.get("image")
    if not isinstance(image, str) or not IMAGE_REPOSITORY.match(image):
        raise IdentityError(f"{_shown(path)}: identity.image is {image!r}, expected an image repository without tag "
                            "or digest, such as registry.example.com/team/ddp-trainer")
    envs = ident.get("environments")
    if not isinstance(envs, dict):
        raise IdentityError(f"{_shown(path)}: identity.environments must map each environment to "
                            "{cluster: ..., namespace: ...}")
    places: dict[str, Place] = {}
    for name, entry in envs.items():
        where = f"identity.environments.{name}"
        if not isinstance(entry, dict) or set(entry) != {"cluster", "namespace"}:
            raise IdentityError(f"{_shown(path)}: {where} must be {{cluster: <Argo CD cluster name>, namespace: "
                                "<namespace>}}")
        cluster, namespace = entry["cluster"], entry["namespace"]
        if not isinstance(cluster, str) or not CLUSTER_NAME.match(cluster):
            raise IdentityError(f"{_shown(path)}: {where}.cluster is {cluster!r}, expected an Argo CD cluster name")
        if not isinstance(namespace, str) or not DNS1123_LABEL.match(namespace) or len(namespace) > 63:
            raise IdentityError(f"{_shown(path)}: {where}.namespace is {namespace!r}, expected a DNS-1123 label")
        places[str(name)] = Place(cluster, namespace)
    return Identity(url.strip(), image, places, path)


def _shown(path: Path) -> str:
    for base in (Path.cwd(), REPO):
        try:
            return str(Path(path).resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)


def same_url(a: Any, b: Any) -> bool:
    """Two repository URLs name the same repository (case, a trailing slash and `.git` aside)."""
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    norm: Callable[[str], str] = lambda u: u.strip().rstrip("/").removesuffix(".git").lower()
    return norm(a) == norm(b)


def is_example_repo(url: Any) -> bool:
    return same_url(url, EXAMPLE_REPO_URL)


def image_repository(image: str) -> str:
    """`registry/path:tag@sha256:...` -> `registry/path` (a port's colon is not a tag's)."""
    return split_image(image)[0]


def trainer_images(root: Path) -> frozenset[str]:
    """The image repositories known to hold this repository's trainer (the root Dockerfile's image): the template's
    example image and the `identity.image` of `root`'s gitops.yaml where it has a readable one (ARGO010 reports one
    that is not). Read once per state of the file: rules ask once per validation unit."""
    path = config_path(root)
    try:
        st = path.stat()
    except OSError:
        return frozenset({EXAMPLE_IMAGE})
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _TRAINER_IMAGES:
        try:
            declared = {load(root).image}
        except IdentityError:
            declared = set()
        _TRAINER_IMAGES.clear()  # one repository at a time in practice: keep the cache at one entry
        _TRAINER_IMAGES[key] = frozenset({EXAMPLE_IMAGE, *declared})
    return _TRAINER_IMAGES[key]


_TRAINER_IMAGES: dict[tuple[str, int, int], frozenset[str]] = {}


def is_example_image(image: Any) -> bool:
    return isinstance(image, str) and image_repository(image.strip()).startswith(EXAMPLE_REGISTRY)


def environments_in_tree(root: Path = REPO) -> list[str]:
    """The environments the tree holds: every overlays/<env> folder with at least one overlay in it. Tests and
    tools derive their lists from here, so a new environment is covered without editing them."""
    overlays = Path(root) / "overlays"
    if not overlays.is_dir():
        return []
    return sorted(d.name for d in overlays.iterdir()
                  if d.is_dir() and any(p.is_file() for p in d.glob("*/kustomization.yaml")))


# ---------------------------------------------------------------- every repetition, checked against it


def _line(text: str, needle: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    return 1


def _yaml(path: Path) -> tuple[str, Any]:
    text = path.read_text(encoding="utf-8")
    return text, yaml.safe_load(text)


def disagreements(root: Path = REPO, ident: Identity | None = None) -> list[str]:
    """Each place in `root` that repeats the identity and says otherwise, as `file:line: message`; empty when
    everything agrees. Reads the tree's environments, argocd/, base/, the components' `images:` and the Makefile."""
    root = Path(root)
    ident = ident or load(root)
    out: list[str] = []
    cfg = rel(ident.source, root)
    tree = environments_in_tree(root)
    for env in tree:
        if env not in ident.environments:
            out.append(f"{cfg}:1: environment {env} (overlays/{env}) is not declared in identity.environments")
        if not (root / "components" / env / "kustomization.yaml").is_file():
            out.append(f"overlays/{env}:1: environment {env} has no components/{env}/kustomization.yaml")
    for env in ident.environments:
        if env not in tree:
            out.append(f"{cfg}:1: identity.environments declares {env}, but overlays/{env} holds no overlay")
    out += _argocd(root, ident)
    out += _images(root, ident)
    make = root / "Makefile"
    if make.is_file():
        text = make.read_text(encoding="utf-8")
        m = re.search(r"^IMAGE\s*\?=\s*(\S+)\s*$", text, re.M)
        if m and m.group(1) != ident.image:
            out.append(f"Makefile:{_line(text, m.group(0))}: IMAGE ?= {m.group(1)}, but identity.image is "
                       f"{ident.image}")
    return out


def _argocd(root: Path, ident: Identity) -> list[str]:
    from .apps import ExpandError, expand
    from ..kube.objects import Manifest

    out: list[str] = []
    appset = root / "argocd" / "applicationset.yaml"
    if appset.is_file():
        text, doc = _yaml(appset)
        where = rel(appset, root)
        try:
            apps = list(expand(Manifest(doc, str(appset)))) if isinstance(doc, dict) else []
        except ExpandError as exc:
            return [f"{where}:1: cannot be expanded to check it against the identity: {exc}"]
        seen = set()
        for app in apps:
            env = (app.element or {}).get("env")
            seen.add(env)
            line = _line(text, f"env: {env}")
            if env not in ident.environments:
                out.append(f"{where}:{line}: element env {env} is not declared in gitops.yaml identity.environments")
                continue
            place = ident.environments[env]
            dest = app.destination
            if dest.get("name") != place.cluster or dest.get("namespace") != place.namespace:
                out.append(f"{where}:{line}: {env} syncs to cluster {dest.get('name')!r}, namespace "
                           f"{dest.get('namespace')!r}; gitops.yaml identity says {place.cluster!r}, "
                           f"{place.namespace!r}")
            for _, source in app.sources:
                if not same_url(source.get("repoURL"), ident.repo_url):
                    out.append(f"{where}:{_line(text, 'repoURL')}: {env} clones {source.get('repoURL')}, but "
                               f"gitops.yaml argocd.repoURL is {ident.repo_url}")
        for env in ident.environments:
            if env not in seen:
                out.append(f"{where}:1: no element for environment {env} (declared in gitops.yaml identity)")
    project = root / "argocd" / "appproject.yaml"
    if project.is_file():
        text, doc = _yaml(project)
        where = rel(project, root)
        spec = (doc or {}).get("spec") or {} if isinstance(doc, dict) else {}
        repos = spec.get("sourceRepos") or []
        if not any(same_url(r, ident.repo_url) for r in repos):
            out.append(f"{where}:{_line(text, 'sourceRepos')}: sourceRepos {repos} lack gitops.yaml argocd.repoURL "
                       f"{ident.repo_url}")
        dests = {(d.get("name"), d.get("namespace")) for d in spec.get("destinations") or [] if isinstance(d, dict)}
        for env, place in ident.environments.items():
            if (place.cluster, place.namespace) not in dests:
                out.append(f"{where}:{_line(text, 'destinations')}: destinations lack {{name: {place.cluster}, "
                           f"namespace: {place.namespace}}} (environment {env} in gitops.yaml identity)")
    return out


_IMAGE_LINE = re.compile(r"^\s*(?:-\s+)?image:\s*[\"']?([^\s\"'#]+)", re.M)


def _images(root: Path, ident: Identity) -> list[str]:
    out: list[str] = []
    for path in sorted((root / "base").rglob("*.yaml")) if (root / "base").is_dir() else []:
        text = path.read_text(encoding="utf-8")
        for m in _IMAGE_LINE.finditer(text):
            if image_repository(m.group(1)) != ident.image:
                line = text.count("\n", 0, m.start(1)) + 1
                out.append(f"{rel(path, root)}:{line}: image {m.group(1)} is not gitops.yaml identity.image "
                           f"{ident.image}")
    for env in environments_in_tree(root):
        kfile = root / "components" / env / "kustomization.yaml"
        if not kfile.is_file():
            continue
        text, doc = _yaml(kfile)
        for entry in (doc or {}).get("images") or [] if isinstance(doc, dict) else []:
            name = entry.get("name") if isinstance(entry, dict) else None
            if name != ident.image:
                out.append(f"{rel(kfile, root)}:{_line(text, f'name: {name}')}: images entry {name} is not "
                           f"gitops.yaml identity.image {ident.image}: it would not replace the bases' image")
    return out


def main(argv: list[str] | None = None) -> int:
    from ..entry import guarded

    args = list(sys.argv[1:] if argv is None else argv)

    def run() -> int:
        ident = load(REPO)
        if args == ["image"]:
            print(ident.image)
            return 0
        if args:
            raise IdentityError(f"unknown arguments {' '.join(args)} (use no argument, or `image`)")
        print(f"repository: {ident.repo_url}\nimage: {ident.image}")
        for env, place in ident.environments.items():
            print(f"environment {env}: cluster {place.cluster}, namespace {place.namespace}")
        found = disagreements(REPO, ident)
        for line in found:
            print(f"error: {line}", file=sys.stderr)
        return 1 if found else 0

    return guarded(run, (IdentityError,))


if __name__ == "__main__":
    sys.exit(main())
