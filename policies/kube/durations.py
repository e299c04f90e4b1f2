"""Durations as Kubernetes' Go code reads them, in nanoseconds: Go's `time.ParseDuration` (a controller's flags and
annotations: KubeRay's initializing timeout, a RayCronJob's `@every`), and go-openapi's `strfmt.ParseDuration` as
k8s.io/kube-openapi vendors it, which the API server uses to turn a CRD field of `format: duration` into the CEL
duration its validation rules see (k8s.io/apiserver v0.36.0 pkg/cel/common/valuesunstructured.go 137-142)."""
from __future__ import annotations

import re

from .values import MAX_INT64, go_atoi

# Go 1.26 src/time/format.go ParseDuration: the units, in nanoseconds (both micro signs).
_UNITS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
          "h": 3600 * 10**9}
_NUMBER = re.compile(r"([0-9]*)(?:\.([0-9]*))?")
_UNIT = re.compile(r"[^0-9.]*")

# k8s.io/kube-openapi pkg/validation/strfmt/duration.go 31-55 (at 43fb72c5454a, the version k8s.io/apiserver
# v0.36.0's go.mod requires): each unit's spellings, the last one also a prefix ("hours", "weekz"), and its length.
_STRFMT_UNITS = (("ns", "nano"), ("us", "\u00b5s", "micro"), ("ms", "milli"), ("s", "sec"), ("m", "min"),
                 ("h", "hr", "hour"), ("d", "day"), ("w", "wk", "week"))
_STRFMT_NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9,
              "d": 24 * 3600 * 10**9, "w": 7 * 24 * 3600 * 10**9}
# durationMatcher: `((\d+)\s*([A-Za-zµ]+))`; Go's \d and \s are ASCII.
_STRFMT_MATCH = re.compile(r"([0-9]+)[\t\n\f\r ]*([A-Za-z\u00b5]+)")


def go_duration(text: str) -> int | None:
    """time.ParseDuration: `[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+` (or "0"), in nanoseconds; None where Go refuses it
    (no unit, an unknown unit, no digits, beyond int64)."""
    s, sign = text, 1
    if s[:1] in ("-", "+"):
        sign, s = (-1 if s[0] == "-" else 1), s[1:]
    if s == "0":
        return 0
    if not s:
        return None
    total = 0
    while s:
        m = _NUMBER.match(s)
        whole, frac = m.group(1) if m else "", (m.group(2) if m else None)
        if not whole and not frac:
            return None
        s = s[m.end():] if m else s
        unit = _UNIT.match(s)
        name = unit.group(0) if unit else ""
        if name not in _UNITS:
            return None
        s = s[len(name):]
        scale = _UNITS[name]
        total += int(whole or "0") * scale + (int(frac) * scale // 10 ** len(frac) if frac else 0)
        if total > MAX_INT64 + (1 if sign < 0 else 0):
            return None
    return sign * total


def strfmt_duration(text: str) -> int | None:
    """strfmt.ParseDuration (duration.go 88-120): time.ParseDuration, else the sum of every `<digits> <unit>` found
    anywhere in the text whose unit is a spelling above, case aside (`2 days`, `1 hour and then some`); None where
    nothing matches or a number is beyond int64 (strconv.Atoi). The sum wraps as Go's int64 arithmetic does."""
    exact = go_duration(text)
    if exact is not None:
        return exact
    total, found = 0, False
    for digits, unit in _STRFMT_MATCH.findall(text):
        factor = go_atoi(digits)
        if factor is None:
            return None
        unit = unit.lower()  # strings.ToLower (TrimSpace: the pattern holds no space)
        for variants in _STRFMT_UNITS:
            last = len(variants) - 1
            for i, variant in enumerate(variants):
                if (i == last and unit.startswith(variant)) or variant.lower() == unit:
                    found = True
                    total = _wrap(total + _wrap(factor * _STRFMT_NS[variants[0]]))
    return total if found else None


def _wrap(n: int) -> int:
    """n as a Go int64 holds it (two's complement overflow)."""
    return (n + 2**63) % 2**64 - 2**63
