"""Reading inputs within the loader's bounds: a manifest file, standard input or a FIFO (`read`), the text of the
YAML read beside the manifests (`read_text`), one line for a path that cannot be read, and paths as the user sees
them (`rel`). policies/render/loader.py parses what these return."""
from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path
from typing import IO, Any

import yaml

from .loader import MAX_INPUT_BYTES, InputError, mib, check_bounds, parse_any
from ..kube.objects import Manifest


STDIN_PROMPT = "reading manifests from standard input (end with Ctrl-D)"


def read_bounded(stream: IO[bytes], source: str) -> bytes:
    """At most MAX_INPUT_BYTES from a binary stream; more is one InputError (so /dev/zero ends too)."""
    data = stream.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"{source}: larger than {mib(MAX_INPUT_BYTES)}, the most one input may be (split it)")
    return data


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (what kubectl reads), else one InputError naming the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): a "
                         "manifest is UTF-8 YAML or JSON") from None


def path_error(path: str | Path, exc: OSError) -> InputError:
    """One line for a path that cannot be read: missing, a symlink loop, a link to nothing, no permission."""
    p = Path(path)
    if exc.errno == errno.ELOOP:
        return InputError(f"{path}: a symlink loop (a link that leads back to itself): remove or fix the link")
    if exc.errno == errno.ENOENT:
        if p.is_symlink():
            return InputError(f"{path}: a symlink to {os.readlink(p)}, which does not exist")
        return InputError(f"{path}: no such file or folder")
    return InputError(f"{path}: cannot read: {exc.strerror or exc}")


# A configuration file the tools read beside the manifests (gitops.yaml, a policy.yaml, the ApplicationSet): a few
# KB each. An 8 MB gitops.yaml (a few KB in git) held the Argo CD plugin's cmp-init over 120 s at 800 MB.
CONFIG_MAX_BYTES = 1024 * 1024


def read_config_text(path: str | Path) -> str:
    """A configuration file's text: at most CONFIG_MAX_BYTES, within the loader's bounds; one InputError past one."""
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise path_error(path, exc) from None
    if size > CONFIG_MAX_BYTES:
        raise InputError(f"{path}: larger than {mib(CONFIG_MAX_BYTES)}, the most a configuration file may be")
    return read_text(path)


def read_config(path: str | Path) -> Any:
    """A configuration file's YAML (read_config_text), parsed by libyaml where present; yaml.YAMLError where it is
    not YAML."""
    return yaml.load(read_config_text(path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def read_text(path: str | Path) -> str:
    """A YAML file's UTF-8 text, within the bounds (its size, then check_bounds): for the YAML read beside the
    manifests (kustomizations, patches traced to their lines, environment declarations). One InputError otherwise."""
    try:
        if os.stat(path).st_size > MAX_INPUT_BYTES:
            raise InputError(f"{path}: larger than {mib(MAX_INPUT_BYTES)}, the most one input may be (split it)")
        with open(path, "rb") as f:
            text = decode(read_bounded(f, str(path)), str(path))
    except OSError as exc:
        raise path_error(path, exc) from None
    try:
        check_bounds(text, str(path))
    except yaml.YAMLError:
        pass  # the reader that parses it says what is wrong, with its line
    return text


# The repository an edit command works on (its --root, yamledit.edit_relative_to): its messages say paths relative
# to it first.
EDITED: list[Path] = []


def rel(path: str | Path, *bases: str | Path, edited: bool = False) -> str:
    """A path as the user would write it: relative to the first of `bases` it lies below (by default the working
    folder, after the repository being edited where `edited`), both resolved; else as given. Never fails (a symlink
    loop, a missing file or a vanished working folder is shown as written). The one such function: every message,
    report and edit says its paths through it."""
    try:
        target = Path(path).resolve()
    except (OSError, RuntimeError):  # RuntimeError: pathlib's "Symlink loop" before Python 3.13
        return str(path)
    within: tuple[str | Path | None, ...] = bases or (*(EDITED if edited else ()), None)  # None: the working folder
    for base in within:
        try:
            return str(target.relative_to(Path.cwd() if base is None else Path(base).resolve()))
        except (ValueError, OSError, RuntimeError):
            continue
    return str(path)


def read(path: str) -> list[Manifest]:
    """Objects from a manifest file (YAML, or JSON for `.json`), or from standard input for `-`. A FIFO or device
    named on the command line is read like standard input (`<(kustomize build ...)` works), up to MAX_INPUT_BYTES."""
    if path == "-":
        if sys.stdin is None:
            raise InputError("<stdin>: no standard input")
        if sys.stdin.isatty():
            print(STDIN_PROMPT, file=sys.stderr, flush=True)
        return parse_any(decode(read_bounded(sys.stdin.buffer, "<stdin>"), "<stdin>"), "<stdin>")
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{path}: a folder, not a manifest file")
        if stat.S_ISREG(st.st_mode) and st.st_size > MAX_INPUT_BYTES:
            raise InputError(f"{path}: larger than {mib(MAX_INPUT_BYTES)}, the most one input may be (split it)")
        with open(path, "rb") as f:
            data = read_bounded(f, path)
    except OSError as exc:
        raise path_error(path, exc) from None
    return parse_any(decode(data, path), path)
