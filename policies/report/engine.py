"""The validation pipeline for one unit (an overlay or a manifest file): schema stage, then the policy rules; then
the environment's severities and the objects' suppressions are applied."""
from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..argocd import apps as argocd
from ..rules import environment
from ..render import gitops
from ..launchers import (NOT_MODELLED, Bundle, Check, Child, Unreadable, Workload, expand, groups_modelling, of,
                         unread_world, workloads, kueue_in_force)
from ..render.files import path_error, read, rel
from ..render.paths import CHECKOUT
from ..render.loader import HELM_CHART_FILE, InputError, NotKubernetes
from ..kube.objects import ERROR, INFO, WARNING, Manifest, Problem
from ..render.kustomization import folder_named, helm_chart, kustomization_file, overlays_named
from ..render.paths import delivery_folder
from ..render.render import render, render_all
from ..rules.kit import Context, Environment, inputs_digest
from ..rules import RULES, Rule
from ..schema import crd_rules
from ..schema.lookup import RULE as SCHEMA
from ..model.recovery import in_context as survival
from ..schema.validator import Validator
from ..model.topology import Topology, resolve

# `policies.ddp/suppress: "SEC001=why; RES001=why"` on an object suppresses those rules' problems on that object.
SUPPRESS_ANNOTATION = "policies.ddp/suppress"


@dataclass
class Unit:
    """One thing validated on its own: a rendered overlay or a manifest file."""

    source: str
    kind: str  # "overlay" | "file" | FOLDER | SKIPPED
    manifests: list[Manifest] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    topologies: list[Topology] = field(default_factory=list)
    # Every object a modelled controller starts pods for (training or not).
    workloads: list[Workload] = field(default_factory=list)
    failed_input: bool = False
    environment: Environment | None = None
    # Problems an annotation suppressed: not counted, still reported.
    suppressed: list[Problem] = field(default_factory=list)
    # Each training workload's topology and the pod losses its world survives (policies/model/recovery.py).
    recovery: list[tuple[Topology, Any]] = field(default_factory=list)
    # The manifests with the objects controllers make from them (launchers.expand), worked out once.
    expansion: tuple[list[Manifest], list[Child], list[Check]] | None = None
    # An overlay validated without its repository's Argo CD folder: the Applications that sync it and their
    # AppProjects (engine.validate sets it; ARGO008 checks the objects against them).
    synced: argocd.Synced | None = None
    # The manifest files read into it: one for a file, those of the folder for a FOLDER unit (--bundle).
    files: int = 1

    def expanded(self) -> tuple[list[Manifest], list[Child], list[Check]]:
        if self.expansion is None:
            self.expansion = expand(self.manifests)
        return self.expansion


@dataclass
class Timings:
    render: float = 0.0
    schema: float = 0.0
    policy: float = 0.0


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")  # what kubeconform reads in a folder
SKIPPED = "skipped"  # Unit.kind of a file that holds no Kubernetes object (loader.NotKubernetes)
# Unit.kind of the plain manifest files of one folder read as one input (--bundle), as `kubectl apply -f <folder>`
# applies them: each object keeps its own file.
FOLDER = "folder"


def plain_manifests(root: Path, below: bool = True) -> list[Path]:
    """The manifest files under `root` that no kustomization reads: every `*.yaml`, `*.yml`, `*.json` below it, in
    name order, except inside a folder that has a kustomization (an overlay, base or component: kustomize's inputs,
    validated rendered) and inside hidden folders (`.git`, `.github`, `.venv`); hidden files are skipped too. A Helm
    chart (a folder with a Chart.yaml) is its Chart.yaml alone: its templates are helm's to render (the loader skips
    it, saying so). `below=False`: those of `root` itself only."""
    out: list[Path] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if (kfile := kustomization_file(here)) or helm_chart(here):  # (a folder with both is kustomize's)
            dirs[:] = []
            out += [] if kfile else [here / HELM_CHART_FILE]
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if below else []
        out += [here / f for f in sorted(files) if not f.startswith(".") and f.lower().endswith(MANIFEST_SUFFIXES)]
    return sorted(out)


def collect(paths: Iterable[str], default_root: Path, env_file: str | None = None, bundle: bool = False) -> list[Unit]:
    """Turn PATHS into units: overlay folders are rendered (in parallel), files and `-` are read as they are.
    A folder without a kustomization of its own gives every overlay below it and every plain manifest file outside
    them (see `plain_manifests`), each file a unit of its own, as kubeconform reads a folder; with `bundle`, the
    plain files of each folder are one unit (`bundled`), as `kubectl apply -f <folder>` applies them together, and so
    are the files named, per folder (the pre-commit hook's `changed --bundle` names a changed file's neighbours).
    Each overlay gets the environment its components declare; `env_file` serves the units without one."""
    units: list[Unit] = []
    folders: list[tuple[int, Path]] = []
    named: list[Path] = []  # with `bundle`: the files named, read together per folder after the rest
    paths = list(paths) or [str(default_root)]
    for raw in paths:
        p = folder_named(raw) or Path(raw)
        if bundle and raw != "-" and p.is_file():
            named.append(p)
            continue
        if raw != "-" and p.is_dir():
            found = overlays_named(p)
            if found == [p]:  # the folder is an overlay itself: its files are the kustomization's to read
                folders.append((len(units), p))
                units.append(Unit(str(p), "overlay"))
                continue
            plain = plain_manifests(p)
            if not found and not plain:
                units.append(_input_error(str(p), "overlay", f"{p}: no kustomization.yaml and no manifest file "
                                          f"({', '.join('*' + s for s in MANIFEST_SUFFIXES)}) in this folder or below"))
            for d in found:
                folders.append((len(units), d))
                units.append(Unit(str(d), "overlay"))
            units += bundled(plain) if bundle else [_read_found(f) for f in plain]
            continue
        units.append(_read_file(raw))
    for (i, _), rendered in zip(folders, render_all([d for _, d in folders])):
        if rendered.error:
            units[i] = _input_error(rendered.source, "overlay", rendered.error)
        else:
            units[i].manifests = rendered.manifests
            units[i].environment, env_problems = environment.for_overlay(Path(units[i].source))
            units[i].problems.extend(env_problems)
    units += bundled(list(dict.fromkeys(named)))  # a file named twice is read once
    if env_file:
        env, env_problems = environment.load(Path(env_file))
        if env_problems:
            raise InputError(f"{env_file}: {env_problems[0].message}")
        for u in units:
            if u.environment is None and not u.failed_input:
                u.environment = env
    return units


def bundled(files: list[Path]) -> list[Unit]:
    """The plain manifest files of each folder as one unit (FOLDER, its source the folder), in the order of the
    walk; a file that cannot be read, or holds no Kubernetes object, stays a unit of its own and says so."""
    out: list[Unit] = []
    groups: dict[Path, Unit] = {}
    for f in files:
        one = _read_found(f)
        if one.failed_input or one.kind != "file":
            out.append(one)
            continue
        group = groups.get(f.parent)
        if group is None:
            group = groups[f.parent] = Unit(str(f.parent), FOLDER, files=0)
            out.append(group)
        group.manifests += one.manifests
        group.files += 1
    return out


def _read_file(raw: str) -> Unit:
    unit = Unit("<stdin>" if raw == "-" else raw, "file")
    try:
        unit.manifests = read(raw)
    except NotKubernetes as exc:
        # YAML or JSON that is no Kubernetes object at all (a workflow, Helm values): said once, at info level, and
        # not counted as a file checked. `validate <folder>` and the pre-commit hook (`changed`) agree on it.
        unit.kind = SKIPPED
        unit.problems.append(Problem("SKIP", f"{exc.why}: not a Kubernetes manifest, not checked", unit.source,
                                     severity=INFO))
    except InputError as exc:
        unit = _input_error(unit.source, "file", str(exc))
    return unit


def _read_found(path: Path) -> Unit:
    """A file found in a folder walk: read only if it is a regular file. A FIFO would wait for a writer forever and
    a device never ends; each is one line (a file named on the command line is read whatever it is, within the
    loader's bounds: `<(kustomize build ...)` is a pipe)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return _input_error(str(path), "file", str(path_error(path, exc)))
    if not stat.S_ISREG(mode):
        what = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
        return _input_error(str(path), "file", f"{path}: {what}, not a regular file: not read (name it on the command "
                            "line to read it)")
    return _read_file(str(path))


def _input_error(source: str, kind: str, message: str) -> Unit:
    """A unit that could not be read: the problem points at the file (and line) the message names."""
    named = re.match(r"(:\d+)?: ", message[len(source):]) if message.startswith(source) else None
    if named:  # the source itself, spaces and all, perhaps with a line
        where, text = source + (named.group(1) or ""), message[len(source) + named.end():]
    else:
        where, sep, text = message.partition(": ")
        if not sep or " " in where:
            where, text = source, message
    return Unit(source, kind, problems=[Problem("INPUT", text, where)], failed_input=True)


def check_policies(unit: Unit, rules: Iterable[str] | None = None, schema: list[Problem] | None = None) -> None:
    """The policy stage of one unit (the rules of `rules`, else every rule), then the unit's problems settled with
    its schema stage's (`schema`): see settle."""
    manifests, children, refused = unit.expanded()
    # The model runs only on what it can read: an object the schema stage finds malformed is set aside (the API
    # server refuses it, so none of it will exist), said once, and every other object is checked without it.
    found: list[Problem] = []
    malformed = {p.obj for p in schema or [] if p.rule == SCHEMA and p.severity == ERROR and p.obj}
    if malformed:
        found += [_skipped(m, "is not what its schema allows (the SCHEMA errors above)",
                           "none of the policy checks ran on it")
                  for m in manifests if m.ref in malformed]
        manifests = [m for m in manifests if m.ref not in malformed]
    # (every child stays in `children`: its problems, the schema stage's too, are moved to its parent in settle)
    bundle = Bundle.of(manifests, [c for c in children if c.manifest.ref not in malformed])
    broken: list[tuple[Manifest, Exception]] = []
    env = unit.environment
    kueue = kueue_in_force(bundle, env.kueue_frameworks if env is not None else None)  # its ConfigMap, else the env
    unit.workloads = workloads(bundle, broken, kueue)
    resolved = resolve(bundle, unit.workloads, broken)
    # A workload the model could not read drops out of the rules (each needs its pods), said once per object; one
    # whose pods only are unreadable keeps the admission checks its spec gets (TOPO011).
    broken_ids = {id(m.obj) for m, exc in broken if not isinstance(exc, Unreadable)}
    unit.workloads = [w for w in unit.workloads if id(w.manifest.obj) not in broken_ids]
    found += [_skipped(m, str(exc)) if isinstance(exc, Unreadable) else
              _internal(m, f"the {m.kind} could not be modelled", exc) for m, exc in broken]
    unit.topologies = resolved.topologies
    ctx = Context(bundle, resolved.topologies, resolved.unresolved, unit.source, unit.environment,
                  workloads=unit.workloads, undetermined=resolved.undetermined, unread=resolved.unread,
                  scripts=resolved.scripts, unstated=resolved.unstated, elsewhere=resolved.elsewhere,
                  refused=refused, schema_refused=frozenset(p.obj for p in schema or [] if p.rule == SCHEMA),
                  synced=unit.synced, inputs=inputs_digest(bundle.manifests, kueue) if resolved.topologies else None)
    if any(m.api_version.startswith(argocd.GROUP + "/") for m in unit.manifests):
        # renders the folders Applications name, each with its environment's Kueue integrations (ARGO012)
        ctx.argo = argocd.resolve(unit.manifests, unit.source, environment.kueue_frameworks)
    for m in manifests:
        if m.kind in NOT_MODELLED:
            found.append(Problem(MODEL, f"{m.kind} is not modelled: its pod templates got the schema, security and "
                                 "image checks; how many pods it starts and the "
                                 "torchrun world they form were not checked", m.source, m.ref, severity=INFO,
                                 hint="see docs/validation.md for the modelled launchers"))
        elif of(m) is None and (groups := groups_modelling(m.kind)):
            # A modelled kind in an API group, or a version of one, no launcher reads: said, not passed over.
            where = ", ".join(g + (" at other versions" if m.api_version.startswith(g + "/") else "") for g in groups)
            found.append(Problem(MODEL, f"{m.kind} is not modelled in apiVersion {m.api_version} (only in "
                                 f"{where}): nothing in it was checked; how many pods it starts and the "
                                 "torchrun world they form were not checked", m.source, m.ref, severity=INFO,
                                 hint="write it in the modelled API version; see docs/validation.md"))
        elif of(m) is None:
            try:
                unread = unread_world(m)
            except Exception as exc:  # noqa: BLE001 - an object it cannot read is a line, not a crash
                found.append(_internal(m, f"the {m.kind}'s pod specs could not be read", exc))
                continue
            if unread is not None:
                found.append(Problem(MODEL, unread[1], m.source, m.ref, unread[0], severity=INFO,
                                     hint="run it through a modelled launcher (docs/validation.md lists them), or "
                                     "check its pods by hand"))
    for rule_id, rule in _applicable(frozenset(m.kind for m in manifests), tuple(rules) if rules else None):
        try:
            for p in rule.check(ctx):
                p.severity = p.severity or rule.severity
                found.append(p)
        except Exception as exc:  # noqa: BLE001 - one rule that cannot read the input is a line, not a crash
            found.append(Problem(INTERNAL, f"{rule_id} could not run: {type(exc).__name__}: {exc}", unit.source,
                                 hint=INTERNAL_HINT))
    unit.recovery = [(t, survival(ctx, t)) for t in resolved.topologies]
    settle(unit, schema or [], found, children)


def settle(unit: Unit, schema: list[Problem], found: list[Problem], children: list[Child]) -> None:
    """The one pass that turns a unit's findings into what it reports: each problem about an object a controller
    made from another (a Katib trial's job) moved to the object written in the file, the schema stage's first; then
    the policy stage's through the environment's severities and the objects' suppressions (finish). Where a problem
    is shown (its traced line, its path relative to the checkout) is the reporters' pass: trace.place."""
    if children:
        to_parents(schema + found, children)
    unit.problems.extend(schema)
    finish(unit, found)


_APPLICABLE: dict[tuple[frozenset[str], tuple[str, ...] | None], list[tuple[str, Rule]]] = {}


def _reads_any(rule: Rule, present: frozenset[str]) -> bool:
    """The rule reads every kind (no `kinds`), or one of `present`."""
    return rule.kinds is None or not rule.kinds.isdisjoint(present)


def _applicable(present: frozenset[str], only: tuple[str, ...] | None) -> list[tuple[str, Rule]]:
    """The rules (of `only`, else every rule) in registry order, less those whose kinds none of `present` has: the
    registry's index by the set of kinds an input holds, worked out once per such set (a handful per run)."""
    key = (present, only)
    hit = _APPLICABLE.get(key)
    if hit is None:
        if len(_APPLICABLE) > 4096:  # bounded on any input
            _APPLICABLE.clear()
        hit = _APPLICABLE[key] = [(rid, RULES[rid]) for rid in (only or RULES) if _reads_any(RULES[rid], present)]
    return hit


def to_parents(problems: list[Problem], children: list[Child]) -> None:
    """Report each problem about an object a controller made from another (a Katib trial's job) against the object
    written in the file, at the field that holds it."""
    by_ref = {c.manifest.ref: c for c in children}
    for p in problems:
        c = by_ref.get(p.obj or "")
        if c is not None:
            p.source, p.obj, p.field = c.parent.source, c.parent.ref, c.at(p.field)
            p.message = f"{c.said_as or c.manifest.kind}: {p.message}"


# A rule or the launcher model met something it cannot read: said as one error line (never a traceback), which is
# a bug in the model unless the schema stage reports the same object malformed.
INTERNAL = "INTERNAL"
# What the model did not model (a kind no launcher reads, an object it could not read): one info line each.
MODEL = "MODEL"
INTERNAL_HINT = "fix the schema errors above if any; otherwise this is a bug in policies/, please report it"


def _skipped(m: Manifest, why: str, what: str = "its pods and its topology were not checked") -> Problem:
    """An object the model cannot read (malformed, or a value no controller accepts): what was skipped, in one info
    line (its own errors come from the schema stage or TOPO011)."""
    return Problem(MODEL, f"the {m.kind or 'object'} {why}: the model skipped it, so {what}", m.source, m.ref,
                   severity=INFO,
                   hint="fix what the errors about this object say, then validate again")


def _internal(m: Manifest, what: str, exc: Exception) -> Problem:
    return Problem(INTERNAL, f"{what}: {type(exc).__name__}: {str(exc)[:300]}", m.source, m.ref, hint=INTERNAL_HINT)


def finish(unit: Unit, found: list[Problem]) -> None:
    """Fold what could not run into one line, apply the environment's severities, then the suppressions."""
    overrides = unit.environment.severity if unit.environment else {}
    not_run: dict[str, str] = {}
    kept: list[Problem] = []
    for p in found:
        if "not_run" in p.extra:
            not_run.setdefault(p.rule, p.extra["not_run"])
            continue
        level = overrides.get(p.rule)
        if level:
            p.severity = level
        kept.append(p)
    if not_run:
        needs = sorted(set(not_run.values()))
        kept.append(Problem("ENV", f"{', '.join(sorted(not_run))} could not run: no environment declaration gives "
                            f"{', '.join(needs)}", unit.source, severity=INFO,
                            hint="validate the overlay (its component's policy.yaml applies), or pass --env "
                                 "components/<env>/policy.yaml"))
    kept = _apply_suppressions(unit, kept)
    unit.problems.extend(kept)


def parse_suppressions(text: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """`"SEC001=why; RES001=why"` -> ({rule: reason}, [(entry, what is wrong)])."""
    ok: dict[str, str] = {}
    bad: list[tuple[str, str]] = []
    for entry in str(text).replace("\n", ";").split(";"):
        entry = entry.strip()
        if not entry:
            continue
        rule, sep, reason = entry.partition("=")
        rule, reason = rule.strip(), reason.strip()
        if not sep or not reason:
            bad.append((rule, "gives no reason"))
        elif rule not in RULES:
            bad.append((rule, "names no rule"))
        else:
            ok[rule] = reason
    return ok, bad


def _apply_suppressions(unit: Unit, problems: list[Problem]) -> list[Problem]:
    wanted: dict[str, tuple[Manifest, dict[str, str]]] = {}
    extra: list[Problem] = []
    for m in unit.manifests:
        annotations = m.metadata.get("annotations")
        if not annotations or SUPPRESS_ANNOTATION not in annotations:
            continue
        ok, bad = parse_suppressions(annotations[SUPPRESS_ANNOTATION])
        where = f"metadata.annotations[{SUPPRESS_ANNOTATION}]"
        for rule, what in bad:
            if what == "gives no reason":
                extra.append(Problem("SUPPRESS", f"suppression of {rule or '(no rule)'} gives no reason, so it is not "
                                     "applied", m.source, m.ref, where, f"write `{rule or 'RULE'}=<why this object may "
                                     "break the rule>`", severity=ERROR))
            else:
                extra.append(Problem("SUPPRESS", f"suppression names {rule}, which is no rule", m.source, m.ref, where,
                                     "use a rule id from docs/rules.md", severity=WARNING))
        if ok:
            wanted[m.ref] = (m, ok)
    if not wanted:
        return problems + extra
    used: set[tuple[str, str]] = set()
    kept: list[Problem] = []
    for p in problems:
        entry = wanted.get(p.obj or "")
        reason = entry[1].get(p.rule) if entry else None
        if reason is None:
            kept.append(p)
            continue
        p.suppressed = reason
        used.add((p.obj or "", p.rule))
        unit.suppressed.append(p)
    for ref, (m, ok) in wanted.items():
        for rule in ok:
            if (ref, rule) not in used:
                extra.append(Problem("SUPPRESS", f"suppresses {rule}, which finds nothing on this object", m.source,
                                     m.ref, f"metadata.annotations[{SUPPRESS_ANNOTATION}]",
                                     f"remove {rule} from the annotation", severity=INFO))
    return kept + extra


def _repository_url(folder: Path) -> tuple[str | None, str | None]:
    """(the URL the repository of an Argo CD folder declares itself at, why none can be read): its own gitops.yaml's
    argocd.repoURL, which says which Applications' sources are that repository. (None, None) for this checkout's
    own folder, whose URL gitops.argocd_settings already gives (as the rule fixtures may set it)."""
    root = folder.parent
    if CHECKOUT is not None and root.resolve() == CHECKOUT.resolve():
        return None, None
    config = root / "gitops.yaml"
    if not config.is_file():
        return None, f"{rel(root)} has no gitops.yaml to say which Applications' sources are that repository"
    try:
        url = (gitops.load(config).get("argocd") or {}).get("repoURL")
    except gitops.ConfigError as exc:
        return None, f"{' '.join(str(exc).split())}"
    if not isinstance(url, str) or not url.strip():
        return None, f"{rel(config)} declares no argocd.repoURL to say which Applications' sources are that repository"
    return url, None


def synced(units: list[Unit]) -> None:
    """Tell each overlay validated without its repository's Argo CD folder (paths.delivery_folder) which Applications
    of that folder sync it, so that ARGO008 checks its objects against their AppProject (`make validate
    PATHS=<overlay>`, the pre-commit hook, `ddp-check` installed, the Argo CD plugin): which sources are that
    repository is read from its own gitops.yaml (another repository's, validated from here or installed, included).
    Where the folder is validated in the same run, ARGO008 checks the overlay there, once. Where it does not render,
    or its repository says no URL while it holds an AppProject, one info line says the overlay was not checked
    against it. The folder is rendered once per run (render's cache; prefetched by the command line)."""
    validated = {Path(u.source).resolve() for u in units if u.kind == "overlay"}
    delivered: dict[Path, tuple[list[Manifest], str | None]] = {}
    for u in units:
        if u.kind != "overlay" or u.failed_input or not u.manifests:
            continue
        folder = delivery_folder(u.source)
        if folder is None:
            continue
        # Validated in this run too: ARGO008 checks the overlay there, once; the Applications are still told (where
        # they send the overlay's objects: SEC010 reads their destination namespace).
        elsewhere = folder.resolve() in validated
        if folder not in delivered:
            r = render(folder)
            delivered[folder] = ([], r.error) if r.error else (r.manifests, None)
        manifests, error = delivered[folder]
        where = rel(folder)
        if error:
            if not elsewhere:
                u.problems.append(Problem(
                    "ARGO008", f"not checked against the AppProjects of {where}: it does not render "
                    f"({' '.join(error.split())[:200]})", u.source, severity=INFO,
                    hint=f"make validate PATHS={where} shows why"))
            continue
        url, why = _repository_url(folder)
        if why is not None:
            if argocd.projects(manifests) and not elsewhere:
                u.problems.append(Problem(
                    "ARGO008", f"not checked against the AppProjects of {where}: {why}", u.source, severity=INFO,
                    hint="give the repository a gitops.yaml with argocd.repoURL (make init REPO_URL=...)"))
            continue
        with gitops.repository_url(url) if url is not None else contextlib.nullcontext():
            u.synced = argocd.synced_by(u.source, manifests)
        u.synced.projects_checked_elsewhere = elsewhere


def validate(units: list[Unit], validator: Validator | None, timings: Timings | None = None) -> None:
    """Schema-validate then policy-check every unit in place. The schema stage sees every unit at once (kubeconform
    starts once per run, not once per overlay)."""
    t = timings or Timings()
    synced(units)
    live = [u for u in units if not u.failed_input and u.manifests]
    schema: dict[int, list[Problem]] = {}
    if validator is not None and live:
        start = time.perf_counter()
        # A Katib trial's job is checked against its own kind's schema, as the API server does when the trial
        # creates it; its problems are reported at the Experiment's field.
        expanded = [u.expanded()[0] for u in live]
        found = validator.validate_units(expanded)
        schema = {id(u): crd_rules(manifests, problems) for u, manifests, problems in zip(live, expanded, found)}
        t.schema += time.perf_counter() - start
    for unit in units:
        if unit.failed_input or unit.kind == SKIPPED:
            continue
        if not unit.manifests:
            unit.problems.append(Problem("INPUT", "renders no Kubernetes objects", unit.source, severity=WARNING))
            continue
        start = time.perf_counter()
        check_policies(unit, schema=schema.get(id(unit), []))
        t.policy += time.perf_counter() - start


def count(units: list[Unit], severity: str) -> int:
    return sum(1 for u in units for p in u.problems if p.severity == severity)


def count_suppressed(units: list[Unit]) -> int:
    return sum(len(u.suppressed) for u in units)


def failed(units: list[Unit], strict: bool = False) -> bool:
    return count(units, ERROR) > 0 or (strict and count(units, WARNING) > 0)
