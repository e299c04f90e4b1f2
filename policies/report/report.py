"""Reporters for `make validate`: text (one line per problem and a summary), JSON, SARIF 2.1.0 (GitHub code
scanning shows each problem on the pull request's lines), JUnit XML (CI dashboards), GitHub workflow commands (an
annotation per problem on the pull request's diff) and Markdown (a job summary). All read the same units."""
from __future__ import annotations

import hashlib
import json
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .engine import FOLDER, Unit, count, count_suppressed, failed
from ..render.files import rel
from ..kube.objects import ERROR, INFO, WARNING, Problem
from ..rules import FAMILIES, RULES

TOOL = "ddp-policies"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {ERROR: "error", WARNING: "warning", INFO: "note"}
# Ids that are not rules in the registry but can appear in a report (their default level: error, unless below).
OTHER_IDS = {
    "INPUT": "The input could be read and rendered",
    "SCHEMA": "Every object is valid against its pinned schema",
    "SCHEMA-MISSING": "Every object's kind has a schema",
    "SCHEMA-INPUT": "The schema stage could read the object",
    "SCHEMA-NOT-RUN": "The schema stage could check the object",
    "SCHEMA-CEL": "Every object satisfies its CRD's validation rules (x-kubernetes-validations)",
    "SCHEMA-CEL-COST": "Every object's CRD validation rules are within the API server's CEL cost limits",
    "ENV": "The environment declaration is valid and gives what the rules need",
    "SUPPRESS": "Every suppression names a rule and gives a reason",
}

OTHER_LEVELS = {"SCHEMA-CEL-COST": "warning"}


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
        files = sum(u.files for u in self.units if u.kind in ("file", FOLDER))
        return {"overlays": overlays, "files": files,
                "skipped": sum(1 for u in self.units if u.kind not in ("overlay", "file", FOLDER)),
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
        from ..render.kustomization import kustomization_file

        k = kustomization_file(Path(unit.source))
        return (rel(str(k)) if k else rel(unit.source)), 1, False
    if unit.source == "<stdin>":
        return None, None, False
    return rel(p.source if p.obj is None or unit.kind == FOLDER else unit.source), 1, False


# --- text ------------------------------------------------------------------------------------------------------


def text_line(p: Problem, unit: Unit) -> str:
    line = p.line()
    if p.obj:
        if p.location:
            line += f" [{p.location[0]}:{p.location[1]}]"
        elif unit.kind == "overlay":
            line += " [rendered]"
    return line


def ordered(run: Run) -> list[tuple[Problem, Unit]]:
    """The problems (not the suppressed ones) by source, severity and rule, as the text report lists them."""
    order = {ERROR: 0, WARNING: 1, INFO: 2}
    rows = [(p, u) for u in run.units for p in u.problems]
    return sorted(rows, key=lambda r: (r[0].source, order.get(r[0].severity, 3), r[0].rule))


def to_text(run: Run) -> str:
    out: list[str] = []
    for p, u in ordered(run):
        out.append(text_line(p, u))
    for u in run.units:
        for p in u.suppressed:
            text = text_line(p, u).split(" ", 1)[1]
            out.append(f"suppressed {text} (reason: {p.suppressed})")
    # What each world survives (policies/model/recovery.py; make plan says why).
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
    """What a world survives (policies/model/recovery.py), for make validate's and make plan's JSON."""
    return {"object": t.manifest.ref, "pod_losses_survived": s.losses if s.modelled else None,
            "any_number": s.modelled and s.losses is None, "modelled": s.modelled, "why": s.why}


def to_json(run: Run) -> str:
    from ..rules.environment import describe

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
                    "defaultConfiguration": {"level": OTHER_LEVELS.get(rid, "error")}})
    return out


def _fingerprint(p: Problem, unit: Unit) -> str:
    key = "\0".join([p.rule, rel(unit.source), p.obj or "", p.field or ""])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def subject(p: Problem) -> str:
    return " ".join(x for x in (p.obj, p.field) if x)


def finding_text(p: Problem, unit: Unit, traced: bool) -> str:
    """The message SARIF and the annotations carry: object and field, message, fix, and where an object of an
    overlay could not be traced to a source line, the overlay it was rendered from."""
    text = f"{subject(p)}: {p.message}" if subject(p) else p.message
    if p.hint:
        text += f" (fix: {p.hint})"
    if not traced and p.obj and unit.kind == "overlay":
        text += f" [rendered object in {rel(unit.source)}]"
    return text


def _sarif_result(p: Problem, unit: Unit, index: dict[str, int]) -> dict[str, Any]:
    file, line, traced = where(p, unit)
    text = finding_text(p, unit, traced)
    location: dict[str, Any] = {}
    if file:
        location["physicalLocation"] = {"artifactLocation": {"uri": Path(file).as_posix(), "uriBaseId": "SRCROOT"},
                                        "region": {"startLine": int(line or 1)}}
    if p.obj:
        location["logicalLocations"] = [{"fullyQualifiedName": subject(p), "name": p.obj, "kind": "object"}]
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


# --- GitHub workflow commands ----------------------------------------------------------------------------------
# One `::error file=F,line=L,title=RULE::message` line per problem (warning: ::warning, info: ::notice; a warning
# under --strict fails, so it is an ::error): printed in a GitHub Actions step, each is an annotation on that line of
# the pull request's diff. The file and line are SARIF's (where), relative to the workspace.

GITHUB_COMMAND = {ERROR: "error", WARNING: "warning", INFO: "notice"}


def github_data(text: str) -> str:
    """A workflow command's message, escaped as the runner unescapes it (actions/runner ActionCommand)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: str) -> str:
    """A workflow command's property value: the message's escapes, and `:` and `,`, which end a value."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")


def workspace_path(file: str) -> str:
    """The file relative to $GITHUB_WORKSPACE (the repository's root on a runner, where annotations are placed),
    else to the working folder; as given where it lies outside it."""
    base = os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
    try:
        return Path(file).resolve().relative_to(Path(base).resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):
        return Path(file).as_posix()


def github_line(p: Problem, unit: Unit, strict: bool = False) -> str:
    file, line, traced = where(p, unit)
    level = "error" if strict and p.severity == WARNING else GITHUB_COMMAND.get(p.severity, "error")
    props = [f"file={github_property(workspace_path(file))}", f"line={int(line or 1)}"] if file else []
    props.append(f"title={github_property(p.rule)}")
    return f"::{level} {','.join(props)}::{github_data(finding_text(p, unit, traced))}"


def to_github(run: Run) -> str:
    return "".join(github_line(p, u, run.strict) + "\n" for p, u in ordered(run))


# --- Markdown (a job summary) ----------------------------------------------------------------------------------
# As make diff's pull-request comment (policies/diff.py: markdown): a `###` heading, bold counts, one table.

MARKDOWN_ROWS = 200
# Characters Markdown reads as syntax inside a table cell (`|` ends the cell; `<` starts HTML): backslash-escaped.
_MARKDOWN_SYNTAX = re.compile(r"([\\`*_{}\[\]<>|~#!])")


def markdown_cell(text: str) -> str:
    """Text as one table cell that renders as written: line breaks as spaces, `&` as an entity (never one that
    the text spells), Markdown syntax backslash-escaped."""
    return _MARKDOWN_SYNTAX.sub(r"\\\1", " ".join(str(text).split()).replace("&", "&amp;"))


def to_markdown(run: Run) -> str:
    s = run.summary()
    verdict = "failed" if s["failed"] else "passed"
    what = ", ".join(x for x in (_count(s["overlays"], "rendered folder") if s["overlays"] else "",
                                 _count(s["files"], "file") if s["files"] else "") if x) or "0 files"
    lines = [f"### ddp-check {verdict}", "",
             f"**{_count(s['errors'], 'error')}**, **{_count(s['warnings'], 'warning')}**, {s['info']} info, "
             f"{s['suppressed']} suppressed{' (strict: warnings fail)' if run.strict else ''}; {what}, "
             f"{_count(s['objects'], 'object')}, {_count(s['workloads'], 'training workload')}; "
             f"schema: {markdown_cell(run.schema)}."]
    rows = ordered(run)
    if rows:
        lines += ["", "| severity | rule | object | file:line | message |", "|---|---|---|---|---|"]
        for p, u in rows[:MARKDOWN_ROWS]:
            file, line, _ = where(p, u)
            place = f"{workspace_path(file)}:{int(line or 1)}" if file else ""
            message = p.message + (f" (fix: {p.hint})" if p.hint else "")
            lines.append("| " + " | ".join(markdown_cell(x) for x in (p.severity, p.rule, subject(p), place, message))
                         + " |")
        if len(rows) > MARKDOWN_ROWS:
            left = len(rows) - MARKDOWN_ROWS
            lines += ["", f"{_count(left, 'more finding')} not shown here (the first {MARKDOWN_ROWS} are): the step's "
                          "log and the SARIF report hold them all."]
    return "\n".join(lines) + "\n"


FORMATS = {"text": to_text, "json": to_json, "sarif": to_sarif, "junit": to_junit, "github": to_github,
           "markdown": to_markdown}
