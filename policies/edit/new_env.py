"""`make new-env ENV=<name> FROM=<env> NODES=N GPUS_PER_NODE=G [GPU=A100] [GPU_LABEL=key=value]
[TOLERATION=key[=value]:Effect] [GPU_RESOURCE=nvidia.com/gpu] [CLUSTER=...] [NAMESPACE=...] [LAUNCHER=...]
[DRY_RUN=1]`: a new environment for your cluster, made from an existing one.

Copies components/<FROM> to components/<ENV> and every overlays/<FROM>/<launcher> that `make scale` can resize to
overlays/<ENV>/<launcher>; resizes each to NODES x GPUS_PER_NODE (pods, processes, GPUs, and the CPU, memory and
/dev/shm that follow from them, as `make scale` does); sets the accelerator node label, the toleration and the GPU
resource name where given; rewrites the environment's name, the hardware's name and the sizes in comments and
descriptions; writes the environment's declaration (`policy.yaml`: GPUs per node, capacity, `real: true`), its
entry in gitops.yaml's identity, its ApplicationSet element and its AppProject destination. The whole result goes
through the one edit pipeline (policies/edit/pipeline.py): validated on a copy of the repository (policies/edit/repo_edit.py)
and written in one transaction, or nothing is. See docs/environments.md.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from . import pipeline as edit, repo_edit, repo_validate, scale, scale_edits, yamledit
from ..rules import environment
from ..argocd import identity
from ..kube.values import DNS1123_LABEL
from .. import launchers
from ..render import transaction
from ..entry import guarded
from ..render.files import rel
from ..render.paths import REPO
from ..argocd.identity import Identity
from .new_env_text import Request, Source, Words, component_patch, policy_text
from .yamledit import edit_relative_to

EditError = repo_edit.EditError
_TOPOLOGY_HEADER = re.compile(r"\b(\d+) nodes x (\d+) ([A-Za-z][\w-]*)")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@dataclass
class Result:
    changes: dict[Path, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- arguments


def parse_label(raw: str | None) -> tuple[str, str] | None:
    if not raw:
        return None
    key, eq, value = raw.partition("=")
    if not eq or not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value) or not value:
        raise EditError(f"GPU_LABEL '{raw}' is not <label key>=<value>, e.g. "
                        "cloud.google.com/gke-accelerator=nvidia-tesla-a100")
    return key, value


def parse_toleration(raw: str | None) -> dict[str, str] | None:
    """`key:Effect` (operator Exists) or `key=value:Effect` (operator Equal), as `kubectl taint` writes a taint."""
    if not raw:
        return None
    left, colon, effect = raw.rpartition(":")
    key, eq, value = left.partition("=")
    if not colon or effect not in _EFFECTS or not _LABEL_KEY.match(key or "-") or (eq and not _LABEL_VALUE.match(value)):
        raise EditError(f"TOLERATION '{raw}' is not <key>[=<value>]:<effect> with effect one of "
                        f"{', '.join(_EFFECTS)}, e.g. nvidia.com/gpu:NoSchedule")
    tol = {"key": key, "operator": "Equal" if eq else "Exists"}
    if eq:
        tol["value"] = value
    tol["effect"] = effect
    return tol


def gpu_name_from(label: tuple[str, str] | None) -> str | None:
    """A GPU's short name from an accelerator label's value: nvidia-tesla-a100 -> A100, NVIDIA-H100-80GB-HBM3 -> H100."""
    if label is None:
        return None
    for token in re.split(r"[-_.]", label[1]):
        if re.fullmatch(r"(?i)(mi|[a-z])\d{1,4}[a-z]?", token) and not re.fullmatch(r"(?i)\d+gb", token):
            return token.upper()
    return None


def check_request(req: Request, ident: Identity, root: Path) -> None:
    if not DNS1123_LABEL.match(req.env) or len(req.env) > 50:
        raise EditError(f"ENV '{req.env}' must be lowercase letters, digits and '-' (50 at most): it names folders, "
                        "the Application ddp-<env> and the namespace")
    if (root / "overlays" / req.env).exists() and any((root / "overlays" / req.env).glob("*/kustomization.yaml")) \
            or (root / "components" / req.env / "kustomization.yaml").exists() or req.env in ident.environments:
        raise EditError(f"environment {req.env} exists already (overlays/{req.env}, components/{req.env} or "
                        "gitops.yaml): choose another ENV")
    envs = identity.environments_in_tree(root)
    if req.source not in envs or req.source not in ident.environments:
        raise EditError(f"FROM '{req.source}' is not an environment of this repository ({', '.join(envs)})")
    if req.resource is not None and req.resource not in launchers.GPU_RESOURCES:
        raise EditError(f"GPU_RESOURCE '{req.resource}' is not one the validator counts as GPUs "
                        f"({', '.join(launchers.GPU_RESOURCES)})")
    if req.cluster is not None and (not identity.CLUSTER_NAME.match(req.cluster) or "{" in req.cluster):
        raise EditError(f"CLUSTER '{req.cluster}' is not an Argo CD cluster name")
    ns = req.namespace if req.namespace is not None else f"ddp-{req.env}"
    if not DNS1123_LABEL.match(ns) or len(ns) > 63:
        raise EditError(f"NAMESPACE '{ns}' is not a namespace name (a DNS-1123 label, 63 characters at most)")
    why = identity.system_namespace(ns, identity.argocd_namespace(root))
    if why:
        raise EditError(f"NAMESPACE '{ns}' is {why}: a training environment gets a namespace of its own")
    if req.gpu_name is not None and not re.fullmatch(r"[A-Za-z0-9][\w.-]{0,30}", req.gpu_name):
        raise EditError(f"GPU '{req.gpu_name}' is not a short hardware name such as A100")


# ---------------------------------------------------------------- the environment copied from


def read_source(root: Path, env: str) -> Source:
    overlays, skipped, cur = [], [], {}
    for kfile in sorted((root / "overlays" / env).glob("*/kustomization.yaml")):
        folder = kfile.parent
        if not (folder / "patches" / "set-topology.yaml").is_file():
            skipped.append(folder)
            continue
        try:
            ov = scale.find_overlay(str(folder), root)
            cur[folder] = scale.current(ov)
        except scale_edits.ScaleError as exc:
            raise EditError(f"FROM {env}: {exc}") from None
        overlays.append(ov)
    if not overlays:
        raise EditError(f"FROM {env}: none of its overlays has a patches/set-topology.yaml that make scale resizes")
    word = None
    for ov in overlays:
        head = ov.topology_file.read_text(encoding="utf-8").split("\n", 1)[0]
        m = _TOPOLOGY_HEADER.search(head)
        if m:
            word = m.group(3)
            break
    first = cur[overlays[0].folder]
    return Source(env, overlays, skipped, cur, word if first.gpus else None, first.gpus, first.pods)


# ---------------------------------------------------------------- the whole plan


def make(root: Path, req: Request, ident: Identity) -> Result:
    check_request(req, ident, root)
    src = read_source(root, req.source)
    if req.gpus is None and req.procs is None:
        # The size of each pod is the new hardware's, never silently FROM's (docs/environments.md: required).
        raise EditError(f"GPUS_PER_NODE is required: {req.source} has {src.gpus} GPU{'s' * (src.gpus != 1)} per node; give the new "
                        f"environment's (GPUS_PER_NODE={src.gpus} keeps them)" if src.gpus else
                        f"PROCS_PER_NODE is required: {req.source} is a CPU environment; give the processes per pod "
                        "(or GPUS_PER_NODE=G for GPU nodes)")
    res = Result()
    first = src.overlays[0]
    try:
        p0 = scale.plan(first, src.current[first.folder], req.nodes, req.gpus, req.procs)
    except scale_edits.ScaleError as exc:
        raise EditError(f"FROM {req.source}: {exc}") from None
    named = gpu_name_from(("", req.env.replace("x", "-")))
    gpu = req.gpu_name or gpu_name_from(req.label) or named or (None if not p0.gpus else "GPU")
    # FROM's own GPU model (h100-4x8 from 64x8-h100): its name and node selector stay right for the new environment.
    same_hardware = bool(src.word and gpu and gpu.lower() == src.word.lower())
    if src.word and p0.gpus and req.gpu_name is None and req.label is None:
        res.notes.append(f"comments call the hardware '{gpu}'" + (f" (from the name {req.env})" if named else "")
                         + f" where {req.source}'s said '{src.word}'; give GPU=<name> to call it otherwise")

    # Overlays: make scale's edits on copies of FROM's files, then the names and sizes of every comment.
    quantities: dict[str, str] = {}
    new_overlays: dict[Path, dict[Path, str]] = {}
    for ov in src.overlays:
        cur = src.current[ov.folder]
        try:
            p = scale.plan(ov, cur, req.nodes, req.gpus, req.procs)
        except scale_edits.ScaleError as exc:
            raise EditError(f"{yamledit.rel(ov.folder)}: {exc}") from None
        dest = root / "overlays" / req.env / ov.folder.name
        files: dict[Path, str] = {}
        topo = yamledit.YamlFile.load(ov.topology_file)
        before = topo.dump()
        scale_edits.edit_topology(topo, ov.launcher, p)
        after = topo.dump()
        quantities.update(_changed_quantities(before, after))
        files[ov.topology_file] = scale_edits.edit_header(after, p)
        if ov.shm_file.is_file() and p.ratio != 1:
            shm = yamledit.YamlFile.load(ov.shm_file)
            scale_edits.edit_shm(shm, p)
            files[ov.shm_file] = shm.dump()
        # The new environment's declaration is FROM's, copied: its podLosses is the one FROM's overlay reads.
        losses = scale_edits.pod_losses(ov.folder)
        files.update(scale_edits.edit_restart_budget(ov.folder, ov.launcher, p.nodes, losses))
        for path in sorted(ov.folder.rglob("*")):
            if path.is_file() and path not in files and not path.name.endswith(transaction.TMP_SUFFIX):
                files[path] = path.read_text(encoding="utf-8")
        files[ov.kustomization] = scale_edits.edit_header(files[ov.kustomization], p)
        new_overlays[dest] = {dest / path.relative_to(ov.folder): text for path, text in files.items()}
    words = Words(req, src, gpu, quantities)
    # GPU_RESOURCE: FROM's GPU resource, whichever of the ones the validator counts it is, becomes the one asked for.
    asked = req.resource or ""
    others = [g for g in launchers.GPU_RESOURCES if g != asked] if asked else []
    renamed = False
    for dest, files in new_overlays.items():
        for path, text in files.items():
            text = words.file(text, p0, rel(path, root))
            if others:
                text, n = re.subn(rf"(?<=[\s{{,])(?:{'|'.join(map(re.escape, others))})(?=\s*:)", asked, text)
                renamed = renamed or n > 0
            res.changes[path] = text
    for folder in src.skipped:
        res.notes.append(f"{yamledit.rel(folder)} was not copied: a variant without patches/set-topology.yaml, which "
                         "make scale cannot resize (copy it by hand)")

    # The component: every file copied, its patches' node selection, toleration and /dev/shm, its declaration.
    comp_src = root / "components" / req.source
    comp = root / "components" / req.env
    for path in sorted(comp_src.rglob("*")):
        if not path.is_file() or path.name.endswith(transaction.TMP_SUFFIX) or path.name == transaction.JOURNAL:
            continue
        target = comp / path.relative_to(comp_src)
        if path.name == environment.FILE_NAME:
            text = policy_text(path.read_text(encoding="utf-8"), req, src, p0, gpu)
        elif path.suffix in (".yaml", ".yml") and path.parent.name == "patches":
            text = component_patch(path, path.read_text(encoding="utf-8"), req, p0, res.notes,
                                   same_hardware=same_hardware)
        else:
            text = path.read_text(encoding="utf-8")
        if path.name == "kustomization.yaml" and path.parent == comp_src:
            text = _header(text, req, src, p0, gpu)
        if req.label is None:  # no node selector: the comments that said where the pods were pinned no longer hold
            text = re.sub(r"(?im)^(\s*#.*?)\bpin the pods to [\w.-]+ nodes, (\w)",
                          lambda m: m.group(1) + m.group(2).upper(), text)
        res.changes[target] = words.file(text, p0, rel(target, root))
    if req.toleration is None and p0.gpus:
        res.notes.append(f"the GPU toleration is {req.source}'s; give TOLERATION=<key>[=<value>]:<effect> if your "
                         "nodes' taint differs")
    if renamed:
        res.notes.append(f"resources ask for {req.resource}; check the toleration's key matches your nodes' taint")

    # Argo CD and the identity.
    launcher = _launcher(root, req, src)
    cluster = req.cluster or req.env
    namespace = req.namespace or f"ddp-{req.env}"
    res.changes.update(_argocd(root, req.env, launcher, cluster, namespace))
    f = yamledit.YamlFile.load(identity.config_path(root))
    envs = f.docs[0]["identity"]["environments"]
    entry = CommentedMap([("cluster", cluster), ("namespace", namespace)])
    entry.fa.set_flow_style()
    envs[req.env] = entry
    res.changes[f.path] = f.dump()

    # Nothing of FROM's hardware (unless the new environment's is the same) or name may be left in its files.
    other_hardware = bool(src.word and gpu) and not same_hardware
    left = []
    for path, text in res.changes.items():
        if comp in path.parents or root / "overlays" / req.env in path.parents:
            for i, line in enumerate(text.splitlines(), 1):
                if (other_hardware and re.search(rf"(?i)(?<![A-Za-z0-9]){re.escape(src.word or '')}(?![A-Za-z0-9])",
                                                   line)) or re.search(rf"(?<![\w-]){re.escape(req.source)}(?![\w-])",
                                                                       line):
                    left.append(f"{rel(path, root)}:{i}: {line.strip()}")
    if left:
        raise EditError(f"the new environment would still name {req.source} or {src.word}: {left[0]}"
                        + (f" (and {len(left) - 1} more)" if len(left) > 1 else "") + "; nothing was written")
    for line in words.settings:
        res.notes.append(f"a setting named after {src.word} was renamed, check it: {line}")
    res.notes.append(f"review components/{req.env}/ for your cluster: storage classes, the queue (if any), NCCL "
                     "settings; then push and pin your image (docs/deploy.md)")
    return res


def _changed_quantities(before: str, after: str) -> dict[str, str]:
    """Old -> new resource quantities make scale wrote (12Gi -> 48Gi), for the comments that state them."""
    out: dict[str, str] = {}
    for a, b in zip(before.splitlines(), after.splitlines()):
        if a == b:
            continue
        for x, y in zip(re.findall(r"\b\d+(?:\.\d+)?(?:Ki|Mi|Gi|Ti)\b", a), re.findall(r"\b\d+(?:\.\d+)?(?:Ki|Mi|Gi|Ti)\b", b)):
            if x != y:
                out.setdefault(x, y)
    return out


def _header(text: str, req: Request, src: Source, p: scale_edits.Plan, gpu: str | None) -> str:
    """The component's first comment block, written for the new hardware."""
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        i += 1
    size = (f"{p.nodes} nodes x {p.gpus} {gpu} (world size {p.nodes * p.nproc})" if p.gpus else
            f"{p.nodes} pods x {p.nproc} processes (world size {p.nodes * p.nproc}), CPU only")
    head = [f"# {req.env}: {size}, made by `make new-env`: check the node selection,\n",
            "# storage and NCCL settings below against your cluster (docs/environments.md).\n"]
    return "".join(head + lines[i:])


def _launcher(root: Path, req: Request, src: Source) -> str:
    names = [ov.folder.name for ov in src.overlays]
    if req.launcher is not None:
        if req.launcher not in names:
            raise EditError(f"LAUNCHER '{req.launcher}' is not one of the overlays made ({', '.join(names)})")
        return req.launcher
    from ..argocd.apps import ExpandError, expand
    from ..kube.objects import Manifest
    import yaml

    appset = root / "argocd" / "applicationset.yaml"
    try:
        apps = list(expand(Manifest(yaml.safe_load(appset.read_text(encoding="utf-8")), str(appset))))
    except (OSError, ExpandError, yaml.YAMLError):
        apps = []
    for app in apps:
        element = app.element or {}
        if element.get("env") == req.source and element.get("launcher") in names:
            return str(element["launcher"])
    return names[0]


def _argocd(root: Path, env: str, launcher: str, cluster: str, namespace: str) -> dict[Path, str]:
    out: dict[Path, str] = {}
    appset = root / "argocd" / "applicationset.yaml"
    out[appset] = _add_element(root, appset, {"env": env, "launcher": launcher, "cluster": cluster,
                                              "namespace": namespace})
    project = root / "argocd" / "appproject.yaml"
    f = yamledit.YamlFile.load(project)
    dests = f.docs[0]["spec"].setdefault("destinations", CommentedSeq())
    _insert_after(dests, len(dests) - 1, CommentedMap([("name", cluster), ("namespace", namespace)]))
    # The destination namespace, which CreateNamespace=true creates: the project permits Namespaces by name only
    # (ARGO008), so the new one joins the others (after the last of them).
    whitelist = f.docs[0]["spec"].get("clusterResourceWhitelist")
    if isinstance(whitelist, CommentedSeq):
        spaces = [i for i, e in enumerate(whitelist) if isinstance(e, CommentedMap) and e.get("kind") == "Namespace"
                  and not e.get("group")]
        if spaces and not any(whitelist[i].get("name") in (namespace, "*") for i in spaces):
            _insert_after(whitelist, spaces[-1],
                          CommentedMap([("group", DoubleQuotedScalarString("")), ("kind", "Namespace"), ("name", namespace)]))
    out[project] = f.dump()
    return out


def _insert_after(seq: CommentedSeq, index: int, entry: CommentedMap) -> None:
    """Insert `entry` after seq[index] (at the end of an empty seq); the comment that follows seq[index] (ruamel
    keeps it on that map's last key: it introduces what comes next) moves to the new entry's last key."""
    if index < 0:
        seq.append(entry)
        return
    prev = seq[index]
    comment = prev.ca.items.pop(list(prev)[-1], None) if isinstance(prev, CommentedMap) and len(prev) else None
    seq.insert(index + 1, entry)
    if comment is not None:
        entry.ca.items[list(entry)[-1]] = comment


def _add_element(root: Path, appset: Path, element: dict[str, str]) -> str:
    """The ApplicationSet's text with one more element after the last of its list generator's, written as the
    others are (as text: a comment below the list belongs to what follows it, not to the last element)."""
    lines = appset.read_text(encoding="utf-8").splitlines(keepends=True)
    indent: Callable[[str], int] = lambda ln: len(ln) - len(ln.lstrip())  # noqa: E731
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "elements:"), None)
    items = [i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("- ")] if start is not None \
        else []
    if not items:
        raise EditError(f"{rel(appset, root)}: has no list generator with block elements to add "
                        f"{element['env']} to")
    assert start is not None  # items is empty without it
    dash = indent(lines[items[0]])
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or indent(lines[end]) > indent(lines[start])):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    pad = " " * dash
    block = [f"{pad}- {k}: {v}\n" if i == 0 else f"{pad}  {k}: {v}\n" for i, (k, v) in enumerate(element.items())]
    return "".join(lines[:end] + block + lines[end:])


# ---------------------------------------------------------------- command line


def run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    edit_relative_to(root)
    if not args.env or not args.source:
        raise EditError("ENV and FROM are required, e.g. make new-env ENV=a100-8x4 FROM=gke-t4 NODES=8 GPUS_PER_NODE=4")
    nodes = scale.positive("NODES", args.nodes)
    if nodes is None:
        raise EditError("NODES is required, e.g. NODES=8")
    label = parse_label(args.gpu_label)
    req = Request(args.env, args.source, nodes, scale.positive("GPUS_PER_NODE", args.gpus_per_node, allow_zero=True),
                  scale.positive("PROCS_PER_NODE", args.procs_per_node), args.gpu or None, label,
                  parse_toleration(args.toleration), args.gpu_resource or None, args.cluster or None,
                  args.namespace or None, args.launcher or None)
    notes: list[str] = []
    rc = edit.apply(repo_edit.scope(root, "new-env"), lambda session: plan(root, req, session.finished, notes),
                    lambda c: repo_validate.validate(root, c), args.dry_run)
    if rc == 0:
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    return rc


def plan(root: Path, req: Request, finished: list[Path], notes: list[str]) -> dict[Path, str] | None:
    """make new-env's plan (run under the repository's lock, after any recovery): the request and the repository
    checked, then the new environment's files; None when the recovery finished the make new-env that began it.
    What to tell the user once it is written is added to `notes`."""
    if any(root / "overlays" / req.env in p.parents for p in finished):
        print(f"{req.env}: the interrupted make new-env that began it is finished", file=sys.stderr)
        return None
    ident = identity.load(root)
    check_request(req, ident, root)  # what was asked for first, then whether the repository is ready
    before = identity.disagreements(root, ident)
    if before:
        raise EditError(f"the repository disagrees with gitops.yaml's identity: {before[0]}; fix that first "
                        "(`python -m policies.argocd.identity` lists every disagreement)")
    example = [w for w, yes in (("repository", identity.is_example_repo(ident.repo_url)),
                                ("registry", identity.is_example_image(ident.image))) if yes]
    if example:
        raise EditError(f"the repository still names the template's example {' and '.join(example)}, and a new "
                        "environment is a real cluster (real: true): run `make init REPO_URL=<your repository> "
                        "IMAGE=<your registry>/ddp-trainer` first (docs/deploy.md)")
    res = make(root, req, ident)
    print(f"{req.env}: {req.nodes} nodes from {req.source}" + (f", {req.gpus} GPUs per node" if req.gpus else ""),
          file=sys.stderr)
    notes += res.notes
    return res.changes


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m policies.edit.new_env", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", help="the new environment's name, e.g. a100-8x4")
    ap.add_argument("--from", dest="source", help="the environment to start from, e.g. gke-t4")
    ap.add_argument("--nodes", help="pods (nodes) in the world")
    ap.add_argument("--gpus-per-node", help="GPUs per pod; one process per GPU")
    ap.add_argument("--procs-per-node", help="processes per pod on CPU environments")
    ap.add_argument("--gpu", help="the hardware's short name for comments, e.g. A100")
    ap.add_argument("--gpu-label", help="the accelerator node label, key=value")
    ap.add_argument("--toleration", help="key[=value]:Effect, e.g. nvidia.com/gpu:NoSchedule")
    ap.add_argument("--gpu-resource", help=f"the GPU resource name ({', '.join(launchers.GPU_RESOURCES)})")
    ap.add_argument("--cluster", help="the Argo CD cluster name (default: the environment's name)")
    ap.add_argument("--namespace", help="the namespace (default: ddp-<env>)")
    ap.add_argument("--launcher", help="the overlay the Argo CD Application syncs (default: FROM's)")
    ap.add_argument("--dry-run", action="store_true", help="print the unified diff, write nothing")
    ap.add_argument("--root", default=str(REPO), help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return guarded(lambda: run(args), (EditError, identity.IdentityError, scale_edits.ScaleError,
                                       transaction.TransactionError))


if __name__ == "__main__":
    sys.exit(main())
