"""`make validate` and `make plan` never end in an internal error on any input the tests contain: every fixture
file, every conformance input, and each conformance input with one field of its spec (or of a replica/Job spec
below it) removed or replaced by a value of the wrong type, a negative or a huge number, null or a boolean, alone
and beside its other objects. The model runs only on what it can read: an object the schema stage finds malformed,
or whose pods no controller creates, is skipped and said so in one MODEL info line, never an INTERNAL error."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from policies.report import engine, plan
from policies.render.files import read
from policies.render.loader import InputError
from policies.kube.objects import Manifest
from policies.schema import BuiltinValidator

TESTS = Path(__file__).parent
FILES = sorted(p for p in (TESTS / "fixtures").rglob("*.yaml") if "overlays" not in p.parts and
               "argocd" not in p.parts)
CONFORMANCE = sorted((TESTS / "conformance").glob("*/*.yaml"))
# A string where a number or mapping is expected, a list where a mapping is, a negative replica count, more pods
# than any controller admits, null, a boolean.
WRONG = ("x", [], -1, 2**40, None, True)


def run(manifests: list[Manifest], source: str, valid_only: bool = True) -> engine.Unit:
    """Validate and plan: never an INTERNAL error, whatever the schema stage finds."""
    unit = engine.Unit(source, "file", manifests)
    engine.validate([unit], BuiltinValidator())
    plan.unit_doc(unit)
    plan.pods_text(unit)
    internal = [p.line() for p in unit.problems if p.rule == engine.INTERNAL]
    assert not internal, internal
    return unit


def test_a_negative_replica_count_is_skipped_and_said():
    """The case of issue 27: a PyTorchJob Worker with replicas -3 crashed SEC006; now the webhook's refusal is
    reported (TOPO011) and the model says it skipped the pods."""
    spec = {"replicas": -3, "template": {"spec": {"containers": [{"name": "pytorch", "image": "x:1",
                                                                  "command": ["torchrun", "--nnodes=2", "t.py"]}]}}}
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "neg"},
           "spec": {"pytorchReplicaSpecs": {"Master": {**spec, "replicas": 1}, "Worker": spec}}}
    unit = run([Manifest(obj, "neg.yaml", 0)], "neg.yaml")
    rules = {(p.rule, p.severity) for p in unit.problems}
    assert ("TOPO011", "error") in rules and ("MODEL", "info") in rules
    assert not unit.topologies


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(TESTS)))
def test_every_fixture_file(path):
    try:
        manifests = read(str(path))
    except InputError:
        return  # a bad-input fixture: one line, tested elsewhere
    run(manifests, str(path))


def mutations(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """obj with one key removed or retyped, in spec and one level of named sub-specs below it."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    places = [spec]
    for value in spec.values():
        if isinstance(value, dict):
            places += [v for v in value.values() if isinstance(v, dict)] + [value]
        elif isinstance(value, list):
            places += [v for v in value if isinstance(v, dict)]
    for place in places:
        for key in list(place):
            for wrong in ("drop",) + WRONG:
                out = copy.deepcopy(obj)
                # find the same place in the copy by identity of path: walk again
                target = _find(out["spec"], place, spec)
                if target is None:
                    continue
                if wrong == "drop":
                    del target[key]
                else:
                    target[key] = copy.deepcopy(wrong)
                yield out


def _find(copy_spec: Any, place: Any, orig_spec: Any) -> Any:
    if place is orig_spec:
        return copy_spec
    if isinstance(orig_spec, dict):
        for k, v in orig_spec.items():
            found = _find(copy_spec[k], place, v) if isinstance(v, (dict, list)) else None
            if found is not None:
                return found
    if isinstance(orig_spec, list):
        for i, v in enumerate(orig_spec):
            found = _find(copy_spec[i], place, v) if isinstance(v, (dict, list)) else None
            if found is not None:
                return found
    return None


@pytest.mark.parametrize("path", CONFORMANCE, ids=lambda p: str(p.relative_to(TESTS / "conformance")))
def test_conformance_inputs_and_their_mutations(path):
    objs = yaml.safe_load(path.read_text())["input"]
    for i, obj in enumerate(objs):
        others = [o for j, o in enumerate(objs) if j != i]
        for mutated in mutations(obj):
            for group in ([mutated], others + [mutated]):
                run([Manifest(o, str(path), k) for k, o in enumerate(group)], str(path))
