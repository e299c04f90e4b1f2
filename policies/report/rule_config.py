"""The repository-wide rule configuration: `.ddp-check.yaml` in the working folder (or `validate --config FILE`),
which skips a rule or changes its severity for the paths it names, as `.kube-linter.yaml` or checkov's config file
do, beside the per-object annotation (`policies.ddp/suppress`) and an environment's `severity:` (policy.yaml).

    rules:
      - id: SEC006                 # a rule id (docs/rules.md)
        paths: ["vendor/**"]       # optional: globs relative to this file's folder; every path where left out
        severity: off              # error | warning | info | off (not counted; reported as suppressed)
        reason: the platform applies these namespaces' NetworkPolicies

A problem's paths are the file or overlay folder it is reported for and the source file its object was traced to;
an entry applies where any of them matches one of its globs (`*` within a folder, `**` across folders, a folder
standing for everything below it). Entries apply in order, the last matching one deciding. Lowering a severity or
`off` needs a reason; raising does not. Under an operator's policy (the Argo CD plugin) the operator's rules
(environment.OPERATOR_RULES) are not lowered by it: a line says so. What the file says is applied after the
environment's severities and before the objects' annotations."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..render.files import read_config
from ..render.loader import InputError
from ..kube.objects import ERROR, INFO, SEVERITIES, WARNING, Problem

FILE_NAME = ".ddp-check.yaml"
OFF = "off"
_RANK = {INFO: 0, WARNING: 1, ERROR: 2}
_KEYS = ("id", "paths", "severity", "reason")


@dataclass
class Entry:
    rule: str
    severity: str
    reason: str | None
    globs: list[Glob] = field(default_factory=list)  # empty: every path

    def matches(self, paths: list[str]) -> bool:
        return not self.globs or any(g.matches(path) for g in self.globs for path in paths)


@dataclass
class RuleConfig:
    source: str
    root: Path
    entries: list[Entry]

    def decide(self, rule: str, paths: list[str]) -> Entry | None:
        """The last entry for `rule` that matches one of `paths` (relative to the file's folder), None for none."""
        found = None
        for e in self.entries:
            if e.rule == rule and e.matches(paths):
                found = e
        return found


MAX_GLOB = 512  # characters in one glob


@dataclass(frozen=True)
class Glob:
    """A glob over slash-separated relative paths, matched by simulating its automaton (time linear in the glob
    times the path, whatever the glob: a file from a repository the platform team does not control cannot make the
    Argo CD plugin backtrack). `**/` any number of folders, `**` anything, `*` and `?` within a folder, `[...]` (or
    `[!...]`) one character of a class; what the glob names also covers everything below it (`vendor` = `vendor/**`)."""

    text: str
    tokens: tuple[tuple[str, str], ...]

    @staticmethod
    def parse(text: str) -> "Glob":
        out: list[tuple[str, str]] = []
        body = text.rstrip("/") or text
        i, n = 0, len(body)
        while i < n:
            if body.startswith("**/", i):
                out.append(("dirs", ""))
                i += 3
            elif body.startswith("**", i):
                out.append(("any", ""))
                i += 2
            elif body[i] == "*":
                out.append(("star", ""))
                i += 1
            elif body[i] == "?":
                out.append(("one", ""))
                i += 1
            elif body[i] == "[" and body.find("]", i + 2) > 0:
                j = body.find("]", i + 2)
                out.append(("class", body[i + 1:j]))
                i = j + 1
            else:
                out.append(("lit", body[i]))
                i += 1
        return Glob(text, tuple(out))

    def _closure(self, states: set[int]) -> set[int]:
        todo = list(states)
        while todo:
            s = todo.pop()
            if s < len(self.tokens) and self.tokens[s][0] in ("dirs", "any", "star") and s + 1 not in states:
                states.add(s + 1)
                todo.append(s + 1)
        return states

    def matches(self, path: str) -> bool:
        end = len(self.tokens)
        states = self._closure({0})
        for ch in path:
            if ch == "/" and end in states:
                return True  # the glob named a folder above the path
            nxt: set[int] = set()
            for s in states:
                if s == end:
                    continue
                kind, arg = self.tokens[s]
                if kind == "any" or (kind == "star" and ch != "/"):
                    nxt.add(s)
                elif kind == "dirs":
                    nxt.add(s)
                    if ch == "/":
                        nxt.add(s + 1)
                elif kind == "one" and ch != "/":
                    nxt.add(s + 1)
                elif kind == "class" and ch != "/" and _in_class(ch, arg):
                    nxt.add(s + 1)
                elif kind == "lit" and ch == arg:
                    nxt.add(s + 1)
            if not nxt:
                return False
            states = self._closure(nxt)
        return end in states


def _in_class(ch: str, spec: str) -> bool:
    negate = spec.startswith("!")
    spec = spec[1:] if negate else spec
    hit, i = False, 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            hit = hit or spec[i] <= ch <= spec[i + 2]
            i += 3
        else:
            hit = hit or ch == spec[i]
            i += 1
    return hit != negate


def load(path: str | Path) -> RuleConfig:
    """The file, checked: one InputError naming the file and the field for anything it cannot mean."""
    from ..rules import RULES

    src = str(path)
    try:
        doc = read_config(path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{src}{where}: not YAML: {getattr(exc, 'problem', None) or exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise InputError(f"{src}: expected a mapping with `rules:` (docs/validation.md#repository-wide-rule-settings)")
    unknown = sorted(str(k) for k in doc if k != "rules")
    if unknown:
        raise InputError(f"{src}: {unknown[0]}: unknown key, expected `rules:`")
    raw = doc.get("rules") or []
    if not isinstance(raw, list):
        raise InputError(f"{src}: rules: expected a list of entries (- id: RULE ...)")
    entries = []
    for i, item in enumerate(raw):
        at = f"{src}: rules[{i}]"
        if not isinstance(item, dict):
            raise InputError(f"{at}: expected a mapping with id and severity")
        extra = sorted(str(k) for k in item if k not in _KEYS)
        if extra:
            raise InputError(f"{at}.{extra[0]}: unknown key, expected {', '.join(_KEYS)}")
        rule = item.get("id")
        if not isinstance(rule, str) or rule not in RULES:
            raise InputError(f"{at}.id: {rule!r} is no rule (docs/rules.md lists them)")
        level = item.get("severity")
        if level is False:  # YAML 1.1 reads a bare `off` as false
            level = OFF
        if level not in (*SEVERITIES, OFF):
            raise InputError(f"{at}.severity: {level!r}, expected one of {', '.join((*SEVERITIES, OFF))}")
        reason = item.get("reason")
        if reason is not None and (not isinstance(reason, str) or not reason.strip()):
            raise InputError(f"{at}.reason: expected a sentence saying why")
        lowers = level == OFF or _RANK[level] < _RANK[RULES[rule].severity]
        if lowers and reason is None:
            raise InputError(f"{at}: {'skipping' if level == OFF else 'lowering'} {rule} needs a reason: write "
                             "`reason: <why these paths may break the rule>`")
        globs = item.get("paths")
        if globs is None:
            globs = []
        if isinstance(globs, str):
            globs = [globs]
        if not isinstance(globs, list) or not all(isinstance(g, str) and g.strip() for g in globs):
            raise InputError(f"{at}.paths: expected a list of globs relative to {Path(src).parent or '.'}")
        if any(Path(g).is_absolute() or ".." in Path(g).parts for g in globs):
            raise InputError(f"{at}.paths: globs are relative to the file's folder, without '..'")
        if any(len(g) > MAX_GLOB for g in globs):
            raise InputError(f"{at}.paths: a glob longer than {MAX_GLOB} characters")
        entries.append(Entry(rule, level, reason.strip() if reason else None,
                             [Glob.parse(g.strip().removeprefix("./")) for g in globs]))
    return RuleConfig(src, Path(src).resolve().parent, entries)


def find(explicit: str | None, cwd: Path | None = None) -> RuleConfig | None:
    """`--config FILE` (which must exist), else `.ddp-check.yaml` in the working folder where there is one."""
    if explicit:
        if not os.path.isfile(explicit):
            raise InputError(f"{explicit}: no such file (--config)")
        return load(explicit)
    here = (cwd or Path.cwd()) / FILE_NAME
    return load(FILE_NAME if cwd is None else here) if here.is_file() else None


def _relative(path: str | None, root: Path) -> str | None:
    if not path or path == "<stdin>":
        return None
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def apply(config: RuleConfig, units: list[Any]) -> None:
    """The file's settings on every placed problem of `units` (after trace.place): severities changed, `off`
    problems moved to the unit's suppressed ones with the reason."""
    from ..rules.environment import OPERATOR_RULES

    for u in units:
        kept: list[Problem] = []
        held: set[str] = set()
        operator = getattr(u.environment, "operator", None) if u.environment else None
        for p in u.problems:
            paths = [x for x in (_relative(u.source, config.root), _relative(p.source, config.root),
                                 _relative(p.location[0] if p.location else None, config.root)) if x]
            entry = config.decide(p.rule, paths)
            if entry is None:
                kept.append(p)
                continue
            lowers = entry.severity == OFF or _RANK[entry.severity] < _RANK.get(p.severity, 0)
            if operator and lowers and p.rule in OPERATOR_RULES:
                held.add(p.rule)
                kept.append(p)
                continue
            if entry.severity == OFF:
                p.suppressed = f"{entry.reason} ({config.source})"
                u.suppressed.append(p)
                continue
            p.severity = entry.severity
            kept.append(p)
        for rule in sorted(held):
            kept.append(Problem("CONFIG", f"{config.source} lowers {rule}, which the operator's policy "
                                f"({operator}) governs here: not applied", u.source, severity=INFO,
                                hint="ask the platform team to allow what the overlay needs in the operator's "
                                     "policy"))
        u.problems[:] = kept
