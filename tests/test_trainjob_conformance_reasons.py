"""The TrainJob conformance fixtures (tests/conformance/trainjob/) fail or pass `make validate` for their own reason:
test_conformance.py asks a refused input for any error, and an admitted one for a clean schema stage. Here a refused
input must meet an error other than the ones any plain-ML or trainer-less fixture meets (no mlPolicy.torch, no
pods), and an admitted input must meet none of the Trainer's refusals (TOPO011 beyond the no-torch notice)."""
from __future__ import annotations

from pathlib import Path

import pytest

from policies.kube.objects import ERROR, WARNING
from test_conformance import load, run

FIXTURES = sorted((Path(__file__).parent / "conformance" / "trainjob").glob("*.yaml"))
# What a fixture meets because of its shape (upstream's test runtime has no mlPolicy.torch, or no trainer step),
# not because of the case it ports.
INCIDENTAL = ("not mlPolicy.torch", "creates no pods")


def own_errors(path: Path) -> tuple[dict, list[str]]:
    doc = load(path)
    unit = run(path, doc)
    return doc, [p.line() for p in unit.problems
                 if p.severity == ERROR and not any(s in p.message for s in INCIDENTAL)]


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_refused_for_its_own_reason_and_admitted_otherwise(path):
    doc, errors = own_errors(path)
    if (doc.get("expect") or {}).get("rejected"):
        assert errors, f"upstream refuses this ({doc['expect'].get('reason')!r}); only incidental errors here"
    else:
        refusals = [e for e in errors if "TOPO011" in e]
        assert not refusals, f"upstream admits this, the model refuses it: {refusals}"


def test_a_deprecated_cluster_runtime_is_admitted_with_the_webhooks_warning():
    """clustertrainingruntime.go 110-116 (v2.3.0): the warning comes with admission, not a refusal."""
    path = next(p for p in FIXTURES if p.name == "deprecated-clustertrainingruntime-admitted-with-warning.yaml")
    unit = run(path, load(path))
    warned = [p for p in unit.problems if p.rule == "TOPO011" and "deprecated" in p.message]
    assert [p.severity for p in warned] == [WARNING], [p.line() for p in unit.problems]
