"""An object as Go's encoding/json writes it, for a count of bytes that must match what kubectl stores (ARGO005's
last-applied-configuration): an object this project loaded from YAML, written as kubectl's JSON encoder writes the
same object once Argo CD and kubectl have read it.

Go 1.26.4 (what Argo CD v3.5.1 builds with: its Dockerfile 7, .github/workflows/release.yaml 14), src/encoding/json/
encode.go (read here at a stored commit, 956bcd2, not at the go1.26.4 tag; the jsonv2 experiment is off by default):
- strings (appendString): `"` and `\\` escaped with a backslash, as are \\b \\f \\n \\r \\t; every other byte below
  0x20 as \\u00XX; `<`, `>` and `&` as \\u003c, \\u003e, \\u0026 (json.Marshal and json.NewEncoder escape HTML; kubectl's
  encoder is the latter, apimachinery v0.36.1 pkg/apis/meta/v1/unstructured/helpers.go 404-407); U+2028 and U+2029 as
  \\u2028 and \\u2029; each byte of invalid UTF-8 as \\ufffd; hex digits in lower case. Python's json.dumps escapes none
  of `<>&` or U+2028/9.
- numbers (floatEncoder.encode): the shortest digits that read back the same float64, in 'f' notation for
  1e-6 <= |x| < 1e21 and 'e' otherwise, the exponent's leading zero dropped when negative (1e-07 is written 1e-7);
  a whole float has no fraction (1, where Python writes 1.0). Integers in int64 are written as they are (intEncoder).
- objects: keys sorted, no spaces (`{"a":1,"b":[true,null]}`).

Between the YAML and kubectl's encoder every number is read back by apimachinery's JSON decoder (v0.36.1
pkg/util/json/json.go 45-47 and 113-122: an integer that fits int64 as int64, any other number as float64), so an
integer beyond int64 is written as its float64, and -0.0 (Go's "-0") comes back as the integer 0.

The object is read as go-yaml v2 reads it (policies/render/loader.py: go_plain, whole floats as integers), the
reader of sigs.k8s.io/yaml v1.6.0 (YAMLToJSON, yaml.go 146-148) through which Argo CD's repo server reads the
rendered YAML (gitops-engine pkg/utils/kube/kube.go 348-387 at argo-cd v3.5.1)."""
from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1

# What appendString escapes (with escapeHTML): control bytes, the quote, the backslash, <, >, &, U+2028, U+2029; a
# lone surrogate is invalid UTF-8 (three bytes, each written \ufffd).
_ESCAPED = re.compile("[\x00-\x1f\"\\\\<>&\u2028\u2029\ud800-\udfff]")
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    if c in _SHORT:
        return _SHORT[c]
    if "\ud800" <= c <= "\udfff":
        return "\\ufffd" * 3
    return f"\\u{ord(c):04x}"


def go_string(s: str) -> str:
    """A string as appendString writes it, quotes included."""
    return '"' + _ESCAPED.sub(_escape, s) + '"'


def go_float(x: float) -> str:
    """A float64 as floatEncoder writes it (ValueError for NaN and infinities, which Go refuses to encode)."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"encoding/json cannot encode {x}")
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    sign = "-" if x < 0 else ""
    # repr is the shortest decimal that reads back the same float64, as strconv's precision -1 is.
    _, digit_tuple, exponent = Decimal(repr(abs(x))).as_tuple()
    assert isinstance(exponent, int)
    written = "".join(map(str, digit_tuple))
    digits = written.rstrip("0")
    point = len(written) + exponent  # how many digits come before the decimal point
    if 1e-6 <= abs(x) < 1e21:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return sign + digits + "0" * (point - len(digits))
        return f"{sign}{digits[:point]}.{digits[point:]}"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    e = point - 1
    return f"{sign}{mantissa}e{'-' if e < 0 else '+'}{abs(e) if e < 0 else f'{e:02d}'}"


def go_number(x: int | float) -> str:
    """A number as kubectl writes it once apimachinery's decoder has read it back (int64, else float64)."""
    if isinstance(x, int):
        if INT64_MIN <= x <= INT64_MAX:
            return str(x)
        x = float(x)
    return "0" if x == 0 else go_float(x)


def go_json(value: Any) -> str:
    """The compact JSON kubectl's encoder writes for a loaded value (its trailing newline not included)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def _write(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(go_string(value))
    elif value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, (int, float)):
        try:
            out.append(go_number(value))
        except (ValueError, OverflowError):  # .inf, .nan: Go cannot encode it, so nothing is applied at all
            out.append("null")
    elif isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value, key=str)):
            out.append("," if i else "")
            out.append(go_string(str(key)) + ":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            out.append("," if i else "")
            _write(item, out)
        out.append("]")
    else:
        out.append(go_string(str(value)))
