"""Find overlays and render them with the pinned kubectl's kustomize, several at a time."""
from __future__ import annotations

import hashlib
import marshal
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .gitops import build_options, kubectl
from .loader import InputError, parse
from .model import Manifest

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# The build options Argo CD uses too: gitops.yaml `kustomize.buildOptions`, the one place both read.
KUSTOMIZE_FLAGS: list[str] = build_options()


_YAML_CACHE: dict[tuple[str, int, int], Any] = {}
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """A small YAML file (a kustomization), parsed once per process while it is unchanged; libyaml where present.
    The object is shared by every caller: read it, never change it (a copy per call cost more than the parse).
    Raises OSError and yaml.YAMLError like yaml.safe_load."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _YAML_CACHE:
        _YAML_CACHE[key] = yaml.load(path.read_text(encoding="utf-8"), Loader=_FAST_LOADER)
    return _YAML_CACHE[key]


def kustomization_file(folder: Path) -> Path | None:
    base = os.fspath(folder)
    for name in KUSTOMIZATION_FILES:
        if os.path.isfile(os.path.join(base, name)):  # asked thousands of times a run: no Path made for a miss
            return Path(folder, name)
    return None


def find_overlays(root: Path) -> list[Path]:
    """Every folder under `root` with a kustomization (of kind Kustomization, not Component) that no other overlay
    below `root` includes, i.e. the leaves users deploy."""
    # One walk (three rglob calls walked the tree once per name); like rglob, symlinked folders are not followed.
    found = sorted(Path(folder) for folder, _, files in os.walk(root)
                   if any(name in files for name in KUSTOMIZATION_FILES))
    return [d for d in found if not (kustomization_file(d) and _is_component(kustomization_file(d)))]


def _is_component(path: Path | None) -> bool:
    if path is None:
        return False
    try:
        doc = read_yaml(path)
    except (OSError, yaml.YAMLError):
        return False  # rendering it reports the problem
    return isinstance(doc, dict) and doc.get("kind") == "Component"


@dataclass
class Rendered:
    source: str
    manifests: list[Manifest]
    error: str | None = None


def _inputs(folder: Path, seen: set[Path], files: list[Path]) -> bool:
    """Collect every file a kustomization reads, following its folders; False if it reads anything remote or
    anything this function does not understand (then the render is not cached)."""
    folder = folder.resolve()
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
    refs: list[str] = []
    for key in ("resources", "components", "bases", "configurations", "crds", "generators", "transformers",
                "validators", "patchesStrategicMerge"):
        refs += [r for r in doc.get(key) or [] if isinstance(r, str) and "\n" not in r]
    for key in ("patches", "patchesJson6902", "replacements"):
        refs += [p["path"] for p in doc.get(key) or [] if isinstance(p, dict) and p.get("path")]
    for key in ("configMapGenerator", "secretGenerator"):
        for gen in doc.get(key) or []:
            for f in (gen.get("files") or []) + (gen.get("envs") or []) + ([gen["env"]] if gen.get("env") else []):
                refs.append(str(f).split("=", 1)[-1])
    if isinstance(doc.get("openapi"), dict) and doc["openapi"].get("path"):
        refs.append(doc["openapi"]["path"])
    for ref in refs:
        if "://" in ref or ref.startswith(("github.com", "git@")):
            return False
        target = (folder / ref).resolve()
        if target.is_dir():
            if not _inputs(target, seen, files):
                return False
        elif target.is_file():
            files.append(target)
        else:
            return False  # missing: let kustomize say so
    return True


def inputs(folder: Path) -> tuple[bool, list[Path]]:
    """Every file the kustomization in `folder` reads, and False where it reads something `_inputs` cannot follow;
    worked out once per run when share_renders() is on (the render cache key and the environment both need it)."""
    if _INPUTS_MEMO is not None and folder in _INPUTS_MEMO:
        ok, found = _INPUTS_MEMO[folder]
        return ok, list(found)
    files: list[Path] = []
    ok = _inputs(folder, set(), files)
    if _INPUTS_MEMO is not None:
        _INPUTS_MEMO[folder] = (ok, tuple(files))
    return ok, files


def _cache_key(folder: Path, options: list[str] | None = None) -> str | None:
    if os.environ.get("POLICIES_NO_CACHE"):
        return None
    return _content_key(folder, options)


# One validate run renders a folder once, even where several checks ask for it (an overlay and the Argo CD
# Application that points at it): results by content key, for this process only, when share_renders() is on.
_RUN_MEMO: dict[str, "Rendered"] | None = None
_INPUTS_MEMO: dict[Path, tuple[bool, tuple[Path, ...]]] | None = None


def share_renders() -> None:
    global _RUN_MEMO, _INPUTS_MEMO
    if _RUN_MEMO is None:
        _RUN_MEMO = {}
    if _INPUTS_MEMO is None:
        _INPUTS_MEMO = {}


def _content_key(folder: Path, options: list[str] | None = None) -> str | None:
    ok, files = inputs(folder)
    if not ok:
        return None
    h = hashlib.sha256()
    exe = Path(kubectl())
    flags = KUSTOMIZE_FLAGS if options is None else options
    h.update(f"{exe}:{exe.stat().st_size}:{exe.stat().st_mtime_ns}:{flags}".encode())
    # Paths relative to the overlay: the same files in another checkout (make diff's base) share the entry.
    root = folder.resolve()
    for f in sorted(set(files)):
        h.update(os.path.relpath(f.resolve(), root).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def cache_dir() -> Path:
    return Path(os.environ.get("POLICIES_CACHE_DIR") or Path(__file__).resolve().parent.parent / ".cache" / "render")


def render(folder: Path, options: list[str] | None = None) -> Rendered:
    """Render one overlay with gitops.yaml's build options (or `options`: another checkout's, for make diff).
    Output is cached under .cache/render, keyed by the content of every file the kustomization reads, the options
    and the kubectl binary, so an unchanged overlay is not rendered twice."""
    source = str(folder)
    kfile = kustomization_file(folder)
    if kfile is None:
        return Rendered(source, [], f"{source}: no kustomization.yaml in this folder")
    memo_key = None
    if _RUN_MEMO is not None:
        try:
            memo_key = _content_key(folder, options)
        except (OSError, InputError):
            memo_key = None
        if memo_key is not None and memo_key in _RUN_MEMO:
            return _RUN_MEMO[memo_key]
    rendered = _render_uncached_run(folder, source, kfile, memo_key, options)
    if memo_key is not None and _RUN_MEMO is not None and not rendered.error:
        _RUN_MEMO[memo_key] = rendered
    return rendered


def _render_uncached_run(folder: Path, source: str, kfile: Path, content_key: str | None = None,
                         options: list[str] | None = None) -> Rendered:
    try:
        key = None if os.environ.get("POLICIES_NO_CACHE") else (content_key or _cache_key(folder, options))
    except (OSError, InputError):
        key = None
    cached = cache_dir() / f"{key}.yaml" if key else None
    if cached is not None and cached.is_file():
        try:
            return Rendered(source, _read_cached(cached, source))
        except (OSError, InputError):
            pass  # a damaged cache entry: render again
    try:
        flags = KUSTOMIZE_FLAGS if options is None else options
        proc = subprocess.run([kubectl(), "kustomize", *flags, str(folder)], capture_output=True,
                              text=True, timeout=120)
    except InputError as exc:
        return Rendered(source, [], str(exc))
    except subprocess.TimeoutExpired:
        return Rendered(source, [], f"{_rel(str(kfile))}: kustomize did not finish within 120 s")
    if proc.returncode != 0:
        return Rendered(source, [], f"{_rel(str(kfile))}: kustomize failed: {_first_line(proc.stderr)}")
    try:
        rendered = Rendered(source, parse(proc.stdout, source))
    except InputError as exc:
        return Rendered(source, [], str(exc))
    if cached is not None:
        _write_atomic(cached, proc.stdout)
        _write_parsed(cached, proc.stdout, rendered.manifests)
    return rendered


# Beside each cached render, its objects as parsed (marshal: plain dicts, lists and scalars, read some 20 times
# faster than YAML is parsed), tagged with the sha256 of the YAML they came from: the YAML stays the entry, and
# objects that do not match it are never used.
_PARSED_SUFFIX = ".parsed"


def _read_cached(path: Path, source: str) -> list[Manifest]:
    text = path.read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode()).hexdigest()
    try:
        tag, docs = marshal.loads(path.with_suffix(_PARSED_SUFFIX).read_bytes())
        if tag == digest and isinstance(docs, list) and all(isinstance(d, dict) for d in docs):
            return [Manifest(obj, source, i) for i, obj in enumerate(docs)]
    except (OSError, ValueError, EOFError, TypeError):
        pass  # absent or damaged: parse the YAML
    manifests = parse(text, source)
    _write_parsed(path, text, manifests)
    return manifests


def _write_parsed(path: Path, text: str, manifests: list[Manifest]) -> None:
    try:
        data = marshal.dumps((hashlib.sha256(text.encode()).hexdigest(), [m.obj for m in manifests]))
    except ValueError:
        return  # something marshal cannot hold: the YAML alone serves
    _write_atomic(path.with_suffix(_PARSED_SUFFIX), data)


def _write_atomic(path: Path, data: str | bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False, suffix=".tmp") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(f.name, path)
    except OSError:
        pass  # the cache is an optimisation; a read-only checkout still validates


def _first_line(text: str) -> str:
    """kustomize's error as one line: the missing file where that is the cause, else the message collapsed."""
    flat = " ".join(text.split())
    if flat.startswith("Error:"):
        flat = flat[len("Error:"):].strip()
    missing = re.findall(r"lstat (\S+?): no such file or directory", flat)
    if missing:
        return f"{_rel(missing[-1])}: no such file or directory"
    return flat if len(flat) <= 400 else flat[:397] + "..."


def _rel(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path


def render_all(folders: list[Path], jobs: int | None = None, options: list[str] | None = None) -> list[Rendered]:
    """Render in parallel (kustomize is a process each); results in the order given."""
    if not folders:
        return []
    jobs = jobs or min(len(folders), max(2, (os.cpu_count() or 2) * 2))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda f: render(f, options), folders))
