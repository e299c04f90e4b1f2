"""Go's `path/filepath.Match` on Linux, byte for byte: the glob Argo CD matches an AppProject's resource lists with
(argo-cd v3.5.1 pkg/apis/application/v1alpha1/types.go:3843-3875, isResourceInList and isNamedResourceInList).

Ported from Go's src/path/filepath/match.go (Match, scanChunk, matchChunk, getEsc; unchanged in its logic since Go
1.16 apart from the syntax check of the rest of a pattern that failed, which only decides whether a failed match also
reports ErrBadPattern). Not Python's fnmatch: `*` and `?` stop at `/`, a class negates with `^` (not `!`), `\\`
escapes, and a malformed pattern (`[`, `[]a]`, `[a-b-c]`, a trailing `\\`) is ErrBadPattern, which Argo CD reads as
"no match". Strings are compared as their UTF-8 bytes; `?` and classes take one rune, an invalid byte as U+FFFD.
"""
from __future__ import annotations

SEPARATOR = ord("/")
RUNE_ERROR = 0xFFFD


class BadPattern(ValueError):
    """filepath.ErrBadPattern: "syntax error in pattern"."""


def match(pattern: str, name: str) -> bool:
    """filepath.Match(pattern, name) as Argo CD uses it: `ok && err == nil`."""
    try:
        return match_or_raise(pattern, name)
    except BadPattern:
        return False


def match_or_raise(pattern: str, name: str) -> bool:
    """filepath.Match(pattern, name): True or False, or BadPattern where Go returns ErrBadPattern."""
    pat = pattern.encode("utf-8", "surrogatepass")
    s = name.encode("utf-8", "surrogatepass")
    while pat:
        star, chunk, pat = _scan_chunk(pat)
        if star and not chunk:
            # A trailing * matches the rest of the name unless it has a /.
            return SEPARATOR not in s
        # A match at the current position; the last chunk must use up the name, else a star may still match.
        t, ok = _match_chunk(chunk, s)
        if ok and (not t or pat):
            s = t
            continue
        if star:
            # A match skipping i+1 bytes; a star cannot skip a /.
            found = False
            i = 0
            while i < len(s) and s[i] != SEPARATOR:
                t, ok = _match_chunk(chunk, s[i + 1:])
                if ok:
                    if not pat and t:
                        i += 1
                        continue
                    s = t
                    found = True
                    break
                i += 1
            if found:
                continue
        # Before answering no, Go checks that the rest of the pattern is well-formed.
        while pat:
            _, chunk, pat = _scan_chunk(pat)
            _match_chunk(chunk, b"")
        return False
    return not s


def _scan_chunk(pat: bytes) -> tuple[bool, bytes, bytes]:
    """The next segment of the pattern: a run of non-star operators, perhaps preceded by stars."""
    star = False
    while pat and pat[0] == ord("*"):
        pat = pat[1:]
        star = True
    in_range = False
    i = 0
    while i < len(pat):
        c = pat[i]
        if c == ord("\\"):
            if i + 1 < len(pat):  # the error, if any, is matchChunk's
                i += 1
        elif c == ord("["):
            in_range = True
        elif c == ord("]"):
            in_range = False
        elif c == ord("*") and not in_range:
            break
        i += 1
    return star, pat[:i], pat[i:]


def _decode_rune(s: bytes) -> tuple[int, int]:
    """utf8.DecodeRuneInString: (rune, width); (RuneError, 1) for an invalid or truncated sequence."""
    lead = s[0]
    if lead < 0x80:
        return lead, 1
    width = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 0
    if width and len(s) >= width:
        try:
            text = s[:width].decode("utf-8")  # strict: no overlong forms, no surrogates, nothing past U+10FFFF
        except UnicodeDecodeError:
            return RUNE_ERROR, 1
        return ord(text), width
    return RUNE_ERROR, 1


def _match_chunk(chunk: bytes, s: bytes) -> tuple[bytes, bool]:
    """Whether the chunk matches the start of s, and the rest of s after it. After a mismatch the chunk is still
    read to the end, so a malformed one raises BadPattern whatever s is."""
    failed = False
    while chunk:
        if not failed and not s:
            failed = True
        c = chunk[0]
        if c == ord("["):
            r = 0
            if not failed:
                r, n = _decode_rune(s)
                s = s[n:]
            chunk = chunk[1:]
            negated = False
            if chunk and chunk[0] == ord("^"):
                negated = True
                chunk = chunk[1:]
            hit = False
            nrange = 0
            while True:
                if chunk and chunk[0] == ord("]") and nrange > 0:
                    chunk = chunk[1:]
                    break
                lo, chunk = _get_esc(chunk)
                hi = lo
                if chunk[0] == ord("-"):
                    hi, chunk = _get_esc(chunk[1:])
                if lo <= r <= hi:
                    hit = True
                nrange += 1
            if hit == negated:
                failed = True
        elif c == ord("?"):
            if not failed:
                if s[0] == SEPARATOR:
                    failed = True
                _, n = _decode_rune(s)
                s = s[n:]
            chunk = chunk[1:]
        else:
            if c == ord("\\"):
                chunk = chunk[1:]
                if not chunk:
                    raise BadPattern("syntax error in pattern")
            if not failed:
                if chunk[0] != s[0]:
                    failed = True
                s = s[1:]
            chunk = chunk[1:]
    if failed:
        return b"", False
    return s, True


def _get_esc(chunk: bytes) -> tuple[int, bytes]:
    """A possibly escaped character of a class, and the rest of the chunk (which must not be empty)."""
    if not chunk or chunk[0] in (ord("-"), ord("]")):
        raise BadPattern("syntax error in pattern")
    if chunk[0] == ord("\\"):
        chunk = chunk[1:]
        if not chunk:
            raise BadPattern("syntax error in pattern")
    r, n = _decode_rune(chunk)
    if r == RUNE_ERROR and n == 1:
        raise BadPattern("syntax error in pattern")
    rest = chunk[n:]
    if not rest:
        raise BadPattern("syntax error in pattern")
    return r, rest
