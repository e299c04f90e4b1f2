"""Pin a released trainer image in every environment (`images:` in components/<env>/kustomization.yaml, for each
<env> that has an overlays/<env>/ folder; feature components such as monitoring are left alone), with the same
round-trip editing as `make scale` (yamledit.py); the image workflow runs it on a tag and opens a pull request. Every environment
is pinned or none: the change goes through the one edit pipeline (policies/edit/pipeline.py) with components/ as its scope,
written as one transaction (policies/render/transaction.py) under a lock on components/, and a run interrupted part way is
finished by the next run before its own change. The pinned repository is validated first, on a scratch copy, with
the validator make init, make new-env and make remove-env use (policies/edit/repo_validate.py: the identity check and
make validate over overlays/ and argocd/): a pin that would make an overlay invalid (a tag without a digest where an
environment sets `requireImageDigest`, IMG002) is refused and nothing is written."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Callable

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from . import pipeline as edit, repo_validate
from ..argocd import identity
from ..render import transaction
from ..entry import guarded
from .yamledit import EditError, YamlFile, rel
from ..render.paths import REPO


# An environment runs the CPU-only image (Dockerfile.cpu, tagged <version>-cpu) where it runs one now.
CPU_SUFFIX = "-cpu"
TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def pin(root: Path, tag: str, digest: str | None, cpu_digest: str | None, name: str | None,
        image: str | None = None) -> dict[Path, str]:
    """The new text of every component kustomization whose `images` entry (or lack of one) needs a change; `image`
    defaults to gitops.yaml's identity.image."""
    if image is None:
        try:
            image = identity.load(root).image
        except identity.IdentityError as exc:
            raise EditError(str(exc)) from None
    if not TAG.match(tag):
        raise EditError(f"TAG '{tag}' is not a valid image tag")
    for label, d in (("DIGEST", digest), ("CPU_DIGEST", cpu_digest)):
        if d is not None and not DIGEST.match(d):
            raise EditError(f"{label} '{d}' is not sha256:<64 hex digits>")
    out: dict[Path, str] = {}
    environments = {p.name for p in (root / "overlays").iterdir() if p.is_dir()} if (root / "overlays").is_dir() \
        else set()
    if not environments:
        raise EditError(f"{rel(root / 'overlays')}: no environment folder (overlays/<env>/): nothing to pin")
    for kfile in sorted((root / "components").glob("*/kustomization.yaml")):
        env = kfile.parent.name
        if env not in environments:
            continue  # a feature component (monitoring, causal-lm): its images entry would override an environment's
        f = YamlFile.load(kfile)
        doc = f.docs[0]
        if not isinstance(doc, CommentedMap):
            continue
        images = doc.get("images")
        current = next((e for e in images or [] if isinstance(e, dict) and e.get("name") == image), None)
        cpu = current is not None and str(current.get("newTag") or "").endswith(CPU_SUFFIX)
        want_tag, want_digest = (f"{tag}{CPU_SUFFIX}", cpu_digest) if cpu else (tag, digest)
        if images is None:
            images = CommentedSeq()
            pos = list(doc).index("configMapGenerator") if "configMapGenerator" in doc else len(doc)
            doc.insert(pos, "images", images)
        entry = next((e for e in images if isinstance(e, dict) and e.get("name") == image), None)
        if entry is None:
            entry = CommentedMap([("name", image)])
            images.append(entry)
        if name and name != image:
            entry["newName"] = name
        elif "newName" in entry:
            del entry["newName"]
        entry["newTag"] = want_tag
        if want_digest:
            entry["digest"] = want_digest
        elif "digest" in entry:
            del entry["digest"]  # a digest from an older release would win over the new tag
        text = f.dump()
        if text != f.original:
            out[kfile] = text
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policies.edit.pin_image", description=__doc__)
    ap.add_argument("--tag", required=True, help="the released version, e.g. 0.2.0 (the CPU image is <tag>-cpu)")
    ap.add_argument("--digest", help="sha256 digest of the GPU image")
    ap.add_argument("--cpu-digest", help="sha256 digest of the CPU image")
    ap.add_argument("--name", help="registry/repository the images were pushed to, if not gitops.yaml's "
                    "identity.image")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--root", default=str(REPO), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    return guarded(lambda: apply(args), (EditError, transaction.TransactionError))


def apply(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    folder = root / "components"
    if not folder.is_dir():
        raise EditError(f"{rel(folder)}: no such folder")
    return edit.apply(scope(folder, args.tag),
                      lambda _session: pin(root, args.tag, args.digest, args.cpu_digest, args.name),
                      lambda changes: repo_validate.validate(root, changes), args.dry_run)


def scope(folder: Path, tag: str, shown: Callable[[Path], str] = rel) -> edit.Scope:
    """components/ as the scope of one edit (policies/edit/pipeline.py): locked against make init, make new-env and make
    remove-env (which lock it too, and finish an interrupted pin first), its journal finished by the next run, and
    the lines the image workflow knows. `apply` validates the pinned repository as make init does
    (repo_validate.validate); this scope is also make init's inner one, whose recovery validates nothing."""
    name = shown(folder)
    return edit.Scope(
        folder=folder, locks=(edit.Lock(folder, "pin_image", "folder"),), name=name,
        half_written=lambda: (f"{name}: an interrupted pin_image left the environments half pinned "
                              f"({transaction.JOURNAL}); run it again without --dry-run to finish it"),
        shown=shown,
        words=edit.Words(finished_prefix=f"{name}: ", finished_noun="pinning", finished_verb_per_file=False,
                         nothing=f"every environment already runs {tag}",
                         would_change=lambda path: f"would change {path}",
                         written=lambda path: f"pinned {tag} in {path}"))


if __name__ == "__main__":
    sys.exit(main())
