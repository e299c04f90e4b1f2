"""Reporters for `make validate`: text (one line per problem and a summary), JSON, SARIF 2.1.0 (GitHub code
scanning shows each problem on the pull request's lines) and JUnit XML (CI dashboards). All read the same units."""
from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .engine import Unit, count, count_suppressed, failed
from .files import rel
from .model import ERROR, INFO, WARNING, Problem
from .rules import FAMILIES, RULES

TOOL = "ddp-policies"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {ERROR: "error", WARNING: "warning", INFO: "note"}
# Ids that are not rules in the registry but can appear in a report.
OTHER_IDS = {
    "INPUT": "The input could be read and rendered",
    "SCHEMA": "Every object is valid against its pinned schema",
    "SCHEMA-MISSING": "Every object's kind has a schema",
    "SCHEMA-INPUT": "The schema stage could read the object",
    "ENV": "The environment declaration is valid and gives what the rules need",
    "SUPPRESS": "Every suppression names a rule and gives a reason",
}


@dataclass
class Run:
    """What every reporter needs besides the units."""

    units: list[Unit]
    schema: str
    seconds: float
    strict: bool = False

    @property
    def problems(self) -> list[Problem]:
        return [p for u in self.units for p in u.problems]

    @property
    def suppressed(self) -> list[Problem]:
        return [p for u in self.units for p in u.suppressed]

    def summary(self) -> dict[str, Any]:
        overlays = sum(1 for u in self.units if u.kind == "overlay")
        files = sum(1 for u in self.units if u.kind == "file")
        return {"overlays": overlays, "files": files, "skipped": len(self.units) - overlays - files,
                "objects": sum(len(u.manifests) for u in self.units),
                "workloads": sum(len(u.topologies) for u in self.units), "rules": len(RULES),
                "errors": count(self.units, ERROR), "warnings": count(self.units, WARNING),
                "info": count(self.units, INFO), "suppressed": count_suppressed(self.units),
                "failed": failed(self.units, self.strict), "strict": self.strict, "seconds": round(self.seconds, 3)}




def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def where(p: Problem, unit: Unit) -> tuple[str | None, int | None, bool]:
    """(file, line, traced): the traced source line, else the overlay's kustomization or the file itself."""
    if p.location:
        return p.location[0], p.location[1], True
    if unit.kind == "overlay":
        from .kustomization import kustomization_file

        k = kustomization_file(Path(unit.source))
        return (rel(str(k)) if k else rel(unit.source)), 1, False
    if unit.source == "<stdin>":
        return None, None, False
    return rel(p.source if p.obj is None else unit.source), 1, False


# --- text ------------------------------------------------------------------------------------------------------


def text_line(p: Problem, unit: Unit) -> str:
    line = p.line()
    if p.obj:
        if p.location:
            line += f" [{p.location[0]}:{p.location[1]}]"
        elif unit.kind == "overlay":
            line += " [rendered]"
    return line


def to_text(run: Run) -> str:
    order = {ERROR: 0, WARNING: 1, INFO: 2}
    out: list[str] = []
    rows = [(p, u) for u in run.units for p in u.problems]
    for p, u in sorted(rows, key=lambda r: (r[0].source, order.get(r[0].severity, 3), r[0].rule)):
        out.append(text_line(p, u))
    for u in run.units:
        for p in u.suppressed:
            text = text_line(p, u).split(" ", 1)[1]
            out.append(f"suppressed {text} (reason: {p.suppressed})")
    # What each world survives (policies/recovery.py; make plan says why).
    out += [f"recovery {rel(u.source)}: {t.manifest.ref} {s.words()}" for u in run.units for t, s in u.recovery]
    s = run.summary()
    # An overlay and argocd/ alike are folders kustomize rendered (make diff counts them the same way).
    what = ", ".join(x for x in (_count(s["overlays"], "rendered folder") if s["overlays"] else "",
                                 _count(s["files"], "file") if s["files"] else "") if x) or "0 files"
    if s["skipped"]:
        what += f" ({_count(s['skipped'], 'file')} skipped: not Kubernetes)"
    verdict = "FAILED" if s["failed"] else "OK"
    sup = ""
    if s["suppressed"]:
        rules = sorted({p.rule for p in run.suppressed})
        sup = f" ({', '.join(rules)})"
    out.append(f"{verdict}: {what}, {_count(s['objects'], 'object')}; schema: {run.schema}; {s['rules']} rules, "
               f"{_count(s['workloads'], 'training workload')}; {_count(s['errors'], 'error')}, "
               f"{_count(s['warnings'], 'warning')}, {s['info']} info, "
               f"{s['suppressed']} suppressed{sup}{' (strict)' if run.strict else ''} ({run.seconds:.2f} s)")
    return "\n".join(out) + "\n"


# --- JSON ------------------------------------------------------------------------------------------------------


def problem_json(p: Problem, u: Unit) -> dict[str, Any]:
    file, line, traced = where(p, u)
    out = {"severity": p.severity, "rule": p.rule, "source": rel(p.source), "object": p.obj, "field": p.field,
           "message": p.message, "hint": p.hint, "file": file, "line": line, "traced": traced}
    if p.suppressed is not None:
        out["suppressed"] = p.suppressed
    return out


def recovery_json(t: Any, s: Any) -> dict[str, Any]:
    """What a world survives (policies/recovery.py), for make validate's and make plan's JSON."""
    return {"object": t.manifest.ref, "pod_losses_survived": s.losses if s.modelled else None,
            "any_number": s.modelled and s.losses is None, "modelled": s.modelled, "why": s.why}


def to_json(run: Run) -> str:
    from .environment import describe

    data = {
        "validator": run.schema,
        "units": [{"source": rel(u.source), "kind": u.kind, "objects": len(u.manifests), "workloads": len(u.topologies),
                   "environment": describe(u.environment) if u.environment else None,
                   "recovery": [recovery_json(t, s) for t, s in u.recovery]} for u in run.units],
        "problems": [problem_json(p, u) for u in run.units for p in u.problems],
        "suppressed": [problem_json(p, u) for u in run.units for p in u.suppressed],
        "summary": run.summary(),
    }
    return json.dumps(data, indent=2) + "\n"


# --- SARIF 2.1.0 -----------------------------------------------------------------------------------------------


def _rule_descriptors() -> list[dict[str, Any]]:
    out = []
    for r in RULES.values():
        body = " ".join(r.doc.strip().split("\n\n")[1].split()) if "\n\n" in r.doc.strip() else r.title
        family = next((f for f in FAMILIES if r.id.startswith(f)), "")
        out.append({"id": r.id, "name": r.name, "shortDescription": {"text": r.title + "."},
                    "fullDescription": {"text": body},
                    "help": {"text": r.doc.strip(), "markdown": r.doc.strip()},
                    "defaultConfiguration": {"level": SARIF_LEVEL[r.severity]},
                    "properties": {"tags": [family.lower(), "kubernetes", "pytorch"]}})
    for rid, text in OTHER_IDS.items():
        out.append({"id": rid, "name": rid.lower(), "shortDescription": {"text": text + "."},
                    "defaultConfiguration": {"level": "error"}})
    return out


def _fingerprint(p: Problem, unit: Unit) -> str:
    key = "\0".join([p.rule, rel(unit.source), p.obj or "", p.field or ""])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _sarif_result(p: Problem, unit: Unit, index: dict[str, int]) -> dict[str, Any]:
    file, line, traced = where(p, unit)
    subject = " ".join(x for x in (p.obj, p.field) if x)
    text = f"{subject}: {p.message}" if subject else p.message
    if p.hint:
        text += f" (fix: {p.hint})"
    if not traced and p.obj and unit.kind == "overlay":
        text += f" [rendered object in {rel(unit.source)}]"
    location: dict[str, Any] = {}
    if file:
        location["physicalLocation"] = {"artifactLocation": {"uri": Path(file).as_posix(), "uriBaseId": "SRCROOT"},
                                        "region": {"startLine": int(line or 1)}}
    if p.obj:
        location["logicalLocations"] = [{"fullyQualifiedName": subject, "name": p.obj, "kind": "object"}]
    result: dict[str, Any] = {
        "ruleId": p.rule, "level": SARIF_LEVEL.get(p.severity, "error"), "message": {"text": text},
        "locations": [location] if location else [],
        "partialFingerprints": {"ddpPolicy/v1": _fingerprint(p, unit)},
        "properties": {"unit": rel(unit.source), "object": p.obj, "field": p.field, "hint": p.hint,
                       "traced": traced, "severity": p.severity},
    }
    if p.rule in index:
        result["ruleIndex"] = index[p.rule]
    if p.suppressed is not None:
        result["suppressions"] = [{"kind": "inSource", "status": "accepted", "justification": p.suppressed}]
    return result


def to_sarif(run: Run) -> str:
    rules = _rule_descriptors()
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = [_sarif_result(p, u, index) for u in run.units for p in [*u.problems, *u.suppressed]]
    s = run.summary()
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": TOOL, "semanticVersion": "1.0.0", "rules": rules}},
            "originalUriBaseIds": {"SRCROOT": {"uri": Path.cwd().resolve().as_uri() + "/"}},
            "invocations": [{"executionSuccessful": True, "exitCode": 1 if s["failed"] else 0,
                             "properties": {"schemaValidator": run.schema, **s}}],
            "columnKind": "utf16CodeUnits",
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


# --- JUnit XML -------------------------------------------------------------------------------------------------


def to_junit(run: Run) -> str:
    """One testsuite per overlay or file; one testcase per problem (failure for an error, or for a warning under
    --strict; skipped for a suppressed one) and one passing testcase per rule that found nothing."""
    root = ET.Element("testsuites", name="make validate")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for u in run.units:
        suite = ET.SubElement(root, "testsuite", name=rel(u.source))
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="kind", value=u.kind)
        if u.environment:
            ET.SubElement(props, "property", name="environment", value=u.environment.name)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        classname = rel(u.source).replace("/", ".")
        hit = {p.rule for p in [*u.problems, *u.suppressed]}
        for p in [*u.problems, *u.suppressed]:
            file, line, _ = where(p, u)
            name = " ".join(x for x in (p.rule, p.obj, p.field) if x)
            attrs = {"classname": classname, "name": name, "time": "0"}
            if file:
                attrs.update(file=file, line=str(line or 1))
            case = ET.SubElement(suite, "testcase", attrs)
            counts["tests"] += 1
            text = p.line() + (f" (reason: {p.suppressed})" if p.suppressed is not None else "")
            message = p.message + (f" (fix: {p.hint})" if p.hint else "")
            if p.suppressed is not None:
                ET.SubElement(case, "skipped", message=f"suppressed: {p.suppressed}").text = text
                counts["skipped"] += 1
            elif p.rule == "INPUT":
                ET.SubElement(case, "error", message=message, type=p.severity).text = text
                counts["errors"] += 1
            elif p.severity == ERROR or (p.severity == WARNING and run.strict):
                ET.SubElement(case, "failure", message=message, type=p.severity).text = text
                counts["failures"] += 1
            else:
                ET.SubElement(case, "system-out").text = text
        if not u.failed_input:
            for r in RULES.values():
                if r.id not in hit:
                    ET.SubElement(suite, "testcase", classname=classname, name=f"{r.id} {r.name}", time="0")
                    counts["tests"] += 1
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{run.seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


FORMATS = {"text": to_text, "json": to_json, "sarif": to_sarif, "junit": to_junit}
