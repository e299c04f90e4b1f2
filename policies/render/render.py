"""Find overlays and render them with the pinned kubectl's kustomize, several at a time."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import marshal
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from . import kustomization, offline
from .gitops import ConfigError, build_options, kubectl
from .kustomization import (KUSTOMIZATION_FILES, collect_inputs, folder_named, inputs, kustomization_file,
                            overlays_named, reaches_out, resolved)
from .files import path_error, rel
from .loader import MAX_INPUT_BYTES, InputError, check_bounds, parse
from ..kube.objects import Manifest
from .paths import cache_root, delivery_folder
from .transaction import pending_around

# The build options Argo CD uses too: gitops.yaml `kustomize.buildOptions`, the one place both read (allow-listed:
# policies/render/offline.py). A gitops.yaml that cannot be used is every render's one-line error, not an import failure.
try:
    KUSTOMIZE_FLAGS: list[str] = build_options()
    _FLAGS_ERROR: str | None = None
except ConfigError as _exc:
    KUSTOMIZE_FLAGS, _FLAGS_ERROR = [], str(_exc)
# kustomize's bounds (docs/validation.md, "Bounds"). It expands YAML aliases while it reads (issue 15's alias bomb of
# under 600 bytes in a resource took it past 1.5 GB), so on Linux it runs with its data segment limited (RLIMIT_DATA: what Go's heap
# grows in; the address space is no use as a limit, Go reserves gigabytes of it at start) and is stopped after
# KUSTOMIZE_TIMEOUT_S; its output is read up to loader.MAX_INPUT_BYTES. The repository's overlays each need under
# 100 MB.
KUSTOMIZE_MEMORY_BYTES = 1024 * 1024 * 1024
KUSTOMIZE_TIMEOUT_S = 120
# Go's garbage collector, off until the heap reaches GOMEMLIMIT (well under the bound above): a render lives a
# fraction of a second and needs under 100 MB, so collecting as it goes is wasted work. Measured on the repository's
# 13 overlays and argocd/, 14 `kubectl kustomize` runs: 25-30 % less CPU in total (bench/bench_validate.py prints
# the figure). A GOGC or GOMEMLIMIT the user set is kept.
KUSTOMIZE_GO_ENV = {"GOGC": "off", "GOMEMLIMIT": f"{KUSTOMIZE_MEMORY_BYTES // 2 // (1024 * 1024)}MiB"}
# The most kustomize runs at once on this machine, across processes (the Argo CD plugin's sidecar sets it: Argo CD
# runs several generates at once in one sidecar, each kustomize may take KUSTOMIZE_MEMORY_BYTES, so the sidecar's
# memory limit holds slots x that plus the checks): each run holds one of that many flock'd slot files under the
# temporary folder, waiting up to KUSTOMIZE_TIMEOUT_S for one. Unset: no limit beyond render_all's threads.
SLOTS_ENV = "DDP_KUSTOMIZE_SLOTS"
MAX_SLOTS = 64


@dataclass
class Rendered:
    source: str
    manifests: list[Manifest]
    error: str | None = None


def _cache_key(folder: Path, options: list[str] | None = None) -> str | None:
    if os.environ.get("POLICIES_NO_CACHE"):
        return None
    return _content_key(folder, options)


# One validate run renders a folder once, even where several checks ask for it (an overlay and the Argo CD
# Application that points at it): results by content key, for this process only, when share_renders() is on.
_RUN_MEMO: dict[tuple[str, str], "Rendered"] | None = None


def share_renders() -> None:
    global _RUN_MEMO
    if _RUN_MEMO is None:
        _RUN_MEMO = {}
    kustomization.share_reads()


def _content_key(folder: Path, options: list[str] | None = None) -> str | None:
    ok, files = inputs(folder)
    if not ok:
        return None
    h = hashlib.sha256()
    exe = Path(kubectl())
    flags = KUSTOMIZE_FLAGS if options is None else options
    h.update(f"{exe}:{exe.stat().st_size}:{exe.stat().st_mtime_ns}:{flags}".encode())
    # Paths relative to the overlay: the same files in another checkout (make diff's base) share the entry.
    root = resolved(folder)
    for f in sorted(set(files)):
        h.update(os.path.relpath(resolved(f), root).encode() + b"\0")
        _hash_file(h, f)
        h.update(b"\0")
    return h.hexdigest()


def _hash_file(h: Any, path: Path) -> None:
    """Feed one input file to the hash in 1 MiB chunks, within the loader's bound on one input (InputError past it:
    a 5 GB sparse file was read whole for the cache key and ended the run with MemoryError)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size > MAX_INPUT_BYTES:
            raise InputError(f"{rel(path)}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, the most one input "
                             "may be (kustomize would read it whole)")
        total = 0
        while chunk := f.read(1024 * 1024):
            total += len(chunk)
            if total > MAX_INPUT_BYTES:  # it grew while read
                raise InputError(f"{rel(path)}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, the most one "
                                 "input may be (kustomize would read it whole)")
            h.update(chunk)


def oversized(folder: Path) -> str | None:
    """The first file the kustomization reads that is larger than one input may be, as one line; None if none."""
    _, files = inputs(folder)
    for f in files:
        try:
            if os.stat(f).st_size > MAX_INPUT_BYTES:
                return (f"{rel(f)}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, the most one input may be "
                        "(kustomize would read it whole)")
        except OSError:
            continue  # kustomize says what is wrong with it
    return None


def cache_dir() -> Path:
    return Path(os.environ.get("POLICIES_CACHE_DIR") or cache_root() / "render")


def render(folder: Path, options: list[str] | None = None) -> Rendered:
    """Render one overlay with gitops.yaml's build options (or `options`: another checkout's, for make diff).
    Output is cached under .cache/render, keyed by the content of every file the kustomization reads, the options
    and the kubectl binary, so an unchanged overlay is not rendered twice."""
    ahead = _PREFETCHED.pop(os.fspath(folder), None) if options is None else None
    if ahead is not None:
        return ahead.result()  # started by prefetch(): the same call, begun earlier
    return _render(folder, options)


def _render(folder: Path, options: list[str] | None = None) -> Rendered:
    source = str(folder)
    kfile = kustomization_file(folder)
    if kfile is None:
        for name in KUSTOMIZATION_FILES:  # one that is there but cannot be read: a symlink loop, a dangling link
            try:
                os.stat(folder / name)
            except OSError as exc:
                if (folder / name).is_symlink() or exc.errno != errno.ENOENT:
                    return Rendered(source, [], str(path_error(folder / name, exc)))
        return Rendered(source, [], f"{source}: no kustomization.yaml in this folder")
    # An interrupted edit (make scale here, make init or the pinning around it): neither the old inputs nor the new.
    half_written = pending_around(folder)
    if half_written:
        return Rendered(source, [], half_written)
    if options is None and _FLAGS_ERROR:
        return Rendered(source, [], _FLAGS_ERROR)
    bad_option = offline.check_build_options(KUSTOMIZE_FLAGS if options is None else options)
    if bad_option:
        return Rendered(source, [], f"gitops.yaml: kustomize.buildOptions: {bad_option}")
    outside = reaches_out(folder) or oversized(folder)
    if outside:
        return Rendered(source, [], outside)
    memo_key = run_key = None
    if _RUN_MEMO is not None:
        try:
            memo_key = _content_key(folder, options)
        except (OSError, RuntimeError, InputError):  # RuntimeError: a symlink loop (pathlib before 3.13)
            memo_key = None
        # By folder too: the content key is relative to the folder, so two folders that hold the same files (copies of
        # an overlay) share the disk cache's entry, but each gets its own objects, which name their own source.
        run_key = (str(resolved(folder)), memo_key) if memo_key is not None else None
        if run_key is not None and run_key in _RUN_MEMO:
            return _RUN_MEMO[run_key]
    rendered = _render_uncached_run(folder, source, kfile, memo_key, options)
    if run_key is not None and _RUN_MEMO is not None and not rendered.error:
        _RUN_MEMO[run_key] = rendered
    return rendered


def _render_uncached_run(folder: Path, source: str, kfile: Path, content_key: str | None = None,
                         options: list[str] | None = None) -> Rendered:
    try:
        key = None if os.environ.get("POLICIES_NO_CACHE") else (content_key or _cache_key(folder, options))
    except (OSError, RuntimeError, InputError):  # RuntimeError: a symlink loop (pathlib before 3.13)
        key = None
    cached = cache_dir() / f"{key}.yaml" if key else None
    if cached is not None and cached.is_file():
        try:
            return Rendered(source, _read_cached(cached, source))
        except (OSError, InputError):
            pass  # a damaged cache entry: render again
    try:
        flags = KUSTOMIZE_FLAGS if options is None else options
        run = run_bounded([kubectl(), "kustomize", *flags, str(folder)])
    except InputError as exc:
        return Rendered(source, [], str(exc))
    except OSError as exc:
        return Rendered(source, [], f"{rel(kfile)}: kustomize could not start: {exc.strerror or exc}")
    if run.failure:
        return Rendered(source, [], f"{rel(kfile)}: {run.failure}{_suspect(folder)}")
    if run.returncode != 0:
        return Rendered(source, [], f"{rel(kfile)}: kustomize failed: {_first_line(run.stderr)}")
    try:
        stdout = run.stdout.decode("utf-8")
        rendered = Rendered(source, parse(stdout, source))
    except UnicodeDecodeError:
        return Rendered(source, [], f"{rel(kfile)}: kustomize's output is not UTF-8 text")
    except InputError as exc:
        return Rendered(source, [], str(exc))
    if cached is not None:
        _write_atomic(cached, stdout)
        _write_parsed(cached, stdout, rendered.manifests)
    return rendered


@dataclass
class Run:
    returncode: int
    stdout: bytes
    stderr: str
    failure: str | None = None  # the bound it broke or how it died, as one line (then nothing else is read)


def _limited(cmd: list[str]) -> list[str]:
    if not sys.platform.startswith("linux"):
        return cmd
    # A shell builtin rather than preexec_fn, which is unsafe in render_all's threads. A lower hard limit stays.
    return ["/bin/sh", "-c", f'ulimit -d {KUSTOMIZE_MEMORY_BYTES // 1024} 2>/dev/null; exec "$@"', "kustomize", *cmd]


class NoSlot(Exception):
    """No kustomize slot could be had (SLOTS_ENV): one line."""


def _slot_folder() -> Path:
    return Path(tempfile.gettempdir()) / f"ddp-kustomize-slots-{os.getuid()}"


@contextlib.contextmanager
def _slot(wait: float = KUSTOMIZE_TIMEOUT_S) -> Iterator[None]:
    raw = os.environ.get(SLOTS_ENV, "").strip()
    if not raw:
        yield
        return
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_SLOTS:
        raise NoSlot(f"{SLOTS_ENV} is {raw!r}, expected a whole number from 1 to {MAX_SLOTS}")
    folder = _slot_folder()
    folder.mkdir(mode=0o700, exist_ok=True)
    deadline = time.monotonic() + wait
    while True:
        for i in range(int(raw)):
            fd = os.open(folder / f"slot-{i}", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield
                return
            finally:
                os.close(fd)  # releases the lock, also when the process dies
        if time.monotonic() > deadline:
            raise NoSlot(f"no kustomize slot came free within {wait:g} s ({SLOTS_ENV}={raw} runs at once on this "
                         "machine): too many renders at once")
        time.sleep(0.05)


def run_bounded(cmd: list[str], timeout: float = KUSTOMIZE_TIMEOUT_S) -> Run:
    """`_run_bounded` in one of the machine's kustomize slots (SLOTS_ENV), if it sets any."""
    try:
        with _slot():
            return _run_bounded(cmd, timeout)
    except NoSlot as exc:
        return Run(-1, b"", "", str(exc))


def _run_bounded(cmd: list[str], timeout: float = KUSTOMIZE_TIMEOUT_S) -> Run:
    """Run kustomize (or any command, named by its absolute path) within the bounds above: memory, time, and at
    most MAX_INPUT_BYTES of output kept (1 MiB of standard error); a broken bound is `failure`, one line, never a Go
    stack dump. It runs offline (policies/render/offline.py): no network where the machine allows a namespace, no program
    on PATH, HTTP proxies pointed at a closed port."""
    env = offline.environment(dict(os.environ))
    if not any(k in os.environ for k in KUSTOMIZE_GO_ENV):
        env.update(KUSTOMIZE_GO_ENV)
    proc = subprocess.Popen(offline.sandbox(_limited(cmd)), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    out, err = bytearray(), bytearray()
    too_much = threading.Event()

    def pump(stream: Any, buf: bytearray, cap: int, kill: bool) -> None:
        while chunk := stream.read(65536):
            if len(buf) + len(chunk) > cap:
                if kill:
                    too_much.set()
                    proc.kill()
                    return
                continue  # drain the rest, keep what fits
            buf += chunk

    pumps = [threading.Thread(target=pump, args=(proc.stdout, out, MAX_INPUT_BYTES, True), daemon=True),
             threading.Thread(target=pump, args=(proc.stderr, err, 1024 * 1024, False), daemon=True)]
    for t in pumps:
        t.start()
    try:
        rc = proc.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        timed_out = True
    for t in pumps:
        t.join()
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    stderr = err.decode("utf-8", "replace")
    failure = None
    if timed_out:
        failure = f"kustomize did not finish within {timeout:g} s"
    elif too_much.is_set():
        failure = f"kustomize's output is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, the most one render may be"
    elif "out of memory" in stderr or "cannot allocate memory" in stderr:
        failure = (f"kustomize ran out of memory (it may use {KUSTOMIZE_MEMORY_BYTES // (1024 * 1024)} MiB here): a "
                   "YAML alias bomb in a resource, or an overlay too large")
    elif re.search(r"^(fatal error|panic): ", stderr, re.M):
        first = re.search(r"^(fatal error|panic): .*$", stderr, re.M)
        failure = f"kustomize crashed: {first.group(0) if first else 'no message'}"
    elif rc < 0:
        failure = f"kustomize was killed by signal {-rc}"
    return Run(rc, bytes(out), stderr, failure)


def _suspect(folder: Path) -> str:
    """After kustomize broke a bound: the first of the overlay's YAML inputs that breaks the loader's bounds, as
    `; <file>:<line>: ...`, so the line names the file to fix; empty when none does (or they cannot be listed)."""
    files: list[Path] = []
    try:
        collect_inputs(folder, set(), files)
    except (OSError, RuntimeError):
        return ""
    for f in files:
        if f.suffix.lower() not in (".yaml", ".yml", ".json") and f.name != "Kustomization":
            continue
        try:
            text = f.read_bytes()[:MAX_INPUT_BYTES + 1].decode("utf-8", "replace")
            check_bounds(text, rel(f))
        except InputError as exc:
            return f"; {exc}"
        except (OSError, yaml.YAMLError):
            continue
    return ""


# Beside each cached render, its objects as parsed (marshal: plain dicts, lists and scalars, read some 20 times
# faster than YAML is parsed), tagged with the sha256 of the YAML they came from and of the reader that parsed it: the
# YAML stays the entry, and objects that do not match both are never used.
_PARSED_SUFFIX = ".parsed"


def _reader_digest() -> str:
    """The code that turns YAML into objects (loader.py, scalars.py): objects a changed reader parsed are not used."""
    h = hashlib.sha256()
    for name in ("loader.py", "scalars.py"):
        try:
            h.update((Path(__file__).parent / name).read_bytes())
        except OSError:
            h.update(b"unreadable")
    return h.hexdigest()


_READER = _reader_digest()


def _read_cached(path: Path, source: str) -> list[Manifest]:
    text = path.read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode()).hexdigest() + _READER
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
        data = marshal.dumps((hashlib.sha256(text.encode()).hexdigest() + _READER, [m.obj for m in manifests]))
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
    loop = re.search(r"evalsymlink failure on '([^']+)' : EvalSymlinks: too many links", flat)
    if loop:
        return f"{rel(loop.group(1))}: a symlink loop (a link that leads back to itself): remove or fix the link"
    missing = re.findall(r"lstat (\S+?): no such file or directory", flat)
    if missing:
        return f"{rel(missing[-1])}: no such file or directory"
    return flat if len(flat) <= 400 else flat[:397] + "..."


_PREFETCHED: dict[str, "Future[Rendered]"] = {}


def prefetch(paths: list[str], delivery: bool = False) -> None:
    """Start rendering the overlays PATHS names (a folder with a kustomization, else every overlay below a folder,
    as engine.collect finds them) in threads, before the rest of the validator is even imported: the command line
    calls this first, and render() of the same folder later takes the result. With `delivery` (validate), also the
    Argo CD folder of their repository where it is not among them (paths.delivery_folder: the engine checks an
    overlay validated without it against the AppProject that syncs it). Never raises: whatever goes wrong is met
    again, and reported, by the render that collect asks for."""
    try:
        folders: list[Path] = []
        for raw in paths:
            if (p := folder_named(raw)) is not None:
                folders += overlays_named(p)
        if not folders:
            return
        if delivery:
            named = {f.resolve() for f in folders}
            found = {d for d in map(delivery_folder, folders) if d is not None and d.resolve() not in named}
            folders += sorted(found)
        pool = ThreadPoolExecutor(max_workers=_jobs(len(folders)))
        for folder in folders:
            if os.fspath(folder) not in _PREFETCHED:
                _PREFETCHED[os.fspath(folder)] = pool.submit(_render, folder)
        pool.shutdown(wait=False)
    except Exception:  # noqa: BLE001 - see the docstring
        return


def _jobs(folders: int) -> int:
    return min(folders, max(2, (os.cpu_count() or 2) * 2))


def render_all(folders: list[Path], jobs: int | None = None, options: list[str] | None = None) -> list[Rendered]:
    """Render in parallel (kustomize is a process each); results in the order given."""
    if not folders:
        return []
    jobs = jobs or _jobs(len(folders))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda f: render(f, options), folders))
