"""The two values every stage shares: a Manifest (one rendered object and where it came from) and a Problem."""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from functools import cached_property
from typing import Any

ERROR = "error"
WARNING = "warning"
# Shown, never fails (not even with --strict): a check that could not run, an unused suppression.
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)

# How the API server names an object created with only metadata.generateName, before anything validates it
# (k8s.io/apiserver v0.36.0 pkg/registry/generic/registry/store.go 465, 493; pkg/storage/names/generate.go 44-57):
# the prefix cut to 58 characters, then 5 random characters of k8s.io/apimachinery/pkg/util/rand's alphabet (no
# vowels, no confusable digits).
MAX_GENERATED_NAME = 58
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def generated_name(prefix: str, suffix: str = NAME_ALPHABET[:5]) -> str:
    """The name made from `prefix`, with `suffix` standing for the random characters (any 5 of the alphabet check
    alike: lower-case letters and digits)."""
    return prefix[:MAX_GENERATED_NAME] + suffix


def created_name(metadata: Any) -> tuple[str, str]:
    """(the name an object has once created, the field it comes from): metadata.name, else the one the API server
    makes from metadata.generateName; ("", "metadata.name") without either."""
    meta = metadata if isinstance(metadata, dict) else {}
    name, prefix = meta.get("name"), meta.get("generateName")
    if isinstance(name, str) and name:
        return name, "metadata.name"
    if isinstance(prefix, str) and prefix:
        return generated_name(prefix), "metadata.generateName"
    return "", "metadata.name"


@dataclass
class Manifest:
    """One Kubernetes object as rendered, with the file (or overlay folder) and document index it came from.
    Its kind, name, namespace and ref are read once (objects are not changed after loading)."""

    obj: dict[str, Any]
    source: str
    index: int = 0

    @cached_property
    def kind(self) -> str:
        return str(self.obj.get("kind") or "")

    @cached_property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion") or "")

    @cached_property
    def metadata(self) -> dict[str, Any]:
        meta = self.obj.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @cached_property
    def name(self) -> str:
        return str(self.metadata.get("name") or "")

    @cached_property
    def created_name(self) -> str:
        """The name the object has once created: its name, or the one the API server makes from its generateName;
        empty without either."""
        return self.name or created_name(self.metadata)[0]

    @cached_property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace") or "")

    @cached_property
    def shown_name(self) -> str:
        """The name as lines show it: metadata.name, or `<generateName>*` (the names the API server may give an
        object named by its generateName alone)."""
        prefix = self.metadata.get("generateName")
        return self.name or (prefix + "*" if isinstance(prefix, str) and prefix else "")

    @cached_property
    def ref(self) -> str:
        """`Kind/namespace/name`, or `Kind/name` for objects without a namespace (the name as shown_name)."""
        ns = self.namespace
        return f"{self.kind}/{ns}/{self.shown_name}" if ns else f"{self.kind}/{self.shown_name}"


# Every character str.splitlines() breaks a line at, written as an escape.
_ONE_LINE = {c: ascii(chr(c))[1:-1] for c in (0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)}


@dataclass
class Problem:
    """One finding: which check, where (source, object, field), what was found against what was expected, how to fix."""

    rule: str
    message: str
    source: str
    obj: str | None = None
    field: str | None = None
    hint: str | None = None
    severity: str = ERROR
    extra: dict[str, Any] = dc_field(default_factory=dict)
    # Set when an annotation on the object suppressed this problem: the reason given there.
    suppressed: str | None = None
    # (file, line) of the object or field in the sources, once traced (see trace.py); None = not traced.
    location: tuple[str, int] | None = None

    def line(self) -> str:
        """The one-line text form: `error TOPO001 overlays/x: PyTorchJob/ns/n spec.x: message (fix: hint)`."""
        where = self.source
        if self.obj:
            where += f": {self.obj}"
        if self.field:
            where += f" {self.field}"
        text = f"{self.severity} {self.rule} {where}: {self.message}"
        if self.hint:
            text += f" (fix: {self.hint})"
        # A value quoted from the input may hold a line break (a mangled command token): one line all the same.
        return text.translate(_ONE_LINE)
