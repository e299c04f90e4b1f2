"""Schema stage: check every rendered object strictly against the committed JSON schemas in schemas/.

Two validators read the same files: kubeconform when it is installed, else jsonschema-rs in-process (`make_validator`).

Rules:
- `SCHEMA`: the object does not match its schema (unknown field, wrong type, missing required field, bad enum value).
- `SCHEMA-MISSING`: no schema for the object's apiVersion and kind.
- `SCHEMA-INPUT`: the object has no apiVersion or no kind, so no schema can be chosen.
- `SCHEMA-NOT-RUN`: the check could not run for the object (validator missing, crashed, reported nothing for it).

Passing (Job):  `spec.template.spec.containers: [{name: t, image: i, imagePullPolicy: Always}]`
Failing (Job):  `imagePullPolice: Always` ->
  `error SCHEMA overlays/x: Job/ns/n spec.template.spec.containers[0].imagePullPolice: Additional properties are not
  allowed ('imagePullPolice' was unexpected) (fix: did you mean "imagePullPolicy"?)`
"""
from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Protocol

from policies.launchers import as_admitted
from policies.model import ERROR, WARNING, Manifest, Problem
from policies.paths import CHECKOUT, DATA

RULE = "SCHEMA"
RULE_MISSING = "SCHEMA-MISSING"
RULE_INPUT = "SCHEMA-INPUT"
RULE_NOT_RUN = "SCHEMA-NOT-RUN"

SCHEMAS_DIR = DATA / "schemas"
MAX_ERRORS_PER_OBJECT = 20
MAX_MESSAGE = 240

_API_VERSION = re.compile(r"^(?:(?P<group>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)/)?(?P<version>v[0-9]+[a-z0-9]*)$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class ValidatorUnavailable(RuntimeError):
    """The validator asked for cannot run here (e.g. `prefer="kubeconform"` and no kubeconform binary)."""


class Validator(Protocol):
    name: str

    def validate(self, manifests: list[Manifest]) -> list[Problem]: ...

    def validate_units(self, units: list[list[Manifest]]) -> list[list[Problem]]: ...


# ---------------------------------------------------------------- schema lookup

@lru_cache(maxsize=None)
def _versions(root: Path) -> dict[str, Any]:
    return json.loads((root / "versions.json").read_text())


def kubernetes_version(root: Path | None = None) -> str:
    """The pinned Kubernetes version the schemas were generated for, as kubeconform takes it (`1.36.0`)."""
    return str(_versions(root or SCHEMAS_DIR)["kubernetes"]["version"]).lstrip("v")


@lru_cache(maxsize=None)
def find_schema(api_version: str, kind: str, root: Path | None = None) -> Path | None:
    """The committed schema file for apiVersion/kind, looked up in kubeconform's order: built-in kinds, then CRDs."""
    m = _API_VERSION.match(api_version or "")
    if not m or not _KIND.match(kind or ""):
        return None  # also keeps `../` and the like out of the path
    root = root or SCHEMAS_DIR
    group, ver = m.group("group") or "", m.group("version")
    suffix = f"-{group.split('.')[0]}" if group else ""
    k8s = root / "kubernetes" / f"v{kubernetes_version(root)}-standalone-strict" / f"{kind.lower()}{suffix}-{ver}.json"
    if k8s.is_file():
        return k8s
    if group:
        crd = root / "crds" / group / f"{kind.lower()}_{ver}.json"
        if crd.is_file():
            return crd
    return None


def _builtin_group(group: str) -> bool:
    return "." not in group or group.endswith(".k8s.io")


def _triage(manifests: list[Manifest], root: Path) -> tuple[list[tuple[int, Problem]], list[tuple[int, Manifest, Path]]]:
    """SCHEMA-INPUT and SCHEMA-MISSING problems (with the manifest's index), and the (index, manifest, schema) to validate."""
    problems: list[tuple[int, Problem]] = []
    todo: list[tuple[int, Manifest, Path]] = []
    for i, m in enumerate(manifests):
        obj = m.obj
        if not isinstance(obj, dict):
            problems.append((i, Problem(RULE_INPUT, f"document is a {type(obj).__name__}, not an object", m.source,
                                        hint="each YAML document must be one Kubernetes object")))
            continue
        api, kind = obj.get("apiVersion"), obj.get("kind")
        missing = [k for k, v in (("apiVersion", api), ("kind", kind)) if not isinstance(v, str) or not v]
        if missing:
            problems.append((i, Problem(RULE_INPUT, f"object has no {' and no '.join(missing)}", m.source, obj=m.ref,
                                        hint="every Kubernetes object needs a string apiVersion and kind")))
            continue
        path = find_schema(api, kind, root)
        if path is None:
            group = api.split("/")[0] if "/" in api else ""
            if not _API_VERSION.match(api):
                hint = "apiVersion is `<group>/<version>` or `<version>` (e.g. `batch/v1`, `v1`)"
            elif _builtin_group(group):
                hint = (f"Kubernetes v{kubernetes_version(root)} serves no {api} {kind} (schemas/SOURCES.md lists every "
                        "kind it serves): correct apiVersion/kind, or, for a custom resource, copy its upstream CRD "
                        f"into crds/{group}/ (its row and sha256 in crds/SOURCES.md) and run make schemas")
            else:
                # A custom resource whose CRD is not among crds/: the cluster may well serve it, so its schema
                # check could not run (a warning that says so), rather than an error on a manifest that may run.
                hint = (f"copy the upstream CRD into crds/{group}/ (its row and sha256 in crds/SOURCES.md) and run "
                        "make schemas, or remove the object")
                problems.append((i, Problem(RULE_MISSING, f"no schema for apiVersion {api} kind {kind} (a custom "
                                            "resource whose CRD is not in crds/): its schema was not checked",
                                            m.source, obj=m.ref, field="kind", hint=hint, severity=WARNING)))
                continue
            problems.append((i, Problem(RULE_MISSING, f"no schema for apiVersion {api} kind {kind}", m.source,
                                        obj=m.ref, field="kind", hint=hint)))
            continue
        todo.append((i, m, path))
    return problems, todo


# ---------------------------------------------------------------- turning validator errors into Problems

def as_applied(obj: Any) -> Any:
    """The object as the API server validates it: a field written as null (`metadata:` with nothing under it) is
    unset. A null in a nullable field is allowed and unset is equivalent there; in a required field both fail."""
    if isinstance(obj, dict):
        return {k: as_applied(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [as_applied(v) for v in obj]
    return obj


def dotted(path: Iterable[str | int]) -> str:
    """`["spec", "containers", 0, "env"]` -> `spec.containers[0].env`; odd keys quoted: `annotations["a.io/b"]`."""
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif _PLAIN_KEY.match(seg):
            out += f".{seg}" if out else seg
        else:
            out += f"[{json.dumps(seg)}]"
    return out


def one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    for _ in range(32):  # local refs only; the bound stops a ref cycle
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not (isinstance(ref, str) and ref.startswith("#/")):
            return node
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        node = target
    return node


def allowed_fields(schema: dict[str, Any], path: list[str | int]) -> list[str]:
    """Property names the schema allows at the object found at path (following $ref, items, additionalProperties)."""
    node: Any = _resolve(schema, schema)
    for seg in path:
        if not isinstance(node, dict):
            return []
        if isinstance(seg, int):
            node = node.get("items")
        else:
            props = node.get("properties") or {}
            node = props.get(seg, node.get("additionalProperties"))
        node = _resolve(schema, node)
    return sorted((node.get("properties") or {}).keys()) if isinstance(node, dict) else []


def unknown_field_problems(m: Manifest, schema: dict[str, Any] | None, path: list[str | int], names: list[str],
                           message: str) -> list[Problem]:
    problems = []
    allowed = allowed_fields(schema, path) if schema else []
    for name in names:
        close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.75)
        hint = f'did you mean "{close[0]}"?' if close else "remove the field or fix its name (unknown fields are errors)"
        problems.append(Problem(RULE, one_line(message), m.source, obj=m.ref, field=dotted([*path, name]) or None,
                                hint=hint))
    return problems


def missing_field_problems(m: Manifest, path: list[str | int], names: list[str], message: str) -> list[Problem]:
    return [Problem(RULE, one_line(message), m.source, obj=m.ref, field=dotted([*path, name]),
                    hint=f'add the required field "{name}"') for name in names]


def _in_order(found: list[tuple[int, Problem]]) -> list[Problem]:
    """Problems in the order of the manifests they concern (stable within one manifest)."""
    return [p for _, p in sorted(found, key=lambda ip: ip[0])]


def _cap(m: Manifest, problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_ERRORS_PER_OBJECT:
        return problems
    more = len(problems) - MAX_ERRORS_PER_OBJECT
    return problems[:MAX_ERRORS_PER_OBJECT] + [
        Problem(RULE, f"{more} more schema errors in this object not shown", m.source, obj=m.ref)]


# ---------------------------------------------------------------- in-process validator

_COMPILED: dict[Path, tuple[Any, dict[str, Any]]] = {}  # per process: schema file -> (compiled validator, schema)


def installed_version(module: Any) -> str:
    """The version of an installed package whose distribution is named like its module, from the
    `<name>-<version>.dist-info` folder beside it: what importlib.metadata reads, without importing it (0.06 s of
    every `make validate`); else importlib.metadata."""
    name = module.__name__
    site = Path(module.__file__).resolve().parent.parent
    for info in sorted(site.glob(f"{name}-*.dist-info")):
        return info.name[len(name) + 1:-len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown version"


class BuiltinValidator:
    """jsonschema-rs over the committed schemas; each schema file is compiled on first use, once per process."""

    def __init__(self, root: Path | None = None) -> None:
        import jsonschema_rs  # (fail here, not mid-run, if the package is missing)

        self.root = root or SCHEMAS_DIR
        self.name = f"jsonschema-rs {installed_version(jsonschema_rs)} (in-process)"

    def _compiled(self, path: Path) -> tuple[Any, dict[str, Any]]:
        hit = _COMPILED.get(path)
        if hit is None:
            import jsonschema_rs

            schema = json.loads(path.read_bytes())
            # Formats are annotations in 2020-12 (kubeconform does not assert them either).
            hit = (jsonschema_rs.validator_for(schema, validate_formats=False), schema)
            _COMPILED[path] = hit
        return hit

    def validate_units(self, units: list[list[Manifest]]) -> list[list[Problem]]:
        """Each unit's problems. One thread: jsonschema-rs holds the GIL while it validates (two threads measured
        slower than one), and most of a run's schema time is compiling each schema once."""
        return [self.validate(manifests) for manifests in units]

    def validate(self, manifests: list[Manifest]) -> list[Problem]:
        import jsonschema_rs

        problems, todo = _triage(manifests, self.root)
        for i, m, path in todo:
            try:
                validator, schema = self._compiled(path)
            except (OSError, ValueError, jsonschema_rs.ValidationError) as e:
                problems.append((i, Problem(RULE_NOT_RUN, one_line(f"schema check could not run: {path.name}: {e}"),
                                            m.source, obj=m.ref, hint="run make schemas (the schema file is unreadable)")))
                continue
            obj = as_applied(as_admitted(m))
            if validator.is_valid(obj):
                continue
            found: list[Problem] = []
            for err in validator.iter_errors(obj):
                path_ = list(err.instance_path)
                unexpected = getattr(err.kind, "unexpected", None)
                if err.kind.name == "additionalProperties" and unexpected:
                    found += unknown_field_problems(m, schema, path_, list(unexpected), err.message)
                elif err.kind.name == "required":
                    found += missing_field_problems(m, path_, [str(err.kind.as_dict().get("property"))], err.message)
                else:
                    found.append(Problem(RULE, one_line(err.message), m.source, obj=m.ref, field=dotted(path_) or None))
            problems += [(i, p) for p in _cap(m, found)]
        return _in_order(problems)


# ---------------------------------------------------------------- kubeconform

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
    m = _KC_WRAPPED.search(text)
    return [{"path": m.group(1), "msg": m.group(2)}] if m else []


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
        triaged = [_triage(manifests, self.root) for manifests in units]
        todo = [((u, i), m, path) for u, (_, unit_todo) in enumerate(triaged) for i, m, path in unit_todo]
        per_unit = [list(problems) for problems, _ in triaged]
        if todo:
            for (u, i), p in self._run(todo):
                per_unit[u].append((i, p))
        return [_in_order(found) for found in per_unit]

    def _run(self, todo: list[tuple[tuple[int, int], Manifest, Path]]) -> list[tuple[tuple[int, int], Problem]]:
        problems: list[tuple[tuple[int, int], Problem]] = []
        by_name = {f"{u:05d}-{i:07d}": (key, m, path) for key, m, path in todo for u, i in [key]}
        with tempfile.TemporaryDirectory(prefix="schema-kubeconform-") as tmp:
            folder = Path(tmp)
            for name, (_, m, _) in by_name.items():
                # JSON is YAML; one object per named file (unit, object) maps each result back to its manifest.
                (folder / f"{name}.yaml").write_text(json.dumps(as_applied(as_admitted(m))))
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
            return _cap(m, found)
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


# ---------------------------------------------------------------- choice

def make_validator(prefer: str = "auto") -> Validator:
    """`auto`: kubeconform if installed, else jsonschema-rs; `kubeconform`: kubeconform or ValidatorUnavailable;
    `builtin`: jsonschema-rs. `validator.name` says which one runs."""
    if prefer == "builtin":
        return BuiltinValidator()
    if prefer not in ("auto", "kubeconform"):
        raise ValueError(f"unknown validator {prefer!r}: choose auto, kubeconform or builtin")
    binary = find_kubeconform()
    if binary is None:
        if prefer == "kubeconform":
            raise ValidatorUnavailable("kubeconform not found ($KUBECONFORM, bin/, PATH): run make setup, "
                                       "or choose the builtin validator")
        return BuiltinValidator()
    try:
        return KubeconformValidator(binary)
    except (OSError, subprocess.SubprocessError, ValidatorUnavailable) as e:
        if prefer == "kubeconform":
            raise ValidatorUnavailable(f"kubeconform at {binary} does not run: {e}") from e
        fallback = BuiltinValidator()
        fallback.name += f"; kubeconform at {binary} does not run: {one_line(str(e))}"
        return fallback
