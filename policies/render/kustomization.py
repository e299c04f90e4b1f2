"""What a kustomization reads: the kustomization file in a folder, the overlays under a root (the leaves users
deploy), and every file an overlay reads through its resources, components, patches and generators, followed
through its bases; a remote reference stops the walk (policies/render/offline.py says why it is refused).

render.py renders what this finds; the render cache keys on these inputs, and the environment declaration and
`make validate-changed` map a changed file to the overlays that read it. Within one validate run
(render.share_renders) each folder's inputs and each path's resolution are worked out once.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from . import offline
from .files import read_text, rel
from .loader import HELM_CHART_FILE, InputError

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

_YAML_CACHE: dict[tuple[str, int, int], Any] = {}
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """A small YAML file (a kustomization), parsed once per process while it is unchanged; libyaml where present.
    The object is shared by every caller: read it, never change it (a copy per call cost more than the parse).
    Raises OSError and yaml.YAMLError like yaml.safe_load."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _YAML_CACHE:
        try:
            text = read_text(path)
        except InputError as exc:  # past the loader's bounds: unreadable here; kustomize, bounded too, says the rest
            raise yaml.YAMLError(str(exc)) from None
        _YAML_CACHE[key] = yaml.load(text, Loader=_FAST_LOADER)
    return _YAML_CACHE[key]


def kustomization_file(folder: Path) -> Path | None:
    base = os.fspath(folder)
    for name in KUSTOMIZATION_FILES:
        if os.path.isfile(os.path.join(base, name)):  # asked thousands of times a run: no Path made for a miss
            return Path(folder, name)
    return None


def helm_chart(folder: Path) -> bool:
    """A Helm chart's root: everything below it is helm's input (templates with `{{ }}`, values), as a
    kustomization's folder is kustomize's."""
    return os.path.isfile(os.path.join(os.fspath(folder), HELM_CHART_FILE))


def find_overlays(root: Path) -> list[Path]:
    """Every folder under `root` with a kustomization (of kind Kustomization, not Component) that no other overlay
    below `root` includes, i.e. the leaves users deploy."""
    # One walk (three rglob calls walked the tree once per name); like rglob, symlinked folders are not followed.
    # A kustomization name that is no file (a symlink loop, a dangling link) makes no overlay: plain_manifests
    # reports it as the file it is.
    found = sorted(Path(folder) for folder, _, files in os.walk(root)
                   if any(name in files for name in KUSTOMIZATION_FILES))
    return [d for d in found if (k := kustomization_file(d)) and not _is_component(k)]


def folder_named(raw: str) -> Path | None:
    """The folder a word of PATHS names: a folder, or the folder of a kustomization file named itself (kustomize
    builds folders, so `overlays/x/kustomization.yaml` stands for the overlay `overlays/x`, not for a manifest file
    whose one object the API server has no kind for); None for `-` and any other file."""
    p = Path(raw)
    if raw == "-":
        return None
    if p.name in KUSTOMIZATION_FILES and p.is_file():
        return p.parent
    return p if p.is_dir() else None


def overlays_named(folder: Path) -> list[Path]:
    """The overlays a folder given as PATHS stands for: itself where it has a kustomization, else every overlay
    below it (find_overlays)."""
    return [folder] if kustomization_file(folder) else find_overlays(folder)


def _is_component(path: Path | None) -> bool:
    if path is None:
        return False
    try:
        doc = read_yaml(path)
    except (OSError, yaml.YAMLError):
        return False  # rendering it reports the problem
    return isinstance(doc, dict) and doc.get("kind") == "Component"



def collect_inputs(folder: Path, seen: set[Path], files: list[Path]) -> bool:
    """Collect every file a kustomization reads, following its folders; False if it reads anything remote or
    anything this function does not understand (then the render is not cached)."""
    try:
        folder = resolved(folder)
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError in pathlib before 3.13)
        return False
    if folder in seen:
        return True
    seen.add(folder)
    kfile = kustomization_file(folder)
    if kfile is None:
        return False
    files.append(kfile)
    try:
        doc = read_yaml(kfile) or {}
    except (OSError, yaml.YAMLError):
        return False
    if not isinstance(doc, dict) or doc.get("helmCharts") or doc.get("helmGlobals"):
        return False
    for _, ref, root in references(doc):
        if offline.remote(ref, root):
            return False
        try:
            target = resolved(folder / ref)
        except (OSError, RuntimeError):  # a symlink loop (RuntimeError in pathlib before 3.13): kustomize says so
            return False
        if target.is_dir():
            if not collect_inputs(target, seen, files):
                return False
        elif target.is_file():
            files.append(target)
        else:
            return False  # missing: let kustomize say so
    return True


# Fields of a kustomization that name files or folders (kustomize v5.8.1 api/types/kustomization.go); those whose
# entries kustomize may load as a kustomization root, where a repository spec is cloned (kusttarget.go
# accumulateResources for resources, bases, generators, transformers and validators; accumulateComponents).
_ROOT_LISTS = ("resources", "bases", "components", "generators", "transformers", "validators")
_FILE_LISTS = ("configurations", "crds", "patchesStrategicMerge")


def references(doc: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(field, reference, may be a root) for every file or folder a kustomization names."""
    out: list[tuple[str, str, bool]] = []
    for key in _ROOT_LISTS + _FILE_LISTS:
        entries = doc.get(key)
        for i, r in enumerate(entries if isinstance(entries, list) else []):
            if isinstance(r, str) and "\n" not in r:
                out.append((f"{key}[{i}]", r, key in _ROOT_LISTS))
    for key in ("patches", "patchesJson6902", "replacements"):
        entries = doc.get(key)
        for i, p in enumerate(entries if isinstance(entries, list) else []):
            if isinstance(p, dict) and isinstance(p.get("path"), str) and p["path"]:
                out.append((f"{key}[{i}].path", p["path"], False))
    for key in ("configMapGenerator", "secretGenerator"):
        gens = doc.get(key)
        for i, gen in enumerate(gens if isinstance(gens, list) else []):
            if not isinstance(gen, dict):
                continue
            for sub in ("files", "envs"):
                listed = gen.get(sub)
                for j, f in enumerate(listed if isinstance(listed, list) else []):
                    out.append((f"{key}[{i}].{sub}[{j}]", str(f).split("=", 1)[-1], False))
            if gen.get("env"):
                out.append((f"{key}[{i}].env", str(gen["env"]), False))
    if isinstance(doc.get("openapi"), dict) and isinstance(doc["openapi"].get("path"), str):
        out.append(("openapi.path", doc["openapi"]["path"], False))
    return out


# The kustomization lists whose entries may be plugin configurations (a file, or the YAML itself inline), and the
# keys of a builtin generator's or transformer's configuration that kustomize loads as files (api/builtins at
# v5.8.1: ConfigMapGenerator and SecretGenerator `files`, `envs`, `env`; PatchTransformer and
# PatchJson6902Transformer `path`; PatchStrategicMergeTransformer `paths`; ReplacementTransformer `replacements[].path`).
_PLUGIN_LISTS = ("generators", "transformers", "validators")
_LOADED_KEYS = ("path", "paths", "files", "envs", "env")
_HELM_KINDS = ("HelmChartInflationGenerator",)


def plugin_configs(here: Path, doc: dict[str, Any]) -> list[tuple[str, str | None, list[Any]]]:
    """(field, the file it is written in or None where inline, its YAML documents) for every plugin configuration a
    kustomization names: a
    local file of its generators/transformers/validators, or an entry that is the configuration itself (inline).
    A folder entry is a kustomization, followed as one; what cannot be read is left to kustomize to report."""
    out: list[tuple[str, str | None, list[Any]]] = []
    for key in _PLUGIN_LISTS:
        entries = doc.get(key)
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            text, where = None, None
            if isinstance(entry, str) and "\n" in entry:
                text = entry
            elif isinstance(entry, str) and not offline.remote(entry, True):
                try:
                    target = resolved(here / entry)
                    if target.is_file():
                        text, where = read_text(target), rel(target)
                except (OSError, RuntimeError, ValueError, InputError):
                    continue
            if text is None:
                continue
            try:
                docs = [d for d in yaml.load_all(text, Loader=_FAST_LOADER) if d is not None]
            except yaml.YAMLError:
                continue
            out.append((f"{key}[{i}]", where, docs))
    return out


def loaded_paths(config: Any, field: str = "") -> list[tuple[str, str]]:
    """(field, value) for every string under a key a builtin plugin loads as a file, at any depth (`files: [k=url]`
    gives the url)."""
    out: list[tuple[str, str]] = []
    if isinstance(config, dict):
        for k, v in config.items():
            sub = f"{field}.{k}" if field else str(k)
            if k in _LOADED_KEYS:
                values = v if isinstance(v, list) else [v]
                out += [(f"{sub}[{j}]" if isinstance(v, list) else sub, str(x).split("=", 1)[-1])
                        for j, x in enumerate(values) if isinstance(x, str)]
            out += loaded_paths(v, sub)
    elif isinstance(config, list):
        for j, v in enumerate(config):
            out += loaded_paths(v, f"{field}[{j}]")
    return out


def reaches_out(folder: Path) -> str | None:
    """The first thing in the kustomizations `folder` reads (its own, its bases', its components') that would make
    kustomize fetch from the network or run a program: a remote reference or a Helm chart. One line naming the
    file and field, else None. Folders are followed as kustomize follows them; what cannot be read is left to
    kustomize to report."""
    seen: set[Path] = set()
    todo = [folder]
    while todo:
        here = todo.pop()
        try:
            here = resolved(here)
        except (OSError, RuntimeError):
            continue
        if here in seen:
            continue
        seen.add(here)
        kfile = kustomization_file(here)
        if kfile is None:
            continue
        try:
            doc = read_yaml(kfile)
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(doc, dict):
            continue
        for key in ("helmCharts", "helmGlobals"):
            if doc.get(key):
                return (f"{rel(kfile)}: {key}: kustomize would run helm (and fetch the chart's repository); refused: "
                        "render the chart once and commit its output (helm template), then list that file")
        for field, ref, root in references(doc):
            how = offline.remote(ref, root)
            if how == "git" and not field.startswith("components") and (here / ref).is_file():
                how = None  # a resource is read as a local file first (kusttarget.go:422), a component never
            if how:
                what = "download it over HTTP" if how == "download" else "clone it with git"
                return (f"{rel(kfile)}: {field} '{ref}' is remote: kustomize would {what} on every render (Argo CD "
                        "too), content nobody reviewed; refused: copy it into the repository and name the local path")
            if root:
                try:
                    target = resolved(here / ref)
                except (OSError, RuntimeError, ValueError):
                    continue
                if target.is_dir():
                    todo.append(target)
        for field, where, docs in plugin_configs(here, doc):
            named = f"{rel(kfile)}: {field}" + (f" ({where})" if where else "")
            for config in docs:
                kind = config.get("kind") if isinstance(config, dict) else None
                if kind in _HELM_KINDS:
                    return (f"{named} is a {kind}: kustomize would run helm (and fetch the chart's "
                            "repository); refused: render the chart once and commit its output (helm template)")
                for sub, ref in loaded_paths(config):
                    if offline.remote(ref, False):
                        return (f"{named} {kind or 'plugin configuration'} {sub} '{ref}' is remote: "
                                "kustomize would download it over HTTP on every render (Argo CD too), content nobody "
                                "reviewed; refused: copy it into the repository and name the local path")
    return None


def resolved(path: Path) -> Path:
    """path.resolve(), once per path and run when share_reads() is on (render.share_renders): overlays share their bases and components,
    and resolving (an lstat per component) was most of a warm run's time on large trees."""
    if _RESOLVED is None:
        return path.resolve()
    key = os.fspath(path)
    hit = _RESOLVED.get(key)
    if hit is None:
        hit = _RESOLVED[key] = path.resolve()
    return hit


def inputs(folder: Path) -> tuple[bool, list[Path]]:
    """Every file the kustomization in `folder` reads, and False where it reads something `collect_inputs` cannot follow;
    worked out once per run when share_reads() is on (render.share_renders) (the render cache key and the environment both need it)."""
    if _INPUTS_MEMO is not None and folder in _INPUTS_MEMO:
        ok, found = _INPUTS_MEMO[folder]
        return ok, list(found)
    files: list[Path] = []
    ok = collect_inputs(folder, set(), files)
    if _INPUTS_MEMO is not None:
        _INPUTS_MEMO[folder] = (ok, tuple(files))
    return ok, files


_INPUTS_MEMO: dict[Path, tuple[bool, tuple[Path, ...]]] | None = None
_RESOLVED: dict[str, Path] | None = None


def share_reads() -> None:
    """Remember each folder's inputs and each path's resolution for the rest of this process (one validate run)."""
    global _INPUTS_MEMO, _RESOLVED
    if _INPUTS_MEMO is None:
        _INPUTS_MEMO = {}
    if _RESOLVED is None:
        _RESOLVED = {}


def forget_reads() -> None:
    global _INPUTS_MEMO, _RESOLVED
    _INPUTS_MEMO = _RESOLVED = None
