"""`make init REPO_URL=... IMAGE=... [CLUSTERS="env=cluster ..."] [NAMESPACES="env=namespace ..."] [DRY_RUN=1]`:
make the template yours. Rewrites the identity in gitops.yaml (the repository URL Argo CD clones, the trainer
image's repository, each environment's Argo CD cluster and namespace) and every file that repeats it: the
ApplicationSet's template and elements, the AppProject's source repository and destinations, the `images:` entries
of the components, the bases' images and the Makefile's IMAGE. Round-trip edits keep comments and layout; the
result goes through the one edit pipeline (policies/edit/pipeline.py): validated on a copy of the repository
(policies/edit/repo_edit.py) and written in one transaction, every file or none."""
from __future__ import annotations

import argparse
import re
import sys
from typing import Any
from pathlib import Path

from ruamel.yaml.comments import CommentedMap

from . import pipeline as edit, repo_edit, repo_validate
from ..argocd import identity
from ..kube.values import DNS1123_LABEL
from ..render import transaction
from ..entry import guarded
from ..argocd.identity import Identity, Place
from ..render.paths import REPO
from .scale_edits import ScaleError
from .yamledit import YamlFile, set_scalar


def pairs(raw: str | None, what: str, envs: dict[str, Place]) -> dict[str, str]:
    """`"env=value env=value"` (spaces or commas between pairs) -> {env: value}, each env one the identity
    declares."""
    out: dict[str, str] = {}
    for item in re.split(r"[\s,]+", (raw or "").strip()):
        if not item:
            continue
        env, eq, value = item.partition("=")
        if not eq or not env or not value:
            raise repo_edit.EditError(f"{what}: '{item}' is not <environment>=<value>")
        if env not in envs:
            raise repo_edit.EditError(f"{what}: '{env}' is not an environment gitops.yaml declares "
                                      f"({', '.join(envs)})")
        out[env] = value
    return out


def check_inputs(ident: Identity, repo_url: str | None, image: str | None, clusters: dict[str, str],
                 namespaces: dict[str, str], argocd_namespace: str = identity.ARGOCD_NAMESPACE) -> None:
    if not any((repo_url, image, clusters, namespaces)):
        raise repo_edit.EditError("nothing to do: give REPO_URL=<the repository Argo CD clones> and IMAGE=<registry>/"
                                  "<repository> (and CLUSTERS=, NAMESPACES= for the Argo CD destinations)")
    if repo_url is not None:
        if not identity.REPO_URL.match(repo_url):
            raise repo_edit.EditError(f"REPO_URL '{repo_url}' is not a repository URL (https://host/owner/repo.git, "
                                      "ssh://... or git@host:owner/repo.git)")
        if identity.is_example_repo(repo_url):
            raise repo_edit.EditError("REPO_URL is the template's example repository: give the URL of yours")
    if image is not None:
        bare = identity.image_repository(image)
        if bare != image:
            raise repo_edit.EditError(f"IMAGE '{image}' names a tag or digest: give the repository alone "
                                      f"({bare}); releases pin their tag and digest (docs/deploy.md)")
        if not identity.IMAGE_REPOSITORY.match(image):
            raise repo_edit.EditError(f"IMAGE '{image}' is not an image repository (lowercase, e.g. "
                                      "registry.example.com/team/ddp-trainer)")
        if identity.is_example_image(image):
            raise repo_edit.EditError(f"IMAGE is in the template's example registry ({identity.EXAMPLE_REGISTRY}): "
                                      "give your registry's")
    for env, cluster in clusters.items():
        if not identity.CLUSTER_NAME.match(cluster) or "{" in cluster:
            raise repo_edit.EditError(f"CLUSTERS: '{cluster}' (for {env}) is not an Argo CD cluster name")
    for env, ns in namespaces.items():
        if not DNS1123_LABEL.match(ns) or len(ns) > 63:
            raise repo_edit.EditError(f"NAMESPACES: '{ns}' (for {env}) is not a namespace name (a DNS-1123 label: "
                                      "lowercase letters, digits and '-', 63 at most)")
        why = identity.system_namespace(ns, argocd_namespace)
        if why:
            raise repo_edit.EditError(f"NAMESPACES: '{ns}' (for {env}) is {why}: a training environment gets a "
                                      "namespace of its own")


def _yaml(path: Path) -> YamlFile:
    try:
        return YamlFile.load(path)
    except ScaleError as exc:
        raise repo_edit.EditError(str(exc)) from None


def plan(root: Path, ident: Identity, repo_url: str, image: str, places: dict[str, Place]) -> dict[Path, str]:
    """The new text of every file that repeats the identity (files already right are left out by the caller)."""
    changes: dict[Path, str] = {}
    old_places = ident.environments

    f = _yaml(identity.config_path(root))
    doc = f.docs[0]
    set_scalar(doc["argocd"], "repoURL", repo_url)
    set_scalar(doc["identity"], "image", image)
    for env, place in places.items():
        entry = doc["identity"]["environments"][env]
        set_scalar(entry, "cluster", place.cluster)
        set_scalar(entry, "namespace", place.namespace)
    changes[f.path] = f.dump()

    appset = root / "argocd" / "applicationset.yaml"
    if appset.is_file():
        f = _yaml(appset)
        spec = f.docs[0]["spec"]
        source = spec["template"]["spec"]["source"]
        if identity.same_url(source.get("repoURL"), ident.repo_url):
            set_scalar(source, "repoURL", repo_url)
        for gen in spec.get("generators") or []:
            for element in ((gen.get("list") or {}).get("elements") or []) if isinstance(gen, dict) else []:
                at = places.get(element.get("env")) if isinstance(element, CommentedMap) else None
                if at is None:
                    continue
                for key, value in (("cluster", at.cluster), ("namespace", at.namespace)):
                    if key in element:
                        set_scalar(element, key, value)
        changes[appset] = f.dump()

    project = root / "argocd" / "appproject.yaml"
    if project.is_file():
        f = _yaml(project)
        spec = f.docs[0]["spec"]
        repos = spec.get("sourceRepos") or []
        for i, url in enumerate(repos):
            if identity.same_url(url, ident.repo_url):
                set_scalar(repos, i, repo_url)
        moved: dict[tuple[Any, Any], Place] = {(p.cluster, p.namespace): places[env] for env, p in old_places.items()
                                               if env in places}
        for dest in spec.get("destinations") or []:
            target = moved.get((dest.get("name"), dest.get("namespace"))) if isinstance(dest, dict) else None
            if target is not None:
                set_scalar(dest, "name", target.cluster)
                set_scalar(dest, "namespace", target.namespace)
        # The Namespace each environment's Application creates (CreateNamespace=true) is whitelisted by name: it
        # moves with the environment's namespace, or the sync is refused (ARGO008).
        renamed = {p.namespace: places[env].namespace for env, p in old_places.items() if env in places}
        for entry in spec.get("clusterResourceWhitelist") or []:
            if (isinstance(entry, dict) and entry.get("group", "") == "" and entry.get("kind") == "Namespace"
                    and entry.get("name") in renamed):
                set_scalar(entry, "name", renamed[entry["name"]])
        changes[project] = f.dump()

    for kfile in sorted((root / "components").glob("*/kustomization.yaml")):
        f = _yaml(kfile)
        doc = f.docs[0]
        for entry in (doc.get("images") or []) if isinstance(doc, dict) else []:
            if isinstance(entry, dict) and entry.get("name") == ident.image:
                set_scalar(entry, "name", image)
        changes[kfile] = f.dump()

    line = re.compile(r"^(\s*(?:-\s+)?image:\s*[\"']?)" + re.escape(ident.image) + r"(?=[:@\"'\s]|$)", re.M)
    for path in sorted((root / "base").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        changes[path] = line.sub(lambda m: m.group(1) + image, text)

    # The Argo CD plugin's sidecar image lives beside the trainer's, in the same registry and owner (CMP_SIDECAR).
    old_cmp, new_cmp = sidecar_image(ident.image), sidecar_image(image)
    make = root / "Makefile"
    if make.is_file():
        text = make.read_text(encoding="utf-8")
        text = re.sub(r"^(IMAGE\s*\?=\s*)" + re.escape(ident.image) + r"\s*$",
                      lambda m: m.group(1) + image, text, flags=re.M)
        changes[make] = re.sub(r"^(CMP_IMAGE\s*\?=\s*)" + re.escape(old_cmp) + r"\s*$",
                               lambda m: m.group(1) + new_cmp, text, flags=re.M)
    patch = root / "argocd" / "cmp" / "repo-server-patch.yaml"
    if patch.is_file():
        cmp_line = re.compile(r"^(\s*image:\s*[\"']?)" + re.escape(old_cmp) + r"(?=[:@\"'\s]|$)", re.M)
        changes[patch] = cmp_line.sub(lambda m: m.group(1) + new_cmp, patch.read_text(encoding="utf-8"))
    changes.update(_published(root, ident.repo_url, repo_url))
    return changes


# What other repositories are told to use: the Action (`uses: owner/name@ref`), the pre-commit hook (`repo: URL`)
# and the package (`pip install git+URL@ref`), in the files that say it.
PUBLISHED = ("action.yml", ".pre-commit-hooks.yaml", "docs/install.md")


def _published(root: Path, old_url: str, new_url: str) -> dict[Path, str]:
    old_base, new_base = old_url.removesuffix(".git"), new_url.removesuffix(".git")
    old_slug, new_slug = _slug(old_url), _slug(new_url)
    out: dict[Path, str] = {}
    for name in PUBLISHED:
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        new = re.sub(re.escape(old_base) + r"(?:\.git)?(?![\w.-])", new_base, text)
        if old_slug and new_slug:  # `uses: owner/name@ref` (GitHub, or GitHub Enterprise's same form)
            new = re.sub(r"(?<![\w./-])" + re.escape(old_slug) + r"(?=@)", new_slug, new)
        out[path] = new
    return out


def _slug(url: str) -> str | None:
    """owner/name of a repository URL (https://host/owner/name.git), where its path has exactly that form."""
    m = re.match(r"^(?:https?://|ssh://git@|git@)[^/:]+[/:]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", url)
    return f"{m.group(1)}/{m.group(2)}" if m else None


CMP_SIDECAR = "ddp-argocd-cmp"


def sidecar_image(image: str) -> str:
    """The plugin sidecar's image repository for a trainer image repository: the same registry and owner."""
    return f"{image.rsplit('/', 1)[0]}/{CMP_SIDECAR}" if "/" in image else CMP_SIDECAR


def run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    rc = edit.apply(repo_edit.scope(root, "init"), lambda _session: plan_from(root, args),
                    lambda c: repo_validate.validate(root, c), args.dry_run)
    if rc == 0 and not args.dry_run:
        now = identity.load(root)
        if identity.is_example_repo(now.repo_url) or identity.is_example_image(now.image):
            print("note: the repository still names the template's example "
                  + ("repository" if identity.is_example_repo(now.repo_url) else "registry")
                  + "; give REPO_URL= and IMAGE= before an environment declares itself real", file=sys.stderr)
        print("next: commit, push, build and pin the image, bootstrap Argo CD (docs/deploy.md)", file=sys.stderr)
    return rc


def plan_from(root: Path, args: argparse.Namespace) -> dict[Path, str]:
    """make init's plan (run under the repository's lock, after any recovery): the inputs checked, then the new text
    of every file that repeats the identity."""
    ident = identity.load(root)
    clusters = pairs(args.clusters, "CLUSTERS", ident.environments)
    namespaces = pairs(args.namespaces, "NAMESPACES", ident.environments)
    repo_url, image = args.repo_url or None, args.image or None
    check_inputs(ident, repo_url, image, clusters, namespaces, identity.argocd_namespace(root))
    before = identity.disagreements(root, ident)
    if before:
        raise repo_edit.EditError("the repository already disagrees with gitops.yaml's identity, so it cannot be "
                                  f"rewritten from it: {before[0]}" + (f" (and {len(before) - 1} more; "
                                  "`python -m policies.argocd.identity` lists them)" if len(before) > 1 else ""))
    places = {env: Place(clusters.get(env, p.cluster), namespaces.get(env, p.namespace))
              for env, p in ident.environments.items()}
    return plan(root, ident, repo_url or ident.repo_url, image or ident.image, places)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m policies.edit.init", description=__doc__)
    ap.add_argument("--repo-url", help="the repository Argo CD clones (your fork), e.g. https://github.com/acme/ml.git")
    ap.add_argument("--image", help="the trainer image's repository, without tag or digest")
    ap.add_argument("--clusters", help='Argo CD cluster names, "env=cluster env=cluster"')
    ap.add_argument("--namespaces", help='namespaces, "env=namespace env=namespace"')
    ap.add_argument("--dry-run", action="store_true", help="print the unified diff, write nothing")
    ap.add_argument("--root", default=str(REPO), help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return guarded(lambda: run(args), (repo_edit.EditError, identity.IdentityError, ScaleError,
                                       transaction.TransactionError))


if __name__ == "__main__":
    sys.exit(main())
