"""The launcher model against the upstream controllers' own tests: every fixture in tests/conformance/<controller>/
(one upstream case each, see tests/conformance/README.md) goes through the same JSON `make plan FORMAT=json` prints,
and what upstream pins must be there. Rejected inputs must fail `make validate` (schema stage or a rule)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.report import engine, plan
from policies import launchers
from policies.kube.objects import ERROR, Manifest
from policies.rules.kit import Environment
from policies.schema import BuiltinValidator

ROOT = Path(__file__).parent / "conformance"
FIXTURES = sorted(ROOT.glob("*/*.yaml"))
# One folder per launcher in the registry (a launcher whose cases are another's names that one's folder).
CONTROLLERS = tuple(dict.fromkeys(launcher.conformance_folder for launcher in launchers.LAUNCHERS))
SOURCE_KEYS = ("repo", "tag", "file", "test", "pinned_by")
RANDOM = "<random>"


def load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path}: not a mapping"
    return doc


# An upstream test's fake client holds exactly its objects: its world is closed, so an object the input names and
# does not hold (a TrainJob's runtime) is missing there, as a self-contained environment declares (REF001).
CLOSED_WORLD = Environment("upstream-test", "tests/conformance", self_contained=True)


def run(path: Path, doc: dict[str, Any]) -> engine.Unit:
    unit = engine.Unit(str(path), "file", [Manifest(o, str(path), i) for i, o in enumerate(doc["input"])])
    unit.environment = CLOSED_WORLD
    engine.validate([unit], BuiltinValidator())
    return unit


def diff_subset(where: str, want: dict[str, Any] | None, have: dict[str, Any]) -> list[str]:
    out = []
    for k, v in (want or {}).items():
        if k not in have:
            out.append(f"{where}: {k} missing (want {v!r})")
        elif str(have[k]) != str(v) if v is not None else have[k] is not None:
            out.append(f"{where}: {k} is {have[k]!r}, upstream {v!r}")
    return out


def absent(where: str, names: list[str] | None, have: dict[str, Any]) -> list[str]:
    return [f"{where}: {k} present ({have[k]!r}), upstream has none" for k in names or [] if k in have]


def compare_pod(where: str, want: dict[str, Any], have: dict[str, Any]) -> list[str]:
    out = []
    for key in ("name", "hostname", "subdomain"):
        if key in want and want[key] != have[key]:
            out.append(f"{where}: {key} is {have[key]!r}, upstream {want[key]!r}")
    out += diff_subset(f"{where} labels", want.get("labels"), have["labels"])
    out += absent(f"{where} labels", want.get("labels_absent"), have["labels"])
    out += diff_subset(f"{where} annotations", want.get("annotations"), have["annotations"])
    out += absent(f"{where} annotations", want.get("annotations_absent"), have["annotations"])
    for kind in ("containers", "initContainers"):
        by_name = {c["name"]: c for c in have[kind]}
        for cname, cwant in (want.get(kind) or {}).items():
            c = by_name.get(cname)
            if c is None:
                out.append(f"{where}: {kind} {cname} missing (have {sorted(by_name)})")
                continue
            cwant = cwant or {}
            out += diff_subset(f"{where} {cname} env", cwant.get("env"), c["env"])
            out += absent(f"{where} {cname} env", cwant.get("env_absent"), c["env"])
            for section, values in (cwant.get("resources") or {}).items():
                out += diff_subset(f"{where} {cname} resources.{section}", values,
                                   (c.get("resources") or {}).get(section) or {})
            ports = {(p.get("containerPort"), p.get("name")) for p in c.get("ports") or []}
            for p in cwant.get("ports") or []:
                if not any(cp == p.get("containerPort") and (p.get("name") is None or n == p.get("name"))
                           for cp, n in ports):
                    out.append(f"{where}: {cname} port {p} missing (have {sorted(ports, key=str)})")
        for cname in want.get(f"{kind}_absent") or []:
            if cname in by_name:
                out.append(f"{where}: {kind} {cname} present, upstream has none")
    return out


def compare(doc: dict[str, Any], unit: engine.Unit) -> list[str]:
    got = plan.unit_doc(unit)
    by_obj = {w["object"]: w for w in got["workloads"]}
    out: list[str] = []
    for wwant in doc["expect"].get("workloads") or []:
        w = by_obj.get(wwant["object"])
        if w is None and RANDOM in wwant["object"]:  # a name upstream makes random (a Katib trial's)
            pattern = re.compile(".+".join(re.escape(part) for part in wwant["object"].split(RANDOM)) + "$")
            w = next((have for name, have in by_obj.items() if pattern.match(name)), None)
        if w is not None and "namespace" in wwant and w["namespace"] != wwant["namespace"]:
            out.append(f"{wwant['object']}: namespace {w['namespace']!r}, upstream {wwant['namespace']!r}")
        if w is None:
            out.append(f"{wwant['object']}: no such workload (have {sorted(by_obj)}); problems: "
                       f"{[p['message'] for p in got['problems'] if p['severity'] == ERROR]}")
            continue
        if "pods" in wwant:
            have = 0 if w.get("suspended") else len(w["pods"])
            if have != wwant["pods"]:
                out.append(f"{wwant['object']}: {have} pods, upstream {wwant['pods']}")
        if wwant.get("topology"):
            topo = w["topology"]
            if topo is None or not topo["torchrun"]:
                # The upstream test's container starts no torchrun: what torchrun would read is the env the
                # controller gave the first training pod (PET_*; WORLD_SIZE for env:// initialisation).
                env = w["training_env"]
                topo = {**(topo or {}), "nnodes": env.get("PET_NNODES"),
                        "nproc_per_node": env.get("PET_NPROC_PER_NODE"),
                        "world_size": (topo or {}).get("world_size", env.get("WORLD_SIZE"))}
            out += diff_subset(f"{wwant['object']} topology", wwant["topology"], topo)
        for pwant in wwant.get("pod") or []:
            i = pwant.get("index", 0)
            if i >= len(w["pods"]):
                out.append(f"{wwant['object']} pod {i}: missing ({len(w['pods'])} pods)")
                continue
            out += compare_pod(f"{wwant['object']} pod {i}", pwant, w["pods"][i])
    for swant in doc["expect"].get("services") or []:
        services = {s["name"]: s for w in got["workloads"] for s in w["services"]}
        s = services.get(swant["name"])
        if s is None:
            out.append(f"Service {swant['name']}: not created (have {sorted(services)})")
            continue
        for key, value in swant.items():
            if key != "name" and s.get(key) != value:
                out.append(f"Service {swant['name']}: {key} is {s.get(key)!r}, upstream {value!r}")
    return out


def test_every_controller_has_fixtures():
    counts = {c: len(list((ROOT / c).glob("*.yaml"))) for c in CONTROLLERS}
    assert all(n >= 8 for n in counts.values()), counts
    folders = {p.name for p in ROOT.iterdir() if p.is_dir()}
    assert folders == set(CONTROLLERS), "a folder under tests/conformance/ is no launcher's (name it for its id)"


@pytest.mark.parametrize("path", FIXTURES, ids=[str(p.relative_to(ROOT)) for p in FIXTURES])
def test_fixture_names_its_source(path):
    doc = load(path)
    source = doc.get("source") or {}
    missing = [k for k in SOURCE_KEYS if not source.get(k)]
    assert not missing, f"{path.name}: source lacks {missing}"
    assert source["pinned_by"] in ("test", "source")
    assert isinstance(doc.get("input"), list) and doc["input"], "no input objects"


@pytest.mark.parametrize("path", FIXTURES, ids=[str(p.relative_to(ROOT)) for p in FIXTURES])
def test_conformance(path):
    doc = load(path)
    unit = run(path, doc)
    expect = doc.get("expect") or {}
    if expect.get("rejected"):
        errors = [p for p in unit.problems if p.severity == ERROR]
        assert errors, f"upstream refuses this ({expect.get('reason')!r}) but make validate finds no error"
        return
    schema = [p.line() for p in unit.problems if p.rule.startswith("SCHEMA")]
    assert not schema, f"upstream accepts this input but the schema stage does not: {schema}"
    problems = compare(doc, unit)
    assert not problems, "\n".join(problems)


def test_the_documented_case_count_is_true():
    """docs/validation.md states how many upstream cases there are (a block `make docs` writes): keep it true."""
    docs = Path(__file__).resolve().parent.parent
    n = len(FIXTURES)
    for doc in ("docs/validation.md",):
        text = " ".join((docs / doc).read_text().split())
        assert f"{n} cases" in text, f"{doc} does not say {n} cases"
