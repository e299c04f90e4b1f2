"""Round-trip YAML editing: a file loaded with the dumper settings that reproduce it byte for byte, so that an edit
keeps its comments, order, quoting and indentation (`make scale`, `make new-run`, pin_image). A file that cannot be
reproduced is refused rather than reformatted."""
from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from ..render import files


class EditError(Exception):
    """Bad input or a file these commands cannot edit: one line, nothing written."""


# A path as the user would write it: relative to the repository being edited, else to the working folder.
rel = functools.partial(files.rel, edited=True)


def edit_relative_to(root: Path) -> None:
    """Say paths relative to `root` (the repository being edited) from now on."""
    files.EDITED[:] = [root]


@dataclass
class YamlFile:
    """One file loaded for round-trip editing, with the dumper settings that reproduce it byte for byte."""

    path: Path
    original: str
    docs: list[Any]
    yaml: YAML

    @classmethod
    def load(cls, path: Path) -> "YamlFile":
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise EditError(f"{rel(path)}: cannot read: {exc.strerror}") from exc
        for seq, offset in ((4, 2), (2, 0)):
            y = YAML()
            y.preserve_quotes = True
            y.width = 4096
            y.indent(mapping=2, sequence=seq, offset=offset)
            try:
                docs = list(y.load_all(text))
            except Exception as exc:  # ruamel raises many types; each is bad YAML
                raise EditError(f"{rel(path)}: not valid YAML: {' '.join(str(exc).split())[:200]}") from exc
            f = cls(path, text, docs, y)
            if f.dump() == text:
                return f
        raise EditError(f"{rel(path)}: cannot be edited without reformatting it (indentation other than 2 spaces?)")

    def dump(self) -> str:
        out = io.StringIO()
        if len(self.docs) == 1:
            self.yaml.dump(self.docs[0], out)
        else:
            self.yaml.dump_all(self.docs, out)
        return out.getvalue()


def set_scalar(parent: Any, key: Any, value: Any) -> None:
    """Replace a scalar keeping its quoting style (a quoted "8" stays quoted, a plain 8 stays an int)."""
    old = parent[key]
    if isinstance(old, DoubleQuotedScalarString):
        value = DoubleQuotedScalarString(str(value))
    elif isinstance(old, SingleQuotedScalarString):
        value = SingleQuotedScalarString(str(value))
    elif isinstance(old, str):
        value = str(value)
    elif isinstance(old, bool) or not isinstance(old, int):
        raise EditError(f"unexpected value {old!r} where a number or string was expected")
    else:
        value = int(value)
    parent[key] = value
