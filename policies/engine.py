"""The validation pipeline for one unit (an overlay or a manifest file): schema stage, then the topology rules."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Protocol

from .launchers import Bundle
from .loader import InputError, read
from .model import ERROR, WARNING, Manifest, Problem
from .render import find_overlays, kustomization_file, render_all
from .rules import RULES, Context
from .topology import Topology, compute


class Validator(Protocol):
    name: str

    def validate(self, manifests: list[Manifest]) -> list[Problem]: ...


@dataclass
class Unit:
    """One thing validated on its own: a rendered overlay or a manifest file."""

    source: str
    kind: str  # "overlay" | "file"
    manifests: list[Manifest] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    topologies: list[Topology] = field(default_factory=list)
    failed_input: bool = False


@dataclass
class Timings:
    render: float = 0.0
    schema: float = 0.0
    policy: float = 0.0


def collect(paths: Iterable[str], default_root: Path) -> list[Unit]:
    """Turn PATHS into units: overlay folders are rendered (in parallel), files and `-` are read as they are."""
    units: list[Unit] = []
    folders: list[tuple[int, Path]] = []
    paths = list(paths) or [str(default_root)]
    for raw in paths:
        p = Path(raw)
        if raw != "-" and p.is_dir():
            if kustomization_file(p):
                folders.append((len(units), p))
                units.append(Unit(str(p), "overlay"))
                continue
            found = find_overlays(p)
            if not found:
                units.append(_input_error(str(p), "overlay", f"{p}: no kustomization.yaml in this folder or below"))
            for d in found:
                folders.append((len(units), d))
                units.append(Unit(str(d), "overlay"))
            continue
        unit = Unit("<stdin>" if raw == "-" else raw, "file")
        try:
            unit.manifests = read(raw)
        except InputError as exc:
            unit = _input_error(unit.source, "file", str(exc))
        units.append(unit)
    for (i, _), rendered in zip(folders, render_all([d for _, d in folders])):
        if rendered.error:
            units[i] = _input_error(rendered.source, "overlay", rendered.error)
        else:
            units[i].manifests = rendered.manifests
    return units


def _input_error(source: str, kind: str, message: str) -> Unit:
    """A unit that could not be read: the problem points at the file (and line) the message names."""
    where, sep, text = message.partition(": ")
    if not sep or " " in where:
        where, text = source, message
    return Unit(source, kind, problems=[Problem("INPUT", text, where)], failed_input=True)


def check_policies(unit: Unit, rules: Iterable[str] | None = None) -> None:
    bundle = Bundle.of(unit.manifests)
    topologies, unresolved = compute(bundle)
    unit.topologies = topologies
    ctx = Context(bundle, topologies, unresolved, unit.source)
    for rule_id in rules or RULES:
        for p in RULES[rule_id].check(ctx):
            unit.problems.append(p)


def validate(units: list[Unit], validator: Validator | None, timings: Timings | None = None) -> None:
    """Schema-validate then policy-check every unit in place."""
    t = timings or Timings()
    for unit in units:
        if unit.failed_input:
            continue
        if not unit.manifests:
            unit.problems.append(Problem("INPUT", "renders no Kubernetes objects", unit.source, severity=WARNING))
            continue
        if validator is not None:
            start = time.perf_counter()
            unit.problems.extend(validator.validate(unit.manifests))
            t.schema += time.perf_counter() - start
        start = time.perf_counter()
        check_policies(unit)
        t.policy += time.perf_counter() - start


def count(units: list[Unit], severity: str) -> int:
    return sum(1 for u in units for p in u.problems if p.severity == severity)


def failed(units: list[Unit], strict: bool = False) -> bool:
    return count(units, ERROR) > 0 or (strict and count(units, WARNING) > 0)
