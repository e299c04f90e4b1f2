"""The checks are pure (issue 34's "rules must be pure", as the developers' guide asks): validating the corpus, every
rule fixture and the repository's overlays changes no object it reads, and each unit's problems do not depend on
which units were checked before it (no state is carried from one unit to the next)."""
from __future__ import annotations

import json

from policies.report import engine
from policies.schema import BuiltinValidator

from conftest import FIXTURES, REPO

PATHS = [str(REPO / "tests" / "corpus"), str(FIXTURES / "rules"), str(REPO / "overlays")]


def _objects(units: list[engine.Unit]) -> list[list[str]]:
    return [[json.dumps(m.obj, sort_keys=True, default=repr) for m in u.manifests] for u in units]


def _said(units: list[engine.Unit]) -> dict[str, list[str]]:
    return {u.source: [p.line() for p in u.problems] for u in units}


def test_validating_changes_no_object_and_no_unit_depends_on_the_order():
    units = engine.collect(PATHS, REPO / "overlays")
    assert len(units) > 300 and not [u.source for u in units if u.failed_input]
    before = _objects(units)
    engine.validate(units, BuiltinValidator())
    assert sum(len(u.problems) for u in units) > 1000  # (the fixtures that must fail do)
    changed = [u.source for u, b, a in zip(units, before, _objects(units)) if a != b]
    assert changed == []
    backwards = list(reversed(engine.collect(PATHS, REPO / "overlays")))
    engine.validate(backwards, BuiltinValidator())
    first, second = _said(units), _said(backwards)
    assert [s for s in first if first[s] != second.get(s)] == []
