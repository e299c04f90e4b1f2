"""How the shell reads the text of one word (policies/command/shell.py walks the words): backslash escapes outside and
inside double quotes, `$'...'` strings, brace expansion (left to the running shell), and the pattern trims and case
changes of `${v#p}`, `${v%%p}`, `${v^^}` ..., each as bash does it."""
from __future__ import annotations

import fnmatch
import re
from typing import Any

RUN_TIME = "run-time"   # computed when the script runs: unknown here
UNSET = "unset"         # set neither in the container's env nor by the script: the image's environment may set it
UNDEFINED_K8S = "k8s"   # `$(NAME)` the kubelet left (NAME is in no env entry): the shell runs a program NAME


class Unknown(str):
    """A word only the running shell knows: its text as written in the script (`$(cat /etc/n)`, `$N`), why, and
    whether it may become several words (an unquoted expansion is split at run time)."""

    why: str
    kind: str
    many: bool

    def __new__(cls, text: str, why: str, kind: str = RUN_TIME, many: bool = False) -> "Unknown":
        self = super().__new__(cls, text)
        self.why, self.kind, self.many = why, kind, many
        return self

    def __reduce__(self) -> Any:
        return (Unknown, (str(self), self.why, self.kind, self.many))


_DQ_ESCAPES = set('$`"\\')


def unescape(text: str, quoted: bool) -> str:
    """A literal as the shell reads it: outside quotes a backslash keeps the next character; inside double quotes
    only before $ ` " \\ (and a newline, which it removes)."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "\n":
                i += 2
                continue
            if not quoted or nxt in _DQ_ESCAPES:
                out.append(nxt)
                i += 2
                continue
        out.append(c)
        i += 1
    return "".join(out)


_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v",
         "\\": "\\", "'": "'", '"': '"', "?": "?"}
_ANSI_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|c(.)|(.))",
                          re.S)
BRACES = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")


def ansi_c(text: str) -> str:
    """`$'...'` as bash decodes it (a NUL ends the string); a byte above 0x7f written in octal or hex is not text:
    the whole string is then an Unknown."""
    out: list[str] = []
    pos = 0
    for m in _ANSI_ESCAPE.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        octal, hex_, u4, u8, ctl, other = m.groups()
        if octal or hex_:
            code = int(octal, 8) if octal else int(hex_, 16)
            if code > 0x7f:
                return Unknown("$'" + text + "'", "a byte string, not text")
            out.append(chr(code & 0xff))
        elif u4 or u8:
            code = int(u4 or u8, 16)
            out.append(chr(code) if code <= 0x10ffff else m.group(0))
        elif ctl is not None:
            out.append(chr(ord(ctl.upper()) ^ 0x40) if ctl != "?" else "\x7f")
        else:
            out.append(_ANSI.get(other, m.group(0)))
    out.append(text[pos:])
    decoded = "".join(out)
    return decoded.split("\0", 1)[0]


def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def trim(value: str, op: str, pattern: str) -> str:
    """`${v#p}` `${v##p}` `${v%p}` `${v%%p}`: remove the shortest or longest prefix or suffix matching `p`."""
    rx = _glob(pattern)
    n = len(value)
    if op.startswith("#"):
        cuts = range(n, -1, -1) if op == "##" else range(0, n + 1)
        for i in cuts:
            if rx.fullmatch(value[:i]):
                return value[i:]
    else:
        cuts = range(0, n + 1) if op == "%%" else range(n, -1, -1)
        for i in cuts:
            if rx.fullmatch(value[i:]):
                return value[:i]
    return value


def change_case(value: str, op: str, arg: str, text: str) -> str:
    if op == "^^":
        return value.upper()
    if op == ",,":
        return value.lower()
    if op == "^":
        return value[:1].upper() + value[1:]
    if op == ",":
        return value[:1].lower() + value[1:]
    return Unknown(text, f"`{text}` is worked out at run time")


def join(pieces: list[str]) -> str:
    """Pieces of one word as one value: an Unknown where any piece is."""
    text = "".join(pieces)
    for p in pieces:
        if isinstance(p, Unknown):
            return Unknown(text, p.why, p.kind, any(getattr(q, "many", False) for q in pieces))
    return text
