#!/usr/bin/env python3
"""Generate schemas/: strict, standalone JSON schemas for every pinned Kubernetes kind and every CRD in crds/.

`make schemas` runs this; `--check` regenerates into a temp dir and exits 1 if the committed schemas/ differs.

Exit codes: 0 done (or identical), 1 --check found differences, 2 bad input (a CRD without provenance, a checksum
that does not match), 3 the pinned Kubernetes schema wheel could not be obtained (nothing was written).
"""
from __future__ import annotations

import argparse
import copy
import filecmp
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Callable

import yaml

GENERATOR = "scripts/gen_schemas.py"
# Bump when a change here changes the output, so versions.json says which rules produced the committed files.
GENERATOR_VERSION = "1.1.0"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

K8S_VERSION = "v1.36.0"
WHEEL_REQUIREMENT = "kubernetes-validate==1.37.0"
WHEEL_FILE = "kubernetes_validate-1.37.0-py3-none-any.whl"
# Observed on PyPI when this pin was made; a different file under the same name is refused.
WHEEL_SHA256 = "85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9"
WHEEL_SCHEMA_DIR = f"kubernetes_validate/kubernetes-json-schema/{K8S_VERSION}-local-strict/"
WHEEL_DEFS_REF = "/api/_definitions.json#/$defs/"

# The built-in kinds are not listed by hand: every definition of the pinned OpenAPI document (the wheel's
# _definitions.json) that names one group/version/kind and has ObjectMeta metadata is an object someone can write
# (see builtin_kinds). These must be among them, or the wheel is not the one this repository was made for.
REQUIRED_KINDS: list[tuple[str, str, str]] = [
    ("", "v1", "ConfigMap"), ("", "v1", "Pod"), ("", "v1", "ReplicationController"), ("", "v1", "Service"),
    ("apps", "v1", "StatefulSet"), ("autoscaling", "v1", "HorizontalPodAutoscaler"),
    ("autoscaling", "v2", "HorizontalPodAutoscaler"), ("batch", "v1", "Job"), ("networking.k8s.io", "v1", "NetworkPolicy"),
]

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "schemas"
DEFAULT_CRDS = REPO / "crds"
K8S_SUBDIR = f"kubernetes/{K8S_VERSION}-standalone-strict"

EXIT_DIFF, EXIT_INPUT, EXIT_NO_WHEEL = 1, 2, 3


class InputError(Exception):
    """The inputs are not what the pins and crds/SOURCES.md say."""


class WheelUnavailable(Exception):
    """The pinned wheel could not be downloaded (no network, no index)."""


# ---------------------------------------------------------------- naming (kubeconform's templates)

def api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def k8s_filename(group: str, version: str, kind: str) -> str:
    """`{{.ResourceKind}}{{.KindSuffix}}.json`: kind lowercased, then `-<first label of the group>` if any, `-<version>`."""
    suffix = f"-{group.split('.')[0].lower()}" if group else ""
    return f"{kind.lower()}{suffix}-{version.lower()}.json"


def crd_filename(group: str, version: str, kind: str) -> str:
    """`{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json` (the CRDs-catalog layout)."""
    return f"crds/{group}/{kind.lower()}_{version}.json"


# ---------------------------------------------------------------- schema walking

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = ("additionalProperties", "items", "not", "contains", "propertyNames", "additionalItems",
               "if", "then", "else", "unevaluatedProperties", "unevaluatedItems")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


def map_schema(node: Any, fn: Callable[[dict[str, Any]], Any]) -> Any:
    """Apply fn bottom-up to every schema object, following only keywords that hold subschemas.

    Walking by keyword (not by key name) keeps property *names* such as `description` or `properties`, and values
    such as `default` and `enum`, untouched.
    """
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: map_schema(sub, fn) for name, sub in value.items()}
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            out[key] = map_schema(value, fn)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [map_schema(sub, fn) for sub in value]
        else:
            out[key] = value
    return fn(out)


def drop_descriptions(node: dict[str, Any]) -> dict[str, Any]:
    # Descriptions are two thirds of the bytes and play no part in validation.
    if isinstance(node.get("description"), str):
        node.pop("description")
    return node


def collect_refs(node: Any, prefix: str, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(prefix):
            out.add(ref[len(prefix):])
        for value in node.values():
            collect_refs(value, prefix, out)
    elif isinstance(node, list):
        for value in node:
            collect_refs(value, prefix, out)


def closure(roots: set[str], defs: dict[str, Any]) -> set[str]:
    """Every definition reachable from roots (recursive definitions terminate through `seen`)."""
    seen: set[str] = set()
    todo = sorted(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in defs:
            raise InputError(f"definition {name} is referenced but missing from _definitions.json")
        seen.add(name)
        found: set[str] = set()
        collect_refs(defs[name], "#/$defs/", found)
        todo.extend(sorted(found - seen))
    return seen


def rewrite_refs(node: Any, old: str, new: str) -> Any:
    if isinstance(node, dict):
        return {k: (new + v[len(old):] if k == "$ref" and isinstance(v, str) and v.startswith(old)
                    else rewrite_refs(v, old, new)) for k, v in node.items()}
    if isinstance(node, list):
        return [rewrite_refs(v, old, new) for v in node]
    return node


def dump(obj: Any) -> bytes:
    """Stable bytes: sorted keys, one-space indent (diffable, half the size of indent=2), ASCII, trailing newline."""
    return (json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------- Kubernetes built-in kinds

def obtain_wheel(wheel: Path | None, tmp: Path) -> Path:
    if wheel is None:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", WHEEL_REQUIREMENT, "-d", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheel = tmp / WHEEL_FILE
        if proc.returncode != 0 or not wheel.is_file():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise WheelUnavailable(f"`pip download {WHEEL_REQUIREMENT}` failed: {last}")
    if not wheel.is_file():
        raise WheelUnavailable(f"{wheel}: no such file")
    got = sha256_file(wheel)
    if got != WHEEL_SHA256:
        raise InputError(f"{wheel}: sha256 {got}, pinned {WHEEL_SHA256}; refusing a different {WHEEL_FILE}")
    return wheel


def k8s_defs_from_wheel(wheel: Path) -> tuple[dict[str, Any], Callable[[str], dict[str, Any]]]:
    zf = zipfile.ZipFile(wheel)
    defs = json.loads(zf.read(WHEEL_SCHEMA_DIR + "_definitions.json"))["$defs"]

    def kind_schema(filename: str) -> dict[str, Any]:
        try:
            return json.loads(zf.read(WHEEL_SCHEMA_DIR + filename))
        except KeyError:
            raise InputError(f"{filename} is not in {WHEEL_FILE} ({WHEEL_SCHEMA_DIR})") from None

    return defs, kind_schema


def standalone(root: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """root plus only the definitions it reaches, every ref local (`#/$defs/...`), descriptions dropped."""
    root = rewrite_refs(root, WHEEL_DEFS_REF, "#/$defs/")
    names: set[str] = set()
    collect_refs(root, "#/$defs/", names)
    out = {k: v for k, v in root.items() if k not in ("$id", "$defs")}
    out["$schema"] = DIALECT
    out["$defs"] = {n: defs[n] for n in sorted(closure(names, defs))}
    return map_schema(out, drop_descriptions)


def builtin_kinds(defs: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    """(group, version, Kind) of every object kind in the OpenAPI definitions -> its file in the wheel, sorted.

    A definition is an object kind when it carries exactly one `x-kubernetes-group-version-kind` and its `metadata`
    is ObjectMeta: that leaves out lists (ListMeta), Status, and DeleteOptions/WatchEvent (which name every group).
    Alpha and beta versions are included: the pinned version serves them when their API is enabled.
    The wheel names its files after the definition's Go package (`io.k8s.api.apiserverinternal.v1alpha1.StorageVersion`:
    `storageversion-apiserverinternal-v1alpha1.json`, core: `pod-v1.json`), not after the API group as kubeconform does.
    """
    found: dict[tuple[str, str, str], str] = {}
    for name, definition in defs.items():
        gvks = definition.get("x-kubernetes-group-version-kind") or []
        meta = (definition.get("properties") or {}).get("metadata") or {}
        if len(gvks) != 1 or not str(meta.get("$ref", "")).endswith("/" + OBJECT_META):
            continue
        gvk = (gvks[0]["group"], gvks[0]["version"], gvks[0]["kind"])
        package = name.split(".")[-3]
        found[gvk] = f"{gvk[2].lower()}{'' if package == 'core' else '-' + package}-{gvk[1]}.json"
    missing = [api_version(g, v) + " " + k for g, v, k in REQUIRED_KINDS if (g, v, k) not in found]
    if missing:
        raise InputError(f"the OpenAPI definitions in {WHEEL_FILE} lack {', '.join(missing)}")
    return dict(sorted(found.items()))


def build_k8s(defs: dict[str, Any], kind_schema: Callable[[str], dict[str, Any]],
              kinds: dict[tuple[str, str, str], str]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for (group, version, kind), source in kinds.items():
        name = k8s_filename(group, version, kind)
        if f"{K8S_SUBDIR}/{name}" in files:
            raise InputError(f"two kinds map to {name}")
        schema = kind_schema(source)
        gvks = schema.get("x-kubernetes-group-version-kind") or []
        if {"group": group, "version": version, "kind": kind} not in gvks:
            raise InputError(f"{source} in the wheel describes {gvks}, not {api_version(group, version)} {kind}")
        files[f"{K8S_SUBDIR}/{name}"] = dump(standalone(schema, defs))
    return files


def object_meta_defs_from_wheel(defs: dict[str, Any]) -> dict[str, Any]:
    return {n: map_schema(defs[n], drop_descriptions) for n in sorted(closure({OBJECT_META}, defs))}


def kinds_from_committed(out_dir: Path) -> list[tuple[str, str, str]]:
    """Without the wheel, the built-in kinds as the committed versions.json lists them (for SOURCES.md)."""
    path = out_dir / "versions.json"
    if not path.is_file():
        raise WheelUnavailable(f"the built-in kinds come from {path}, which is missing: run make schemas")
    out = []
    for k in json.loads(path.read_text())["kubernetes"]["kinds"]:
        group, _, version = k["apiVersion"].rpartition("/")
        out.append((group, version, k["kind"]))
    return out


def object_meta_defs_from_committed(out_dir: Path) -> dict[str, Any]:
    """Without the wheel, take ObjectMeta from the committed Namespace schema (which --check verifies when it can)."""
    path = out_dir / K8S_SUBDIR / k8s_filename("", "v1", "Namespace")
    if not path.is_file():
        raise WheelUnavailable(f"ObjectMeta for custom resources comes from {path} (the committed Namespace schema), "
                               "which is missing: run make schemas")
    defs = json.loads(path.read_text())["$defs"]
    return {n: defs[n] for n in sorted(closure({OBJECT_META}, defs))}


# ---------------------------------------------------------------- CRDs (kubeconform's openapi2jsonschema, strict)

def crd_node(node: dict[str, Any]) -> dict[str, Any]:
    """One schema object of a CRD's openAPIV3Schema, converted like kubeconform's openapi2jsonschema.py, plus:

    - `additionalProperties: false` is not added where `x-kubernetes-preserve-unknown-fields: true` (the API server
      keeps unknown fields there) and is added at the root too (openapi2jsonschema's DENY_ROOT_ADDITIONAL_PROPERTIES);
    - `nullable: true` becomes a `null` member of `type` (OpenAPI 3.0 has no null type);
    - `x-kubernetes-int-or-string` without a type gets the integer-or-string constraint the API server applies;
    - `x-kubernetes-embedded-resource` objects get the apiVersion/kind/metadata fields the API server allows.
    """
    drop_descriptions(node)
    if node.get("format") == "int-or-string":
        return {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    if node.pop("nullable", False) is True:
        if isinstance(node.get("type"), str):
            node["type"] = [node["type"], "null"]
        if isinstance(node.get("enum"), list) and None not in node["enum"]:
            node["enum"] = node["enum"] + [None]
    if node.get("x-kubernetes-int-or-string") is True and not any(k in node for k in ("type", "anyOf", "oneOf")):
        node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-embedded-resource") is True and "properties" in node:
        props = node["properties"]
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props.setdefault("metadata", {"type": "object"})
    if ("properties" in node and "additionalProperties" not in node
            and node.get("x-kubernetes-preserve-unknown-fields") is not True):
        node["additionalProperties"] = False
    return node


def convert_crd_version(group: str, kind: str, version: str, openapi: dict[str, Any],
                        object_meta: dict[str, Any]) -> dict[str, Any]:
    schema = map_schema(copy.deepcopy(openapi), crd_node)
    props = schema.setdefault("properties", {})
    meta = props.get("metadata") or {}
    # A CRD can only say `metadata: {type: object}` (the API server validates ObjectMeta itself), so check the real
    # ObjectMeta; keep any extra constraints the CRD adds (e.g. a name length) beside the ref.
    new_meta: dict[str, Any] = {"$ref": f"#/$defs/{OBJECT_META}"}
    if isinstance(meta.get("properties"), dict):
        new_meta["properties"] = meta["properties"]
    props["metadata"] = new_meta
    props["apiVersion"] = {"type": "string", "enum": [f"{group}/{version}"]}
    props["kind"] = {"type": "string", "enum": [kind]}
    if schema.get("x-kubernetes-preserve-unknown-fields") is not True:
        schema["additionalProperties"] = False
    schema["$schema"] = DIALECT
    schema["$defs"] = object_meta
    schema["x-kubernetes-group-version-kind"] = [{"group": group, "kind": kind, "version": version}]
    return schema


def crds_dir_default() -> Path:
    env = os.environ.get("CRDS_DIR")
    return Path(env) if env else DEFAULT_CRDS


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader reads the 6 MB of CRDs 10x faster
_COMMIT = re.compile(r"^[0-9a-f]{7,40}")


def read_provenance(crds_dir: Path) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Rows of the table and the sha256 list in crds/SOURCES.md, keyed by the file's path there."""
    text = (crds_dir / "SOURCES.md").read_text()
    rows: dict[str, dict[str, str]] = {}
    full_commits: list[str] = []
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5:
            continue
        local = cells[0].split("`")[1]
        commit_m = _COMMIT.match(cells[4])
        commit = commit_m.group(0) if commit_m else ""
        if len(commit) == 40:
            full_commits.append(commit)
        rows[local] = {"repo": cells[1].split()[0], "path": cells[2].strip("`"), "tag": cells[3].split()[0],
                       "commit": commit}
    for row in rows.values():  # rows that say "658725bd… (as above)" point at a full commit given earlier
        if len(row["commit"]) < 40:
            matches = {c for c in full_commits if row["commit"] and c.startswith(row["commit"])}
            row["commit"] = matches.pop() if len(matches) == 1 else row["commit"]
    sums: dict[str, str] = {}
    for m in re.finditer(r"^([0-9a-f]{64})\s+\./(\S+)$", text, re.M):
        sums[m.group(2)] = m.group(1)
    return rows, sums


def build_crds(crds_dir: Path, object_meta: dict[str, Any]) -> tuple[dict[str, bytes], list[dict[str, Any]]]:
    if not (crds_dir / "SOURCES.md").is_file():
        raise InputError(f"{crds_dir}/SOURCES.md not found (set CRDS_DIR to the folder of CRDs)")
    rows, sums = read_provenance(crds_dir)
    files: dict[str, bytes] = {}
    records: list[dict[str, Any]] = []
    inputs = sorted(p for p in crds_dir.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    for path in inputs:
        rel = path.relative_to(crds_dir).as_posix()
        try:
            docs = [d for d in yaml.load_all(path.read_text(), Loader=_YAML_LOADER) if isinstance(d, dict)]
        except yaml.YAMLError as e:
            raise InputError(f"{crds_dir}/{rel}: not YAML: {e}") from None
        crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
        if not crds:
            continue
        digest = sha256_file(path)
        if rel not in rows:
            raise InputError(f"{crds_dir}/{rel} has no row in {crds_dir}/SOURCES.md: add its upstream repo, tag and commit")
        if sums.get(rel) not in (None, digest):
            raise InputError(f"{crds_dir}/{rel}: sha256 {digest}, SOURCES.md lists {sums[rel]}; update SOURCES.md")
        for crd in crds:
            try:
                spec = crd["spec"]
                group, kind = spec["group"], spec["names"]["kind"]
            except (KeyError, TypeError):
                raise InputError(f"{crds_dir}/{rel}: a CustomResourceDefinition without spec.group/names.kind") from None
            versions = []
            for v in spec.get("versions") or []:
                openapi = (v.get("schema") or {}).get("openAPIV3Schema")
                if not v.get("served") or not isinstance(openapi, dict):
                    continue  # an unserved version cannot be applied; one without a schema cannot be checked
                out = crd_filename(group, v["name"], kind)
                if out in files:
                    raise InputError(f"two CRDs define {group}/{v['name']} {kind}")
                files[out] = dump(convert_crd_version(group, kind, v["name"], openapi, object_meta))
                versions.append({"name": v["name"], "file": out, "storage": bool(v.get("storage")),
                                 "deprecated": bool(v.get("deprecated"))})
            records.append({"input": rel, "sha256": digest, "group": group, "kind": kind,
                            "crd": crd.get("metadata", {}).get("name", ""), "versions": versions, **{
                                k: rows[rel][k] for k in ("repo", "path", "tag", "commit")}})
    return files, records


# ---------------------------------------------------------------- provenance files

def build_sources(crd_records: list[dict[str, Any]], builtin: list[tuple[str, str, str]]) -> dict[str, bytes]:
    kinds = [{"apiVersion": api_version(g, v), "kind": k, "file": f"{K8S_SUBDIR}/{k8s_filename(g, v, k)}"}
             for g, v, k in builtin]
    versions = {
        "generator": {"script": GENERATOR, "version": GENERATOR_VERSION},
        "jsonSchemaDialect": DIALECT,
        "kubernetes": {"version": K8S_VERSION, "source": {"requirement": WHEEL_REQUIREMENT, "file": WHEEL_FILE,
                                                          "sha256": WHEEL_SHA256, "path": WHEEL_SCHEMA_DIR},
                       "kinds": kinds},
        "crds": crd_records,
    }
    lines = [
        "# Schema sources",
        "",
        f"Generated by `{GENERATOR}` {GENERATOR_VERSION} (`make schemas`); do not edit. "
        "The same facts, machine-readable, are in `versions.json`. How and why: `docs/schemas.md`.",
        "",
        "## Kubernetes built-in kinds",
        "",
        f"- Kubernetes **{K8S_VERSION}**, strict (unknown fields are errors): all {len(kinds)} object kinds of its "
        "OpenAPI definitions, every group and version (alpha and beta included).",
        f"- Source: PyPI wheel `{WHEEL_FILE}` (`pip download --no-deps {WHEEL_REQUIREMENT}`), "
        f"sha256 `{WHEEL_SHA256}`, folder `{WHEEL_SCHEMA_DIR}` (openapi2jsonschema output, JSON Schema 2020-12).",
        "- Each file: the kind's schema plus only the definitions it reaches (`$defs`, refs local), descriptions dropped.",
        "",
        "| apiVersion | kind | file |",
        "|---|---|---|",
        *[f"| `{k['apiVersion']}` | {k['kind']} | `{k['file']}` |" for k in kinds],
        "",
        "## Custom resources",
        "",
        "Every served version of every CRD in `crds/`, converted as kubeconform's `openapi2jsonschema.py` does "
        "in strict mode (see `docs/schemas.md` for the differences); `metadata` checked against Kubernetes ObjectMeta.",
        "",
        "| kind | apiVersion | file | input (crds/) | input sha256 | upstream | tag | commit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in crd_records:
        for v in r["versions"]:
            note = " (deprecated)" if v["deprecated"] else ""
            lines.append(f"| {r['kind']} | `{r['group']}/{v['name']}`{note} | `{v['file']}` | `{r['input']}` | "
                         f"`{r['sha256']}` | {r['repo']} `{r['path']}` | {r['tag']} | `{r['commit']}` |")
    return {"versions.json": dump(versions), "SOURCES.md": ("\n".join(lines) + "\n").encode()}


# ---------------------------------------------------------------- output

def write_tree(files: dict[str, bytes], root: Path) -> None:
    for rel, data in sorted(files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def swap_in(tmp: Path, out_dir: Path) -> None:
    """Replace out_dir by tmp with renames on one filesystem, so a reader never sees a half-written tree."""
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        os.rename(out_dir, old / out_dir.name)
    os.rename(tmp, out_dir)
    if old:
        shutil.rmtree(old)


def list_files(root: Path, parts: tuple[str, ...]) -> set[str]:
    found: set[str] = set()
    for part in parts:
        base = root / part
        if base.is_file():
            found.add(part)
        elif base.is_dir():
            found.update(p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file())
    return found


def compare(expected: Path, actual: Path, parts: tuple[str, ...]) -> list[str]:
    want, have = list_files(expected, parts), list_files(actual, parts)
    diffs = [f"{p}: missing" for p in sorted(want - have)] + [f"{p}: not generated (stale)" for p in sorted(have - want)]
    diffs += [f"{p}: differs" for p in sorted(want & have) if not filecmp.cmp(expected / p, actual / p, shallow=False)]
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="regenerate into a temp dir; exit 1 if schemas/ differs")
    ap.add_argument("--only", choices=("all", "kubernetes", "crds"), default="all",
                    help="with --check: which part to compare (crds needs no download)")
    ap.add_argument("--wheel", type=Path, help=f"use this {WHEEL_FILE} instead of downloading it")
    ap.add_argument("--crds-dir", type=Path, default=None, help="CRD folder (default: $CRDS_DIR, else crds/)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: schemas/)")
    args = ap.parse_args(argv)
    crds_dir = (args.crds_dir or crds_dir_default()).resolve()
    out_dir = args.out.resolve()
    if args.only != "all" and not args.check:
        ap.error("--only needs --check: generation always writes the whole tree")

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it 0700; it becomes schemas/
    try:
        files: dict[str, bytes] = {}
        skipped = None
        want_k8s = args.only in ("all", "kubernetes")
        if want_k8s:
            try:
                with tempfile.TemporaryDirectory() as dl:
                    defs, kind_schema = k8s_defs_from_wheel(obtain_wheel(args.wheel, Path(dl)))
                    kinds = builtin_kinds(defs)
                    files.update(build_k8s(defs, kind_schema, kinds))
                    kinds = list(kinds)
                object_meta = object_meta_defs_from_wheel(defs)
            except WheelUnavailable as e:
                if not args.check or args.only == "kubernetes":
                    print(f"error: {e}; nothing written (pass --wheel PATH to use a downloaded copy)", file=sys.stderr)
                    return EXIT_NO_WHEEL
                skipped = str(e)
                object_meta = object_meta_defs_from_committed(out_dir)
                kinds = kinds_from_committed(out_dir)
        else:
            # --check --only crds: no download; ObjectMeta and the kind list as committed (the kubernetes check covers
            # those files).
            object_meta = object_meta_defs_from_committed(out_dir)
            kinds = kinds_from_committed(out_dir)
        if args.only in ("all", "crds"):
            crd_files, records = build_crds(crds_dir, object_meta)
            files.update(crd_files)
            files.update(build_sources(records, kinds))
        write_tree(files, tmp)

        if not args.check:
            swap_in(tmp, out_dir)
            total = sum(len(b) for b in files.values())
            print(f"wrote {len(files)} files, {total / 1e6:.2f} MB, to {out_dir}")
            return 0

        parts: tuple[str, ...] = ()
        if args.only == "all" and skipped is None:
            parts = ("",)  # the whole tree: `make schemas` replaces all of schemas/, so any other file is stale
        if args.only == "kubernetes" or (args.only == "all" and skipped):
            parts += ("kubernetes",) if skipped is None else ()
        if args.only == "crds" or (args.only == "all" and skipped):
            parts += ("crds", "SOURCES.md", "versions.json")
        diffs = compare(tmp, out_dir, parts)
        for d in diffs:
            print(f"{out_dir.name}/{d}", file=sys.stderr)
        if diffs:
            print(f"{len(diffs)} schema files out of date: run `make schemas` and commit schemas/", file=sys.stderr)
            return EXIT_DIFF
        print(f"schemas up to date ({', '.join(p or 'all of ' + out_dir.name for p in parts)})")
        if skipped:
            print(f"kubernetes part NOT checked: {skipped}", file=sys.stderr)
            return EXIT_NO_WHEEL
        return 0
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except WheelUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_NO_WHEEL
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
