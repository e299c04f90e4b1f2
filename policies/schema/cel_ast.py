"""The checked AST of a compiled CEL rule, as protocol buffer messages: cel-expr-python's `Expression.serialize()`
gives a `google.protobuf.Any` of `cel.expr.CheckedExpr`; its message classes are built here at import time from the
vendored cel-spec definitions (proto/cel/expr/{syntax,checked}.proto, cel-spec v0.24.0; proto/README.md), with
google.protobuf's descriptor_pb2 and message_factory. No protoc, no generated code, no network.

The reader below takes exactly the subset of the .proto language those two files use (package, import, option,
message, nested message, enum, oneof, map<K, V>, repeated, field options in brackets) and refuses anything else, so a
changed file fails loudly at import rather than decoding wrongly.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import duration_pb2, empty_pb2, struct_pb2, timestamp_pb2

PROTO_DIR = Path(__file__).resolve().parent / "proto"
FILES = ("cel/expr/syntax.proto", "cel/expr/checked.proto")
CHECKED_EXPR = "cel.expr.CheckedExpr"

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64,
    "int32": _F.TYPE_INT32, "uint32": _F.TYPE_UINT32, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}
_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|("(?:[^"\\]|\\.)*")|([A-Za-z_][A-Za-z0-9_.]*|\d+|[{}()\[\]<>=;,])', re.S)


class ProtoSyntaxError(Exception):
    """The vendored .proto uses a construct this reader does not take."""


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ProtoSyntaxError(f"unexpected {text[pos:pos + 20]!r}")
        tok = m.group(1) or m.group(2)
        if tok:
            out.append(tok)
        pos = m.end()
    return out


class _Reader:
    def __init__(self, name: str, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.file = descriptor_pb2.FileDescriptorProto(name=name)
        # (field proto, the scope it was declared in, the type name as written): resolved once all names are known
        self.pending: list[tuple[Any, str, str]] = []
        self.names: dict[str, str] = {}  # full name -> "message" | "enum"

    def peek(self) -> str:
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def take(self, expect: str | None = None) -> str:
        tok = self.peek()
        if not tok or (expect is not None and tok != expect):
            raise ProtoSyntaxError(f"{self.file.name}: expected {expect!r}, found {tok!r}")
        self.i += 1
        return tok

    def skip_statement(self) -> None:
        while self.take() != ";":
            pass

    def parse(self) -> descriptor_pb2.FileDescriptorProto:
        while self.peek():
            tok = self.take()
            if tok == "syntax":
                self.take("=")
                self.file.syntax = self.take().strip('"')
                self.take(";")
            elif tok == "package":
                self.file.package = self.take()
                self.take(";")
            elif tok == "import":
                self.file.dependency.append(self.take().strip('"'))
                self.take(";")
            elif tok == "option":
                self.skip_statement()  # language options (java_package, go_package): nothing the decoder needs
            elif tok == "message":
                self.message(self.file.message_type.add(), self.file.package)
            elif tok == "enum":
                self.enum(self.file.enum_type.add(), self.file.package)
            else:
                raise ProtoSyntaxError(f"{self.file.name}: unexpected {tok!r}")
        return self.file

    def enum(self, enum: Any, scope: str) -> None:
        enum.name = self.take()
        self.names[f"{scope}.{enum.name}"] = "enum"
        self.take("{")
        while self.peek() != "}":
            value = enum.value.add(name=self.take())
            self.take("=")
            value.number = int(self.take())
            self.take(";")
        self.take("}")

    def message(self, msg: Any, scope: str) -> None:
        msg.name = self.take()
        full = f"{scope}.{msg.name}"
        self.names[full] = "message"
        self.take("{")
        oneof: int | None = None
        while True:
            tok = self.peek()
            if tok == "}":
                self.take()
                if oneof is None:
                    return
                oneof = None
                continue
            if tok == "message":
                self.take()
                self.message(msg.nested_type.add(), full)
            elif tok == "enum":
                self.take()
                self.enum(msg.enum_type.add(), full)
            elif tok == "oneof":
                self.take()
                oneof = len(msg.oneof_decl)
                msg.oneof_decl.add(name=self.take())
                self.take("{")
            elif tok == "option" or tok == "reserved":
                self.skip_statement()
            else:
                self.field(msg, full, oneof)

    def field(self, msg: Any, scope: str, oneof: int | None) -> None:
        label = _F.LABEL_OPTIONAL
        if self.peek() == "repeated":
            self.take()
            label = _F.LABEL_REPEATED
        kind = self.take()
        if kind == "map":
            self.take("<")
            key = self.take()
            self.take(",")
            value = self.take()
            self.take(">")
            name = self.take()
            entry = msg.nested_type.add(name="".join(p.capitalize() for p in name.split("_")) + "Entry")
            entry.options.map_entry = True
            self._typed(entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL), scope, key)
            self._typed(entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL), scope, value)
            f = msg.field.add(name=name, label=_F.LABEL_REPEATED, type=_F.TYPE_MESSAGE)
            f.type_name = f".{scope}.{entry.name}"
        else:
            f = msg.field.add(name=self.take(), label=label)
            self._typed(f, scope, kind)
        self.take("=")
        f.number = int(self.take())
        if oneof is not None:
            f.oneof_index = oneof
        if self.peek() == "[":
            while self.take() != "]":
                pass  # [deprecated = true]: nothing the decoder needs
        self.take(";")

    def _typed(self, f: Any, scope: str, kind: str) -> None:
        if kind in _SCALARS:
            f.type = _SCALARS[kind]
        else:
            self.pending.append((f, scope, kind))

    def resolve(self, known: dict[str, str]) -> None:
        """Type names as protobuf's scoping finds them: innermost scope first, then outwards, then fully qualified."""
        for f, scope, kind in self.pending:
            parts = scope.split(".")
            for n in range(len(parts), -1, -1):
                full = ".".join([*parts[:n], kind]) if n else kind
                if full in known:
                    f.type_name = "." + full
                    f.type = _F.TYPE_ENUM if known[full] == "enum" else _F.TYPE_MESSAGE
                    break
            else:
                raise ProtoSyntaxError(f"{self.file.name}: unknown type {kind!r}")


def _well_known() -> tuple[list[descriptor_pb2.FileDescriptorProto], dict[str, str]]:
    files, names = [], {}
    for module in (duration_pb2, empty_pb2, struct_pb2, timestamp_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        files.append(proto)
        names.update({f"{proto.package}.{m.name}": "message" for m in proto.message_type})
        names.update({f"{proto.package}.{e.name}": "enum" for e in proto.enum_type})
    return files, names


@lru_cache(maxsize=1)
def classes() -> dict[str, Any]:
    """Every message class of the two files, by full name (`cel.expr.CheckedExpr`, `cel.expr.Expr.Call`)."""
    pool = descriptor_pool.DescriptorPool()  # a pool of its own: nothing registered globally
    base, known = _well_known()
    for proto in base:
        pool.Add(proto)
    readers = [_Reader(name, (PROTO_DIR / name).read_text(encoding="utf-8")) for name in FILES]
    files = [r.parse() for r in readers]
    for r in readers:
        known.update(r.names)
    for r, proto in zip(readers, files):
        r.resolve(known)
        pool.Add(proto)
    out: dict[str, Any] = {}
    for r in readers:
        for full, what in r.names.items():
            if what == "message":
                out[full] = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
    return out


def checked_expr(serialized: bytes) -> Any:
    """A `cel.expr.CheckedExpr` from what `Expression.serialize()` returns (an Any of it)."""
    wrapper = any_pb2.Any()
    wrapper.ParseFromString(serialized)
    if wrapper.type_url.rsplit("/", 1)[-1] != CHECKED_EXPR:
        raise ValueError(f"not a {CHECKED_EXPR}: {wrapper.type_url}")
    out = classes()[CHECKED_EXPR]()
    out.ParseFromString(wrapper.value)
    return out
