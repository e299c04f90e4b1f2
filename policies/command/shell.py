"""The shell scripts containers run (`sh -c '...'`, `bash -c '...'`), read with mvdan/sh's parser (shfmt
--to-json, the binary the pinned shfmt-py wheel installs) and evaluated as far as the manifest shows: each variable
from the container's env, the script's own assignments and the pod's hostname (`$HOSTNAME`, `$(hostname)`); what
only the running shell knows (`$(...)`, `read`, what loops, conditionals and sourced files set) is an Unknown word,
never a guess.

Why mvdan/sh: it parses bash, POSIX sh and mksh as those shells do (its parser tests are confirmed against the real
shells) and its syntax tree names every expansion operator, so a word is evaluated from its parts, not re-split. It
is maintained (shfmt v3.14.1 in shfmt-py 4.2.0; tree-sitter-bash has no typed expansions, bashlex 0.18 of 2023 cannot
parse `case`, `$((...))`, `[[ ]]` or arrays). The cost is one process per distinct script (about 10 ms), cached."""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from .shellwords import BRACES, RUN_TIME, UNDEFINED_K8S, UNSET, Unknown, ansi_c, change_case, join, trim, unescape

# A script longer than this is not parsed (its values are unknown): bounded time and memory on any input. The
# longest script among the corpus and the upstream manifests here is under 2 KB; 64 KiB parse in about 0.5 s and
# 94 MB (shfmt v3.14.1 here), where 240 KB held shfmt 15 s at 638 MB in the Argo CD plugin.
MAX_SCRIPT = 64 * 1024
PARSE_TIMEOUT_S = 20
# shfmt's data segment (its heap; as kustomize's, render.py), and the parser's time in all for one process (one
# validate run, one plugin command): past it every further script is one that could not be read.
PARSE_MEMORY_BYTES = 512 * 1024 * 1024
PARSE_BUDGET_S = 60.0
_spent = [0.0]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_K8S_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# Variables bash sets itself, each time it is read or for the running process.
_DYNAMIC = {"RANDOM", "SRANDOM", "SECONDS", "EPOCHSECONDS", "EPOCHREALTIME", "LINENO", "BASHPID", "PPID", "UID",
            "EUID", "PWD", "OLDPWD", "PIPESTATUS", "BASH_REMATCH", "REPLY", "OPTARG", "OPTIND"}


Value = str  # a known value (str) or an Unknown


class ShellError(Exception):
    """The script could not be read: the parser is not installed, the script does not parse, or it is too long."""


def shfmt() -> str | None:
    """The shfmt binary of this environment (installed beside this Python by shfmt-py), or one on PATH."""
    here = os.path.join(sysconfig.get_path("scripts"), "shfmt")
    return here if os.access(here, os.X_OK) else shutil.which("shfmt")


@functools.lru_cache(maxsize=512)
def parse(script: str) -> dict[str, Any]:
    """The syntax tree of `script` as mvdan/sh's JSON (cached per text); ShellError where it cannot be read."""
    if len(script) > MAX_SCRIPT:
        raise ShellError(f"the script is longer than {MAX_SCRIPT // 1024} KiB and was not read")
    binary = shfmt()
    if binary is None:
        raise ShellError("the shell parser (shfmt, from requirements.txt) is not installed")
    if _spent[0] >= PARSE_BUDGET_S:
        raise ShellError(f"the shell parser's budget for this run ({PARSE_BUDGET_S:g} s) is spent; the script was not "
                         "read")
    cmd = [binary, "--to-json", "-ln", "bash"]
    if sys.platform.startswith("linux"):  # a shell builtin, not preexec_fn (unsafe in threads)
        cmd = ["/bin/sh", "-c", f'ulimit -d {PARSE_MEMORY_BYTES // 1024} 2>/dev/null; exec "$@"', "shfmt", *cmd]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, input=script.encode(), capture_output=True,
                              timeout=min(PARSE_TIMEOUT_S, max(1.0, PARSE_BUDGET_S - _spent[0])), check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ShellError(f"the shell parser could not run: {exc}") from None
    finally:
        _spent[0] += time.monotonic() - start
    if proc.returncode != 0:
        why = proc.stderr.decode(errors="replace").strip().splitlines()
        raise ShellError(f"the script does not parse as a shell script ({why[0] if why else 'shfmt failed'})")
    tree: dict[str, Any] = json.loads(proc.stdout)
    return tree


@dataclass
class Command:
    """One simple command the script runs: its words (each a str or an Unknown), the variables the script has set
    by then (with `export`ed ones in `exported`), and where it runs (`within`: an if, a loop ...; empty at the top)."""

    argv: list[str]
    env: dict[str, Value]
    exported: set[str]
    within: str = ""
    # Set where a sourced file or `eval` may have set any variable before this command.
    tainted: str | None = None


@dataclass
class _State:
    env: dict[str, Value]
    exported: set[str] = field(default_factory=set)
    functions: dict[str, Any] = field(default_factory=dict)
    tainted: str | None = None
    within: str = ""
    depth: int = 0

    def copy(self, within: str) -> "_State":
        return _State(dict(self.env), set(self.exported), dict(self.functions), self.tainted,
                      self.within or within, self.depth)


class Script:
    """A parsed script and the pod it runs in: `commands()` yields each simple command it runs, in order, with its
    words evaluated. `hostname` is the pod's hostname; `args` are the words after the script (`$0`, `$1` ...)."""

    def __init__(self, text: str, env: dict[str, str | None], hostname: str, args: list[str] | None = None) -> None:
        self.text = text
        self._bytes = text.encode()
        self.tree = parse(text)
        self.hostname = hostname
        self.args = list(args or [])
        self._start = {k: v for k, v in env.items() if v is not None}
        self._start.setdefault("HOSTNAME", hostname)

    def commands(self) -> Iterator[Command]:
        state = _State(dict(self._start), set(self._start))
        yield from self._stmts(self.tree.get("Stmts") or [], state)

    # --- statements
    def _stmts(self, stmts: list[Any], state: _State) -> Iterator[Command]:
        for stmt in stmts:
            yield from self._stmt(stmt, state)

    def _stmt(self, stmt: dict[str, Any], state: _State) -> Iterator[Command]:
        cmd = stmt.get("Cmd") or {}
        kind = cmd.get("Type")
        if kind == "CallExpr":
            yield from self._call(cmd, state)
        elif kind == "DeclClause":
            self._declare(cmd, state)
        elif kind in ("Block", "Subshell"):
            inner = state if kind == "Block" else state.copy("a subshell")
            yield from self._stmts(cmd.get("Stmts") or [], inner)
        elif kind == "BinaryCmd":
            op = cmd.get("Op")
            if op in ("|", "|&"):  # every part of a pipeline runs in a subshell
                yield from self._stmt(cmd["X"], state.copy("a pipeline"))
                yield from self._stmt(cmd["Y"], state.copy("a pipeline"))
            else:
                yield from self._stmt(cmd["X"], state)
                yield from self._branches(state, [[cmd["Y"]]], f"`{op}`", complete=False)
        elif kind == "IfClause":
            yield from self._if(cmd, state)
        elif kind == "CaseClause":
            yield from self._branches(state, [item.get("Stmts") or [] for item in cmd.get("Items") or []],
                                      "a case", complete=False)
        elif kind in ("WhileClause", "ForClause"):
            what = "a loop"
            loop = cmd.get("Loop") or {}
            if loop.get("Type") == "WordIter":
                state.env[loop["Name"]["Value"]] = Unknown(f"${loop['Name']['Value']}", "set by a for loop")
            yield from self._branches(state, [(cmd.get("Cond") or []) + (cmd.get("Do") or [])], what, complete=False)
        elif kind in ("TimeClause", "CoprocClause"):
            if cmd.get("Stmt"):
                yield from self._stmt(cmd["Stmt"], state)
        elif kind == "FuncDecl":
            state.functions[cmd["Name"]["Value"]] = cmd.get("Body")
        elif kind == "LetClause" or kind == "ArithmCmd":
            for name in _arith_names(cmd):
                state.env[name] = Unknown(f"${name}", "set by arithmetic at run time")

    def _if(self, cmd: dict[str, Any], state: _State) -> Iterator[Command]:
        branches: list[list[Any]] = []
        complete = False
        node: dict[str, Any] | None = cmd
        conds: list[Any] = []
        while node:
            conds += node.get("Cond") or []
            branches.append(node.get("Then") or [])
            nxt = node.get("Else")
            if nxt and not nxt.get("Cond"):  # a plain else
                branches.append(nxt.get("Then") or [])
                complete = True
                break
            node = nxt
        yield from self._stmts(conds, state)
        yield from self._branches(state, branches, "an if", complete)

    def _branches(self, state: _State, branches: list[list[Any]], what: str, complete: bool) -> Iterator[Command]:
        """Run each branch on a copy of the state; afterwards a variable a branch set is that value where every
        branch (one of them always taken) set the same, else unknown."""
        ends: list[_State] = []
        for stmts in branches:
            inner = state.copy(what)
            yield from self._stmts(stmts, inner)
            ends.append(inner)
        changed = {k for s in ends for k, v in s.env.items() if state.env.get(k, None) is not v}
        for name in changed:
            values = {s.env.get(name) for s in ends}
            if complete and len(values) == 1 and None not in values:
                state.env[name] = values.pop()  # type: ignore[assignment]
            else:
                state.env[name] = Unknown(f"${name}", f"set in {what} at run time")
        for s in ends:
            state.exported |= s.exported
            state.functions.update(s.functions)
            state.tainted = state.tainted or s.tainted

    # --- simple commands
    def _call(self, cmd: dict[str, Any], state: _State) -> Iterator[Command]:
        assigns = cmd.get("Assigns") or []
        words: list[str] = []
        for w in cmd.get("Args") or []:
            words += self.word(w, state)
        if not words:
            for a in assigns:
                self._assign(a, state)
            return
        env = dict(state.env)
        exported = set(state.exported)
        for a in assigns:  # `VAR=1 cmd`: in cmd's environment only
            name = a["Name"]["Value"]
            env[name] = self._assigned(a, state)
            exported.add(name)
        head = words[0]
        if head in ("export", "readonly", "declare", "typeset", "local"):
            return  # (parsed as DeclClause)
        if head == "read" or head == "mapfile" or head == "readarray":
            for tok in words[1:]:
                if _NAME.match(tok):
                    state.env[tok] = Unknown(f"${tok}", f"read by `{head}` at run time")
            return
        if head in (".", "source", "eval"):
            state.tainted = f"`{' '.join(words[:2])}` may set any variable at run time"
            return
        if head == "unset":
            for tok in words[1:]:
                state.env.pop(tok, None)
            return
        if head in state.functions and not isinstance(head, Unknown) and state.depth < 8:
            body = state.functions[head]
            inner = _State(state.env, state.exported, state.functions, state.tainted, state.within, state.depth + 1)
            saved = self.args
            self.args = [head] + [str(w) for w in words[1:]]
            try:
                yield from self._stmt(body, inner)
            finally:
                self.args = saved
            state.tainted = inner.tainted
            return
        yield Command(words, env, exported, state.within, state.tainted)

    def _declare(self, cmd: dict[str, Any], state: _State) -> None:
        variant = (cmd.get("Variant") or {}).get("Value", "")
        export = variant == "export"
        for a in cmd.get("Args") or []:
            if a.get("Naked") and not a.get("Name"):
                flag = "".join(self.word(a.get("Value") or {}, state))
                export = export or (flag.startswith("-") and "x" in flag)
                if "$" in flag:
                    state.tainted = f"`{variant} {flag}` may set any variable at run time"
                continue
            name = a["Name"]["Value"]
            if not a.get("Naked"):
                state.env[name] = self._assigned(a, state)
            if export:
                state.exported.add(name)

    def _assign(self, a: dict[str, Any], state: _State) -> None:
        state.env[a["Name"]["Value"]] = self._assigned(a, state)

    def _assigned(self, a: dict[str, Any], state: _State) -> Value:
        name = a["Name"]["Value"]
        if a.get("Array") or a.get("Index"):
            return Unknown(f"${name}", "an array")
        if a.get("Append"):
            old = self._lookup(name, state)
            new = self._one(a.get("Value"), state)
            return join([old, new])
        return self._one(a.get("Value"), state) if a.get("Value") else ""

    def _one(self, word: dict[str, Any] | None, state: _State) -> Value:
        """A word that is not split (an assignment's value, a case word)."""
        if not word:
            return ""
        return join([text for text, _ in self._parts(word.get("Parts") or [], state, quoted=True)])

    # --- words
    def word(self, word: dict[str, Any], state: _State) -> list[str]:
        """A word's fields after expansion and word splitting: each a str or an Unknown."""
        if _all_args(word):
            # POSIX 2.5.2: `"$@"` (or `"${@}"`) alone in a word expands to the positional parameters $1 ... each a
            # field of its own, as written, none split (none at all where there are none): `sh -c 'exec "$@"' sh
            # torchrun --nnodes=2 ...` runs torchrun with its own words.
            return list(self.args[1:])
        pieces = self._parts(word.get("Parts") or [], state, quoted=False)
        fields: list[list[str]] = [[]]
        for piece, split in pieces:
            if split and not isinstance(piece, Unknown):
                parts = piece.split()
                if not parts:
                    continue
                if piece[:1].isspace():
                    fields.append([])
                for j, p in enumerate(parts):
                    if j:
                        fields.append([])
                    fields[-1].append(p)
                if piece[-1:].isspace():
                    fields.append([])
            else:
                fields[-1].append(piece if not split else Unknown(piece, piece.why, piece.kind, True))  # type: ignore
        out = []
        for f in fields:
            if f:
                out.append(join(f))
        if not out and any(not split for _, split in pieces):
            out.append("")  # a quoted empty word is still a word
        return out

    def _parts(self, parts: list[Any], state: _State, quoted: bool) -> list[tuple[str, bool]]:
        """(text, subject to word splitting) for each part of a word."""
        out: list[tuple[str, bool]] = []
        for p in parts:
            kind = p.get("Type")
            if kind == "Lit":
                raw = p.get("Value", "")
                if not quoted and BRACES.search(raw):
                    out.append((Unknown(raw, f"`{raw}` is brace-expanded at run time", many=True), True))
                else:
                    out.append((unescape(raw, quoted), False))
            elif kind == "SglQuoted":
                value = p.get("Value", "")
                out.append((ansi_c(value) if p.get("Dollar") else value, False))
            elif kind == "DblQuoted":
                out.append((join([t for t, _ in self._parts(p.get("Parts") or [], state, True)]), False))
            elif kind == "ParamExp":
                out.append((self._param(p, state), not quoted))
            elif kind == "CmdSubst":
                out.append((self._subst(p, state), not quoted))
            elif kind == "ArithmExp":
                out.append((self._arith(p, state), not quoted))
            else:  # process substitution, extended globs, brace expansion ...
                out.append((Unknown(self._source(p), "expanded at run time"), not quoted))
        return out

    def _source(self, node: dict[str, Any]) -> str:
        try:
            text = self._bytes[node["Pos"]["Offset"]:node["End"]["Offset"]].decode(errors="replace")
        except (KeyError, TypeError):
            return "$(...)"
        if text.startswith("`"):
            text = "$(" + text.strip("`") + ")"  # written with a `$`, so every check sees it is not a value
        return text if "$" in text else "$" + text

    def _lookup(self, name: str, state: _State) -> Value:
        if name.isdigit():
            i = int(name)
            return self.args[i] if i < len(self.args) else _UNSET_ARG
        if name in ("@", "*", "#"):
            return (" ".join(self.args[1:]) if name != "#" else str(max(len(self.args) - 1, 0)))
        if not _NAME.match(name) or name in _DYNAMIC:
            return Unknown(f"${name}", f"`${name}` is known only at run time")
        value = state.env.get(name)
        if value is not None:
            return value
        if state.tainted:
            return Unknown(f"${name}", state.tainted)
        return Unknown(f"${name}", f"{name} is set neither in the container's env nor by the script", UNSET)

    def _param(self, p: dict[str, Any], state: _State) -> Value:
        name = (p.get("Param") or {}).get("Value", "")
        text = self._source(p)
        if p.get("Excl") or p.get("Index") or p.get("Names") or p.get("Slice"):
            return Unknown(text, f"`{text}` is worked out at run time")
        value = self._lookup(name, state)
        is_set = not (isinstance(value, Unknown) and value.kind == UNSET)
        if value is _UNSET_ARG and not p.get("Exp"):
            return ""
        if p.get("Length"):
            return Unknown(text, value.why, value.kind) if isinstance(value, Unknown) else str(len(value))
        exp = p.get("Exp")
        if exp:
            op = exp.get("Op", "")
            arg = self._one(exp.get("Word"), state)
            if op in (":-", "-", ":=", "=", ":+", "+", ":?", "?"):
                if isinstance(value, Unknown) and is_set:
                    return Unknown(text, value.why, value.kind)
                empty = (not is_set) or (op.startswith(":") and value == "")
                if op.endswith("+"):
                    return "" if empty else arg
                if not empty:
                    return value
                if op.endswith("="):
                    state.env[name] = arg
                if op.endswith("?"):
                    return Unknown(text, f"`{text}` stops the script where {name} is unset")
                return arg
            if isinstance(value, Unknown) or isinstance(arg, Unknown):
                u = value if isinstance(value, Unknown) else arg
                assert isinstance(u, Unknown)  # one of the two is
                return Unknown(text, u.why, u.kind)
            return trim(value, op, arg) if op in ("#", "##", "%", "%%") else change_case(value, op, arg, text)
        repl = p.get("Repl")
        if repl:
            orig, with_ = self._one(repl.get("Orig"), state), self._one(repl.get("With"), state)
            if orig == "" and not isinstance(value, Unknown):
                return value
            if isinstance(value, Unknown) or isinstance(orig, Unknown) or isinstance(with_, Unknown) \
                    or any(c in orig for c in "*?[") or orig[:1] in ("#", "%"):
                return Unknown(text, getattr(value, "why", None) or f"`{text}` is worked out at run time")
            return value.replace(orig, with_) if repl.get("All") else value.replace(orig, with_, 1)
        return value

    def _subst(self, p: dict[str, Any], state: _State) -> Value:
        """`$(hostname)` (and `hostname -s`) is the pod's hostname; `$(NAME)` the kubelet left names a program the
        shell runs; any other command's output is known only at run time."""
        stmts = p.get("Stmts") or []
        if len(stmts) == 1 and (stmts[0].get("Cmd") or {}).get("Type") == "CallExpr" \
                and not (stmts[0]["Cmd"].get("Assigns")):
            words = [w for a in stmts[0]["Cmd"].get("Args") or [] for w in self.word(a, state)]
            if words in (["hostname"], ["hostname", "-s"], ["hostname", "--short"], ["/bin/hostname"]):
                return self.hostname
            if len(words) == 1 and _K8S_NAME.match(words[0]) and not p.get("Backquotes"):
                return Unknown(f"$({words[0]})", f"$({words[0]}) names no variable of the container's env: the "
                               f"kubelet leaves it and the shell runs a program named {words[0]}", UNDEFINED_K8S)
        text = self._source(p)
        return Unknown(text, f"`{_short(text)}` is computed when the script runs")

    def _arith(self, p: dict[str, Any], state: _State) -> Value:
        text = self._source(p)
        try:
            return str(self._arith_value(p.get("X"), state))
        except _NotKnown as exc:
            return Unknown(text, exc.why or f"`{_short(text)}` is computed when the script runs")

    def _arith_value(self, x: Any, state: _State) -> int:
        if not x:
            raise _NotKnown("")
        kind = x.get("Type")
        if kind == "Word":
            text = self._one(x, state)
            if isinstance(text, Unknown):
                raise _NotKnown(text.why)
            text = text.strip()
            if _NAME.match(text):
                value = self._lookup(text, state)
                if isinstance(value, Unknown):
                    if value.kind == UNSET:
                        return 0  # an unset variable is 0 in arithmetic ... unless the image sets it
                    raise _NotKnown(value.why)
                text = value.strip() or "0"
            try:
                return int(text, 0) if not text.lstrip("-").startswith("0") or text.strip("-") == "0" \
                    else int(text, 8)
            except ValueError:
                raise _NotKnown("") from None
        if kind == "ParenArithm":
            return self._arith_value(x.get("X"), state)
        if kind == "UnaryArithm" and x.get("Op") in ("-", "+"):
            v = self._arith_value(x.get("X"), state)
            return -v if x["Op"] == "-" else v
        if kind == "BinaryArithm":
            a, b = self._arith_value(x.get("X"), state), self._arith_value(x.get("Y"), state)
            op = x.get("Op")
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op in ("/", "%") and b != 0:
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C division, as bash does
                return q if op == "/" else a - q * b
        raise _NotKnown("")


# A positional parameter the command line does not give: unset, as surely as a variable the script unsets.
_UNSET_ARG = Unknown("", "no such argument", UNSET)


def _all_args(word: dict[str, Any]) -> bool:
    """Whether the word is `"$@"` or `"${@}"` and nothing else."""
    parts = word.get("Parts") or []
    if len(parts) != 1 or parts[0].get("Type") != "DblQuoted":
        return False
    inner = parts[0].get("Parts") or []
    return len(inner) == 1 and inner[0].get("Type") == "ParamExp" and (inner[0].get("Param") or {}).get("Value") == \
        "@" and not any(inner[0].get(k) for k in ("Exp", "Excl", "Index", "Names", "Slice", "Length", "Repl"))


class _NotKnown(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _arith_names(cmd: dict[str, Any]) -> Iterator[str]:
    """The variables an arithmetic command (`((i++))`, `let x=1`) may set: every name in it."""
    stack = [cmd]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("Type") == "Lit" and _NAME.match(str(node.get("Value", ""))):
                yield node["Value"]
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."
