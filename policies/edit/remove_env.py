"""`make remove-env ENV=<name> [DRY_RUN=1]`: remove an environment, the inverse of `make new-env`.

Deletes components/<ENV>/ and overlays/<ENV>/, and removes the environment's entry in gitops.yaml's identity, its
ApplicationSet element(s) and, where no other environment syncs there, its AppProject destination and its Namespace
in the project's clusterResourceWhitelist. Each entry is taken out as the lines it is written on (found by ruamel,
the result checked to hold exactly the other entries), so every other line, comment and blank line of those files
stays byte for byte. The result goes through the one edit pipeline (policies/edit/pipeline.py): validated on a copy of the
repository (policies/edit/repo_edit.py) and written in one transaction with the deletions, or nothing is; a killed run
is finished, or refused, by the next edit command.

Refused, with one line and nothing written: an ENV that is no environment (the environments are named), the last
environment, a folder of ENV that a kustomization elsewhere reads, a file in the folders that git does not hold as
committed (untracked, ignored, changed or staged: nothing a user wrote is lost that git cannot give back), a
repository that is no git checkout, and an overlay an interrupted make scale left half written. See
docs/environments.md.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

import yaml

from . import pipeline as edit, repo_edit, repo_validate
from .. import git
from ..argocd import identity
from ..kube.values import DNS1123_LABEL
from ..render import transaction
from ..entry import guarded
from ..render.files import rel
from ..render.paths import REPO
from ..render.kustomization import KUSTOMIZATION_FILES, kustomization_file, references
from .yamledit import YamlFile, edit_relative_to

if TYPE_CHECKING:
    from ruamel.yaml.comments import CommentedSeq

EditError = repo_edit.EditError
APPSET = Path("argocd") / "applicationset.yaml"
PROJECT = Path("argocd") / "appproject.yaml"
# Where a kustomization could read an environment's folders from, and the files whose mentions of its name are
# listed after a removal (the Lua checks' testdata under argocd/ are fixtures, not deployed).
KUSTOMIZE_ROOTS = ("base", "components", "overlays", "argocd")
MENTIONS = ("gitops.yaml", "Makefile", "base", "components", "overlays", "argocd")


# ---------------------------------------------------------------- what the repository says about its environments


def elements(root: Path) -> list[dict[str, Any]]:
    """The ApplicationSet's list generator elements (plain data)."""
    path = root / APPSET
    if not path.is_file():
        return []
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return []
    out = []
    for gen in ((doc or {}).get("spec") or {}).get("generators") or [] if isinstance(doc, dict) else []:
        items = ((gen or {}).get("list") or {}).get("elements") if isinstance(gen, dict) else None
        out += [e for e in items or [] if isinstance(e, dict)]
    return out


def known(root: Path, ident: identity.Identity) -> list[str]:
    """Every environment the repository names: overlays/<env>, gitops.yaml's identity, the ApplicationSet's elements
    (in that order, once each)."""
    names = identity.environments_in_tree(root) + list(ident.environments)
    names += [str(e["env"]) for e in elements(root) if isinstance(e.get("env"), str)]
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------- refusals


def check_name(env: str) -> None:
    if not env:
        raise EditError("ENV is required, e.g. make remove-env ENV=a100-2x8 (DRY_RUN=1 shows what it would remove)")


def check_known(env: str, names: list[str], tree: list[str]) -> None:
    if env not in names or not DNS1123_LABEL.match(env):
        raise EditError(f"ENV '{env}' is not an environment of this repository ({', '.join(names) or 'none'})")
    if not [e for e in tree if e != env]:
        raise EditError(f"{env} is the last environment of this repository: make another first (make new-env), "
                        "then remove this one")


def folders(root: Path, env: str) -> list[Path]:
    """The environment's folders that exist: components/<env>, overlays/<env>."""
    out = []
    for top in ("components", "overlays"):
        d = root / top / env
        if d.is_symlink():
            raise EditError(f"{top}/{env} is a symbolic link: remove it by hand (git rm), then run this again")
        if d.is_dir():
            out.append(d)
    return out


def files_in(folder: Path) -> list[Path]:
    """Every entry of `folder` that is not a folder (a symbolic link is one entry, never followed)."""
    out = []
    for here, dirs, names in os.walk(folder):
        out += [Path(here) / n for n in names]
        out += [Path(here) / d for d in dirs if (Path(here) / d).is_symlink()]
    return sorted(out)


def check_pending(root: Path, gone: list[Path]) -> None:
    """An overlay of the environment that an interrupted make scale or make new-run left half written."""
    for folder in gone:
        for journal in sorted(folder.rglob(transaction.JOURNAL)):
            raise EditError(transaction.pending(journal.parent) or f"{rel(journal, root)}: an interrupted change")


def check_references(root: Path, env: str, gone: list[Path]) -> None:
    """No kustomization outside the environment's folders may read a file or folder inside them."""
    targets = [d.resolve() for d in gone]
    inside: Callable[[Path], bool] = lambda p: any(p == t or t in p.parents for t in targets)  # noqa: E731
    for top in KUSTOMIZE_ROOTS:
        for here, _, names in os.walk(root / top):
            folder = Path(here)
            if inside(folder.resolve()) or not any(n in names for n in KUSTOMIZATION_FILES):
                continue
            kfile = kustomization_file(folder)
            if kfile is None:
                continue
            try:
                doc = yaml.safe_load(kfile.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError, UnicodeDecodeError):
                continue  # make validate says what is wrong with it
            if not isinstance(doc, dict):
                continue
            for field, ref, _ in references(doc):
                try:
                    target = (folder / ref).resolve()
                except (OSError, RuntimeError, ValueError):
                    continue
                if inside(target):
                    raise EditError(f"{rel(kfile, root)}: {field} '{ref}' reads {rel(target, root)}, which "
                                    f"make remove-env ENV={env} would delete: change that kustomization first")


def check_committed(root: Path, gone: list[Path]) -> None:
    """Every file to delete is committed in git as it is: nothing a user wrote may be lost."""
    if not gone:
        return
    try:
        top = git.run(root, "rev-parse", "--show-toplevel", timeout=60)
    except git.GitError as exc:
        raise EditError(f"{exc}: make remove-env deletes only files git holds committed, and "
                        "cannot check that here; nothing was written") from None
    if top.returncode != 0 and "not a git repository" not in top.stderr:
        raise EditError(f"git cannot read {root}: {(top.stderr.strip().splitlines() or ['?'])[-1]}; make remove-env "
                        "deletes only files git holds committed, and cannot check that here; nothing was written")
    if top.returncode != 0:
        raise EditError(f"{root} is not a git checkout: make remove-env deletes only files git holds committed "
                        f"(so that git can give them back), and cannot check that here; delete "
                        f"{' and '.join(rel(d, root) + '/' for d in gone)} by hand if you mean it")
    specs = [str(d.relative_to(root)) for d in gone]
    proc = git.run(root, "status", "--porcelain=v1", "-z", "--ignored=matching", "--untracked-files=all", "--", *specs,
                   binary=True, timeout=300)
    if proc.returncode != 0:
        raise EditError(f"git status failed: {proc.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
    base = Path(top.stdout.strip())
    fields = proc.stdout.decode(errors="surrogateescape").split("\0")
    dirty: list[tuple[str, Path]] = []
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], base / entry[3:]
        if code[0] in "RC":
            i += 1  # the rename's source follows
        if path.name.endswith(transaction.TMP_SUFFIX):
            continue  # a killed make scale's temporary file: deleted with the folder
        if not os.path.lexists(path):
            continue  # deleted by hand already: nothing to lose
        dirty.append((code, path))
    if dirty:
        what = {"??": "untracked", "!!": "ignored by git"}
        code, path = dirty[0]
        more = f" (and {len(dirty) - 1} more)" if len(dirty) > 1 else ""
        raise EditError(f"{rel(path, root)} is {what.get(code, 'changed and not committed')}{more}: make remove-env "
                        "deletes only what git holds committed; commit or stash it (git stash -u), or move it out "
                        "of the folder, then run this again")


# ---------------------------------------------------------------- the entries taken out, as lines


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _span(lines: list[str], start: int) -> tuple[int, int]:
    """The lines of the entry that begins on `start`: it and every line more indented below it, without the comment
    and blank lines that end it (they introduce what follows)."""
    ind = _indent(lines[start])
    end = start + 1
    while end < len(lines):
        s = lines[end]
        if s.strip() and not s.lstrip().startswith("#") and _indent(s) <= ind:
            break
        end += 1
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return start, end


def _drop(root: Path, path: Path, f: YamlFile, starts: list[int], expected: Any, what: str,
          notes: list[str]) -> str:
    """The text of `f` without the entries that begin on the lines `starts`, checked to read as `expected`."""
    lines = f.original.splitlines(keepends=True)
    for start in sorted(set(starts), reverse=True):
        a, b = _span(lines, start)
        above = lines[a - 1] if a > 0 else ""
        if above.lstrip().startswith("#") and _indent(above) == _indent(lines[a]):
            notes.append(f"{rel(path, root)}:{a}: the comment above the {what} removed stays; check it still says "
                         f"something true: {above.strip()}")
        del lines[a:b]
    text = "".join(lines)
    try:
        ok = yaml.safe_load(text) == expected
    except yaml.YAMLError:
        ok = False
    if not ok:
        raise EditError(f"{rel(path, root)}: the {what} cannot be taken out line by line without changing anything "
                        "else (written in a style this command does not edit); remove it by hand")
    return text


def _identity(root: Path, env: str, notes: list[str]) -> tuple[Path, str] | None:
    path = identity.config_path(root)
    f = YamlFile.load(path)
    envs = f.docs[0]["identity"]["environments"]
    if env not in envs:
        return None
    expected = yaml.safe_load(f.original)
    del expected["identity"]["environments"][env]
    return path, _drop(root, path, f, [envs.lc.key(env)[0]], expected, f"identity entry of {env}", notes)


def _appset(root: Path, env: str, notes: list[str]) -> tuple[Path, str] | None:
    path = root / APPSET
    if not path.is_file():
        return None
    f = YamlFile.load(path)
    expected = yaml.safe_load(f.original)
    starts = []
    spec = f.docs[0].get("spec") if isinstance(f.docs[0], dict) else None
    gens = spec.get("generators") if isinstance(spec, dict) else None
    for gen, plain in zip(gens if isinstance(gens, list) else [], expected["spec"]["generators"] if gens else []):
        items = (gen.get("list") or {}).get("elements") if isinstance(gen, dict) else None
        if not isinstance(items, list) or not items:
            continue
        starts += [cast("CommentedSeq", items).lc.item(i)[0] for i, e in enumerate(items)
                   if isinstance(e, dict) and e.get("env") == env]
        plain["list"]["elements"] = [e for e in plain["list"]["elements"]
                                     if not (isinstance(e, dict) and e.get("env") == env)]
    if not starts:
        return None
    return path, _drop(root, path, f, starts, expected, f"element of {env}", notes)


def _project(root: Path, place: identity.Place | None, others: list[identity.Place],
             notes: list[str]) -> tuple[Path, str] | None:
    """The AppProject without the environment's destination and Namespace, where no other environment uses them."""
    path = root / PROJECT
    if place is None or not path.is_file():
        return None
    f = YamlFile.load(path)
    spec = f.docs[0].get("spec") if isinstance(f.docs[0], dict) else None
    if not isinstance(spec, dict):
        return None
    expected = yaml.safe_load(f.original)
    plain = expected["spec"]
    starts = []
    if (place.cluster, place.namespace) not in {(p.cluster, p.namespace) for p in others}:
        dests = spec.get("destinations") or []
        hit = [i for i, d in enumerate(dests) if isinstance(d, dict)
               and (d.get("name"), d.get("namespace")) == (place.cluster, place.namespace)]
        if hit:
            starts += [cast("CommentedSeq", dests).lc.item(i)[0] for i in hit]
            plain["destinations"] = [d for i, d in enumerate(plain["destinations"]) if i not in hit]
    if place.namespace not in {p.namespace for p in others}:
        whitelist = spec.get("clusterResourceWhitelist") or []
        hit = [i for i, e in enumerate(whitelist) if isinstance(e, dict) and e.get("kind") == "Namespace"
               and not e.get("group") and e.get("name") == place.namespace]
        if hit:
            starts += [cast("CommentedSeq", whitelist).lc.item(i)[0] for i in hit]
            plain["clusterResourceWhitelist"] = [e for i, e in enumerate(plain["clusterResourceWhitelist"])
                                                 if i not in hit]
    if not starts:
        return None
    return path, _drop(root, path, f, starts, expected, "destination or Namespace", notes)


def mentions(root: Path, env: str, changes: dict[Path, str | None]) -> list[str]:
    """Lines the deployed files would still hold that name the environment (comments, a Makefile default)."""
    word = re.compile(rf"(?<![\w-]){re.escape(env)}(?![\w-])")
    out = []
    for name in MENTIONS:
        top = root / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()
                                                   and "testdata" not in p.relative_to(top).parts
                                                   and (p.suffix in (".yaml", ".yml") or p.name == "Kustomization"))
        for p in paths:
            if p in changes and changes[p] is None:
                continue
            try:
                known = changes.get(p)  # never None here: a deleted file was skipped above
                text = known if known is not None else p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            out += [f"{rel(p, root)}:{i}: {ln.strip()}" for i, ln in enumerate(text.splitlines(), 1)
                    if word.search(ln)]
    return out


def _preserves(root: Path) -> bool:
    try:
        doc = yaml.safe_load((root / APPSET).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    policy = ((doc or {}).get("spec") or {}).get("syncPolicy") if isinstance(doc, dict) else None
    return isinstance(policy, dict) and policy.get("preserveResourcesOnDeletion") is True


# ---------------------------------------------------------------- the whole change


def make(root: Path, env: str, ident: identity.Identity) -> tuple[dict[Path, str | None], list[str]]:
    notes: list[str] = []
    gone = folders(root, env)
    check_pending(root, gone)
    check_references(root, env, gone)
    check_committed(root, gone)
    changes: dict[Path, str | None] = {}
    own = [e for e in elements(root) if e.get("env") == env]
    place = ident.environments.get(env) or next(
        (identity.Place(str(e["cluster"]), str(e["namespace"])) for e in own
         if isinstance(e.get("cluster"), str) and isinstance(e.get("namespace"), str)), None)
    others = [p for name, p in ident.environments.items() if name != env]
    others += [identity.Place(str(e.get("cluster")), str(e.get("namespace"))) for e in elements(root)
               if e.get("env") != env]
    for edit in (_identity(root, env, notes), _appset(root, env, notes), _project(root, place, others, notes)):
        if edit is not None:
            changes[edit[0]] = edit[1]
    for d in gone:  # after the edits, as the transaction deletes them
        changes.update({p: None for p in files_in(d)})
    left = mentions(root, env, changes)
    if left:
        notes.append(f"still named in {left[0]}" + (f" (and {len(left) - 1} more)" if len(left) > 1 else "")
                     + "; check what each says")
    if place is not None and own:
        notes.append(f"once merged, Argo CD deletes the Application of {env}; "
                     + (f"what it deployed stays in namespace {place.namespace} on cluster {place.cluster} (the "
                        "ApplicationSet's preserveResourcesOnDeletion): delete it there when its run is done"
                        if _preserves(root) else f"Argo CD deletes what it deployed to namespace {place.namespace} "
                        f"on cluster {place.cluster}, a running training job too"))
    return changes, notes


def run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    edit_relative_to(root)
    env = args.env or ""
    check_name(env)
    notes: list[str] = []
    rc = edit.apply(repo_edit.scope(root, "remove-env"), lambda session: plan(root, env, session, notes),
                    lambda c: repo_validate.validate(root, c), args.dry_run)
    if rc == 0:
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    return rc


def plan(root: Path, env: str, session: edit.Session, notes: list[str]) -> dict[Path, str | None] | None:
    """make remove-env's plan (run under the repository's lock, after any recovery): the environment checked and
    its overlays locked, then the edits and deletions; None when the recovery finished the make remove-env that
    removed it. What to tell the user once it is written is added to `notes`."""
    ident = identity.load(root)
    tree = identity.environments_in_tree(root)
    names = known(root, ident)
    mine = [root / "components" / env, root / "overlays" / env]
    if env not in names and any(d in p.parents for p in session.finished for d in mine):
        print(f"{env}: the interrupted make remove-env that removed it is finished", file=sys.stderr)
        return None
    check_known(env, names, tree)
    # The environment's overlays, locked against a make scale or make new-run on them while they are deleted.
    for kfile in sorted((root / "overlays" / env).glob("*/kustomization.yaml")):
        session.hold(edit.Lock(kfile.parent))
    out, said = make(root, env, ident)
    gone = [d for d in (root / "components" / env, root / "overlays" / env) if d.is_dir()]
    print(f"{env}: removing " + (" and ".join(f"{rel(d, root)}/ ({len(files_in(d))} files)" for d in gone)
                                 or "its entries") + ", its identity and Argo CD entries", file=sys.stderr)
    notes += said
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m policies.edit.remove_env", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", help="the environment to remove, e.g. a100-2x8")
    ap.add_argument("--dry-run", action="store_true", help="print the unified diff, write and delete nothing")
    ap.add_argument("--root", default=str(REPO), help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return guarded(lambda: run(args), (EditError, git.GitError, identity.IdentityError, transaction.TransactionError))


if __name__ == "__main__":
    sys.exit(main())
