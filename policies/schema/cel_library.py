"""The Kubernetes CEL functions that cel-expr-python (Google's cel-cpp) does not ship, written once here so that a CRD's
x-kubernetes-validations rule evaluates as the API server evaluates it (k8s.io/apiserver pkg/cel/library at
kubernetes v1.36.0, and cel-go's ext.Sets, which the API server's base environment enables).

- lists.go: `<list>.isSorted()`, `.sum()`, `.min()`, `.max()`, `.indexOf(x)`, `.lastIndexOf(x)`;
- regex.go: `<string>.find(re)`, `<string>.findAll(re)`, `<string>.findAll(re, limit)` (RE2, as cel-go's `matches`);
- cel-go ext/sets.go: `sets.contains(a, b)`, `sets.equivalent(a, b)`, `sets.intersects(a, b)`.

Not here: the libraries whose values are opaque CEL types (quantity, url, ip, cidr, semver, format), which
cel-expr-python cannot return from a Python function; a rule that calls them does not compile here and is reported
as not evaluated (SCHEMA-NOT-RUN, info), never as passed or failed.
"""
from __future__ import annotations

from typing import Any

# The messages the API server's functions fail with (lists.go: "min called on empty list").
EMPTY_MIN = "min called on empty list"
EMPTY_MAX = "max called on empty list"


class CelFunctionError(Exception):
    """A function of this library refused its arguments (the rule errs, as in cel-go)."""


def _same(a: Any, b: Any) -> bool:
    """CEL equality of two plain values: bool is not a number, 1 == 1.0 (heterogeneous numeric equality)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    same: bool = a == b
    return same


def is_sorted(xs: list[Any]) -> bool:
    return all(not (xs[i + 1] < xs[i]) for i in range(len(xs) - 1))


def list_sum(xs: list[Any]) -> Any:
    """lists.go sum: 0 for an empty list (an int, as the API server's dynamic dispatch gives), else the sum."""
    if not xs:
        return 0
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total


def list_min(xs: list[Any]) -> Any:
    if not xs:
        raise CelFunctionError(EMPTY_MIN)
    return min(xs)


def list_max(xs: list[Any]) -> Any:
    if not xs:
        raise CelFunctionError(EMPTY_MAX)
    return max(xs)


def index_of(xs: list[Any], x: Any) -> int:
    return next((i for i, v in enumerate(xs) if _same(v, x)), -1)


def last_index_of(xs: list[Any], x: Any) -> int:
    return next((i for i in range(len(xs) - 1, -1, -1) if _same(xs[i], x)), -1)


def _regex(pattern: str) -> Any:
    import re2  # google-re2: RE2's syntax and semantics, as cel-go's regexp (Go's RE2 dialect)

    try:
        return re2.compile(pattern)
    except re2.error as e:
        raise CelFunctionError(f"error parsing regexp: {e}") from None


def find(s: str, pattern: str) -> str:
    """regex.go find: the first match, or '' where there is none."""
    m = _regex(pattern).search(s)
    return m.group(0) if m else ""


def find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    """regex.go findAll: every match (limit < 0), or at most `limit` of them (0: none)."""
    if limit == 0:
        return []
    out = [m.group(0) for m in _regex(pattern).finditer(s)]
    return out if limit < 0 else out[:limit]


def sets_contains(a: list[Any], b: list[Any]) -> bool:
    return all(any(_same(x, y) for x in a) for y in b)


def sets_equivalent(a: list[Any], b: list[Any]) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(_same(x, y) for x in a for y in b)


def _numeric(xs: list[Any], name: str) -> list[Any]:
    """sum is declared for lists of int, uint, double and duration only (the API server's type check refuses the rest
    when the CRD is created); here the check is at run time (cel-cpp dispatches Python functions by kind, not by
    element type)."""
    if any(isinstance(x, (bool, str, bytes, list, dict)) or x is None for x in xs):
        raise CelFunctionError(f"found no matching overload for '{name}'")
    return xs


def _comparable(xs: list[Any], name: str) -> list[Any]:
    if any(isinstance(x, (list, dict)) or x is None for x in xs):
        raise CelFunctionError(f"found no matching overload for '{name}'")
    return xs


def _as_cel(value: Any) -> Any:
    """A result cel-cpp takes back: datetime and timedelta (what it hands Python for its timestamps and durations)
    as protobuf's well-known types."""
    from datetime import datetime, timedelta

    if isinstance(value, timedelta):
        from google.protobuf import duration_pb2

        out = duration_pb2.Duration()
        out.FromTimedelta(value)
        return out
    if isinstance(value, datetime):
        from google.protobuf import timestamp_pb2

        stamp = timestamp_pb2.Timestamp()
        stamp.FromDatetime(value)
        return stamp
    return value


def declarations(cel: Any) -> list[Any]:
    """The functions above as cel-expr-python declarations: one overload per function (cel-cpp registers a Python
    function per argument kind, so a list of ints and a list of strings share one overload)."""
    T = cel.Type
    dyn_list = T.List(T.DYN)

    def wrap(fn: Any) -> Any:
        def call(*args: Any) -> Any:
            try:
                return _as_cel(fn(*args))
            except CelFunctionError as e:
                raise ValueError(str(e)) from None
            except TypeError as e:  # a comparison across kinds ([1, 'a'].isSorted())
                raise ValueError(f"no such overload: {e}") from None
        return call

    def member(name: str, fn: Any, ret: Any, *params: Any) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(f"k8s_{name}", ret, list(params), True, wrap(fn))])

    def function(name: str, fn: Any, ret: Any, *params: Any) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(f"k8s_{name}", ret, list(params), False, wrap(fn))])

    return [
        member("isSorted", lambda xs: is_sorted(_comparable(xs, "isSorted")), T.BOOL, dyn_list),
        member("sum", lambda xs: list_sum(_numeric(xs, "sum")), T.DYN, dyn_list),
        member("min", lambda xs: list_min(_comparable(xs, "min")), T.DYN, dyn_list),
        member("max", lambda xs: list_max(_comparable(xs, "max")), T.DYN, dyn_list),
        member("indexOf", index_of, T.INT, dyn_list, T.DYN),
        member("lastIndexOf", last_index_of, T.INT, dyn_list, T.DYN),
        member("find", find, T.STRING, T.STRING, T.STRING),
        cel.FunctionDecl("findAll", [
            cel.Overload("k8s_findAll", T.List(T.STRING), [T.STRING, T.STRING], True, wrap(find_all)),
            cel.Overload("k8s_findAll_limit", T.List(T.STRING), [T.STRING, T.STRING, T.INT], True, wrap(find_all))]),
        function("sets.contains", sets_contains, T.BOOL, dyn_list, dyn_list),
        function("sets.equivalent", sets_equivalent, T.BOOL, dyn_list, dyn_list),
        function("sets.intersects", sets_intersects, T.BOOL, dyn_list, dyn_list),
    ]
