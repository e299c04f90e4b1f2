"""A plain YAML scalar as go-yaml v2 reads it: the reader of kubectl (sigs.k8s.io/yaml), kubeconform and Argo CD's
repo server, which the loader (loader.py) follows wherever PyYAML's YAML 1.1 reading differs."""
from __future__ import annotations

import re
from typing import Any

_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_GO_BASES = {"x": 16, "o": 8, "b": 2}
# More digits than this can be no float64 (about 1.8e308): go-yaml reads the text, and Python is not asked to.
_MAX_NUMBER_DIGITS = 400


def go_plain(text: str) -> Any:
    """A plain scalar as go-yaml v2's resolve reads it (goyaml.v2/resolve.go at sigs.k8s.io/yaml 742f5e6:
    resolveMapList, yamlStyleFloat and resolve's '.', 'D' and 'S' cases): y/Y true and n/N false; then, by its
    first character, a '.' float (strconv.ParseFloat: no underscores), or with the underscores removed an int64 or
    uint64 (strconv.ParseInt/ParseUint base 0: 0x, 0o, 0b and a leading 0 for octal, either case), else a
    yamlStyleFloat that ParseFloat reads (1e3, +.5, 08, past int64); anything else is the text."""
    if text in ("y", "Y", "n", "N"):
        return text in ("y", "Y")
    plain = text if text[0] == "." else text.replace("_", "")
    if len(plain) > _MAX_NUMBER_DIGITS:
        return text
    if text[0] != ".":
        m = _GO_INT.fullmatch(plain)
        if m:
            sign, digits = m.group(1), m.group(2)
            prefix = digits[1:2].lower() if digits[:1] == "0" else ""
            if prefix in _GO_BASES:
                value = int(digits[2:], _GO_BASES[prefix])
            else:
                value = int(digits, 8 if prefix else 10)  # a leading 0: octal
            value = -value if sign == "-" else value
            if -(2 ** 63) <= value < 2 ** 63 or (not sign and value < 2 ** 64):  # ParseInt's int64, ParseUint's
                return value
    if "_" not in plain and _YAML_STYLE_FLOAT.fullmatch(plain):
        number = float(plain)
        if number not in (float("inf"), float("-inf")):  # ParseFloat's range error: the text
            return number
    return text


def whole(value: Any) -> Any:
    """A float as the API server receives it: go-yaml's float64, which encoding/json writes without a fraction when
    it is whole (2.0 and 2e0 are `2`, read back as the integer 2 by an integer field), below 1e21 (written 1e+21)."""
    if type(value) is float and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value
