"""kubeconform (`SCHEMA=kubeconform`) over the same committed schemas: one process per run, its JSON results read
back into Problems."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..kube.objects import ERROR, Manifest, Problem
from ..render.paths import CHECKOUT
from .defaulting import as_validated
from .lookup import RULE, RULE_MISSING, RULE_NOT_RUN, SCHEMAS_DIR, kubernetes_version, triage
from .messages import cap, dotted, in_order, missing_field_problems, one_line, unknown_field_problems
from .validator import ValidatorUnavailable

_K8S_TEMPLATE = "{{.NormalizedKubernetesVersion}}-standalone{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json"
_CRD_TEMPLATE = "{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json"
# santhosh-tekuri/jsonschema (kubeconform's validator): "additionalProperties 'a', 'b' not allowed"
_KC_ADDITIONAL = re.compile(r"^additional ?properties (.+) not allowed$", re.I)
_KC_REQUIRED = re.compile(r"^missing propert(?:y|ies):? (.+)$", re.I)  # "missing properties: 'a', 'b'"


_KC_WRAPPED = re.compile(r"jsonschema: '([^']*)' does not validate with \S+: (.+)$")
# kubeconform >= 0.7 (santhosh-tekuri/jsonschema v6): the error tree in `msg`, its new lines turned into spaces:
# `jsonschema validation failed with '<url>#' - at '/spec': validation failed   - at '/spec/x': <text>`; an item's
# depth is its indentation (two spaces a level, after the one space that was the new line).
_KC_TREE = re.compile(r"validation failed with '[^']*'(?P<items> - at .*)$")
_KC_ITEM = re.compile(r"(?P<indent> +)- at '(?P<path>[^']*)': ")


def kubeconform_message_errors(msg: str) -> list[dict[str, str]]:
    """Path and message of each error out of kubeconform's one-line `msg`, for the versions whose
    `validationErrors` do not name the field:

    - 0.7 and later: `... jsonschema validation failed with '<url>#' - at '/spec': validation failed   - at
      '/spec/replicas': got string, want null or integer`: the leaves of the tree (an item with deeper items after
      it only says that they failed);
    - before 0.6: `... jsonschema: '/spec/x' does not validate with <url>: <text>`, one error."""
    text = msg.strip()
    tree = _KC_TREE.search(text)
    if tree:
        items = tree.group("items")
        marks = list(_KC_ITEM.finditer(items))
        found = []
        for k, m in enumerate(marks):
            end = marks[k + 1].start() if k + 1 < len(marks) else len(items)
            depth = len(m.group("indent"))
            deeper = k + 1 < len(marks) and len(marks[k + 1].group("indent")) > depth
            if not deeper:
                found.append({"path": m.group("path"), "msg": items[m.end():end].strip()})
        return found
    wrapped = _KC_WRAPPED.search(text)
    return [{"path": wrapped.group(1), "msg": wrapped.group(2)}] if wrapped else []


def _kubeconform_errors(res: dict[str, Any], msg: str) -> list[dict[str, Any]]:
    """kubeconform's errors for one invalid object, whatever its version: the tree in `msg` where there is one
    (0.7+: `validationErrors` then holds only the top of the tree, e.g. `/spec: validation failed`), else
    `validationErrors` (0.6: one entry per failing field), else the one error in the older `msg`."""
    from_msg = kubeconform_message_errors(msg)
    if _KC_TREE.search(msg.strip()) and from_msg:
        return from_msg
    listed = res.get("validationErrors")
    if isinstance(listed, list) and listed:
        return [e for e in listed if isinstance(e, dict)]
    return from_msg


def find_kubeconform() -> Path | None:
    """$KUBECONFORM, then <checkout>/bin/kubeconform (where `make setup` installs it), then PATH."""
    env = os.environ.get("KUBECONFORM")
    candidates = [Path(env)] if env else []
    if CHECKOUT is not None:
        candidates.append(CHECKOUT / "bin" / "kubeconform")
    on_path = shutil.which("kubeconform")
    if on_path:
        candidates.append(Path(on_path))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def _pointer_to_path(pointer: Any, obj: Any) -> list[str | int]:
    """kubeconform's instance location (`/spec/containers/0`, or a list in newer versions) -> path segments.

    A segment is a list index only where the object really has a list there, so a map key "0" stays a key.
    """
    if isinstance(pointer, list):
        parts = [str(p) for p in pointer]
    else:
        text = str(pointer or "")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in text.split("/")[1:]] if text else []
    out: list[str | int] = []
    node = obj
    for p in parts:
        if isinstance(node, list) and p.isdigit():
            out.append(int(p))
            node = node[int(p)] if int(p) < len(node) else None
        else:
            out.append(p)
            node = node.get(p) if isinstance(node, dict) else None
    return out


class KubeconformValidator:
    """Runs kubeconform once per run (`validate_units`: every unit's objects together) over one file per object,
    strict, offline, against the committed schemas."""

    def __init__(self, binary: Path | str, root: Path | None = None, timeout: float = 600, workers: int | None = None):
        self.binary = str(binary)
        self.root = root or SCHEMAS_DIR
        self.timeout = timeout
        self.workers = workers or min(os.cpu_count() or 4, 16)
        proc = subprocess.run([self.binary, "-v"], capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise ValidatorUnavailable(f"{self.binary} -v exited {proc.returncode}: {one_line(proc.stderr)}")
        self.version = proc.stdout.strip() or "unknown version"
        self.name = f"kubeconform {self.version}"

    def command(self, folder: Path) -> list[str]:
        return [
            self.binary, "-strict", "-summary", "-verbose", "-output", "json",
            "-kubernetes-version", kubernetes_version(self.root), "-n", str(self.workers),
            # Our two folders only: no `default` location, so kubeconform never reaches for the network.
            "-schema-location", f"{self.root / 'kubernetes'}/{_K8S_TEMPLATE}",
            "-schema-location", f"{self.root / 'crds'}/{_CRD_TEMPLATE}",
            str(folder),
        ]

    def validate(self, manifests: list[Manifest]) -> list[Problem]:
        return self.validate_units([manifests])[0]

    def validate_units(self, units: list[list[Manifest]]) -> list[list[Problem]]:
        """Every unit's objects in one kubeconform run (starting it costs more than validating a few hundred
        objects), the results mapped back to each unit and object."""
        triaged = [triage(manifests, self.root) for manifests in units]
        todo = [((u, i), m, path) for u, (_, unit_todo) in enumerate(triaged) for i, m, path in unit_todo]
        per_unit = [list(problems) for problems, _ in triaged]
        if todo:
            for (u, i), p in self._run(todo):
                per_unit[u].append((i, p))
        return [in_order(found) for found in per_unit]

    def _run(self, todo: list[tuple[tuple[int, int], Manifest, Path]]) -> list[tuple[tuple[int, int], Problem]]:
        problems: list[tuple[tuple[int, int], Problem]] = []
        by_name = {f"{u:05d}-{i:07d}": (key, m, path) for key, m, path in todo for u, i in [key]}
        with tempfile.TemporaryDirectory(prefix="schema-kubeconform-") as tmp:
            folder = Path(tmp)
            for name, (_, m, path) in by_name.items():
                # JSON is YAML; one object per named file (unit, object) maps each result back to its manifest.
                (folder / f"{name}.yaml").write_text(json.dumps(as_validated(m, path)))
            try:
                proc = subprocess.run(self.command(folder), capture_output=True, text=True, timeout=self.timeout)
            except subprocess.TimeoutExpired:
                return self._not_run(todo, f"kubeconform timed out after {self.timeout:.0f}s")
            except OSError as e:
                return self._not_run(todo, f"kubeconform could not start: {e}")
        try:
            report = json.loads(proc.stdout) if proc.returncode in (0, 1) else None
        except ValueError:
            report = None
        if not isinstance(report, dict) or not isinstance(report.get("resources"), list):
            detail = one_line(proc.stderr or proc.stdout or "no output")
            return self._not_run(todo, f"kubeconform exited {proc.returncode}: {detail}")

        seen: set[str] = set()
        for res in report["resources"]:
            stem = Path(str(res.get("filename", ""))).stem if isinstance(res, dict) else ""
            if stem not in by_name:
                continue  # reported against no file of ours; the objects it concerns are caught as unreported below
            seen.add(stem)
            key, m, path = by_name[stem]
            problems += [(key, p) for p in self._result_problems(m, path, res)]
        missing = [entry for name, entry in by_name.items() if name not in seen]
        if missing:
            problems += self._not_run(missing, f"kubeconform reported no result for the object (exit {proc.returncode})")
        if proc.returncode != 0 and not problems:
            # A failing exit with every object valid means something went wrong that the report does not show.
            detail = one_line(proc.stderr or "no message")
            return self._not_run(todo, f"kubeconform exited {proc.returncode} yet reported every object valid: {detail}")
        return problems

    def _result_problems(self, m: Manifest, path: Path, res: dict[str, Any]) -> list[Problem]:
        status = str(res.get("status", "")).lower().removeprefix("status")
        msg = str(res.get("msg") or "")
        if status == "valid":
            return []
        if status == "invalid":
            errors = _kubeconform_errors(res, msg)
            if not errors:
                return [Problem(RULE, one_line(msg or "invalid"), m.source, obj=m.ref)]
            schema = None
            found: list[Problem] = []
            for e in errors:
                seg = _pointer_to_path(e.get("path"), m.obj)
                text = str(e.get("msg") or "")
                extra, required = _KC_ADDITIONAL.match(text.strip()), _KC_REQUIRED.match(text.strip())
                if extra:
                    if schema is None:
                        schema = json.loads(path.read_bytes())
                    names = re.findall(r"'([^']*)'", extra.group(1)) or [extra.group(1)]
                    found += unknown_field_problems(m, schema, seg, names, text)
                elif required:
                    names = re.findall(r"'([^']*)'", required.group(1)) or [required.group(1)]
                    found += missing_field_problems(m, seg, names, text)
                else:
                    found.append(Problem(RULE, one_line(text), m.source, obj=m.ref, field=dotted(seg) or None))
            return cap(m, found)
        if status == "error" and "could not find schema" in msg:
            return [Problem(RULE_MISSING, one_line(f"kubeconform: {msg}"), m.source, obj=m.ref, field="kind",
                            hint="run make schemas; the schema file exists for the in-process validator")]
        return [Problem(RULE_NOT_RUN, one_line(f"kubeconform {status or 'unknown status'}: {msg or 'no message'}"),
                        m.source, obj=m.ref, hint="fix the object or the schema file kubeconform could not use")]

    @staticmethod
    def _not_run(todo: list[tuple[Any, Manifest, Path]], why: str) -> list[tuple[Any, Problem]]:
        return [(i, Problem(RULE_NOT_RUN, one_line(f"schema check could not run: {why}"), m.source, obj=m.ref,
                            severity=ERROR, hint="fix kubeconform (make setup), or run with the builtin validator"))
                for i, m, _ in todo]
