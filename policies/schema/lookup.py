"""Which committed schema checks an object (kubeconform's order: built-in kinds, then CRDs), and the problems of
objects no schema can be chosen for (SCHEMA-INPUT, SCHEMA-MISSING); the rule ids and limits every validator shares."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..kube.values import KUSTOMIZE_GROUP, KUSTOMIZE_READS, configuration, group_of
from ..kube.objects import WARNING, Manifest, Problem
from ..render.paths import DATA

RULE = "SCHEMA"
RULE_MISSING = "SCHEMA-MISSING"
RULE_INPUT = "SCHEMA-INPUT"
RULE_NOT_RUN = "SCHEMA-NOT-RUN"

SCHEMAS_DIR = DATA / "schemas"  # the checkout's schemas/, or the copy an installed package ships (policies/render/paths.py)
MAX_ERRORS_PER_OBJECT = 20
MAX_MESSAGE = 240

_API_VERSION = re.compile(r"^(?:(?P<group>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)/)?(?P<version>v[0-9]+[a-z0-9]*)$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


@lru_cache(maxsize=None)
def _versions(root: Path) -> dict[str, Any]:
    versions: dict[str, Any] = json.loads((root / "versions.json").read_text())
    return versions


def kubernetes_version(root: Path | None = None) -> str:
    """The pinned Kubernetes version the schemas were generated for, as kubeconform takes it (`1.36.0`)."""
    return str(_versions(root or SCHEMAS_DIR)["kubernetes"]["version"]).lstrip("v")


# A CRD's kind is a DNS-1035 label once lowercased (apiextensions validation ValidateCustomResourceDefinitionNames), at
# most 63 characters; built-in kinds are shorter.
MAX_KIND = 63


@lru_cache(maxsize=None)
def find_schema(api_version: str, kind: str, root: Path | None = None) -> Path | None:
    """The committed schema file for apiVersion/kind, looked up in kubeconform's order: built-in kinds, then CRDs."""
    m = _API_VERSION.match(api_version or "")
    if not m or not _KIND.match(kind or ""):
        return None  # also keeps `../` and the like out of the path
    if len(kind) > MAX_KIND:
        return None  # no kind is served (and no file name this long can be opened: ENAMETOOLONG)
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


@lru_cache(maxsize=None)
@lru_cache(maxsize=128)
def load_schema(path: Path) -> dict[str, Any]:
    """A committed schema file, read once per process (the validators, the defaulting and the CRD rules share it: no
    caller changes it)."""
    schema: dict[str, Any] = json.loads(path.read_bytes())
    return schema


def served_versions(group: str, kind: str, root: Path | None = None) -> list[str]:
    """The versions the pinned CRD of group/kind serves: the schema files `make schemas` wrote for it."""
    folder = (root or SCHEMAS_DIR) / "crds" / group
    prefix = f"{kind.lower()}_"
    if not _KIND.match(kind or "") or not folder.is_dir():
        return []
    return sorted(p.stem[len(prefix):] for p in folder.glob(f"{prefix}*.json"))


def builtin_group(group: str, root: Path | None = None) -> bool:
    """Whether Kubernetes itself serves the API group: a group without a dot (a CRD's group has one:
    apiextensions-apiserver v0.36.0 pkg/apis/apiextensions/validation/validation.go 361, "should be a domain with at
    least one dot"), or a group of a kind the pinned version serves (schemas/versions.json). Other groups, *.k8s.io
    ones too (gateway.networking.k8s.io, snapshot.storage.k8s.io, autoscaling.k8s.io), are add-ons a cluster may
    serve from CRDs or an aggregated API server."""
    return "." not in group or group in _builtin_groups(root or SCHEMAS_DIR)


@lru_cache(maxsize=None)
def _builtin_groups(root: Path) -> frozenset[str]:
    return frozenset(group_of(str(k["apiVersion"])) for k in _versions(root)["kubernetes"]["kinds"])


def triage(manifests: list[Manifest], root: Path) -> tuple[list[tuple[int, Problem]], list[tuple[int, Manifest, Path]]]:
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
        if missing or not isinstance(api, str) or not isinstance(kind, str):  # (the same test, said to mypy)
            problems.append((i, Problem(RULE_INPUT, f"object has no {' and no '.join(missing)}", m.source, obj=m.ref,
                                        hint="every Kubernetes object needs a string apiVersion and kind")))
            continue
        configures = configuration(obj)
        if configures is not None:
            # Read from disk by its tool (kube/values.py CONFIGURATION_GROUPS), never served: beside Kubernetes
            # objects, `kubectl apply -f` sends it to the API server, which has no such kind. kustomize reads its
            # own only from a file of these names (KUSTOMIZE_READS); a kustomization file named on the command line
            # is its folder.
            kustomize = group_of(api) == KUSTOMIZE_GROUP
            where = f"{configures}, read only from a file named {KUSTOMIZE_READS}" if kustomize else configures
            problems.append((i, Problem(RULE_INPUT, f"a {kind} is {where}: the API server serves no such kind",
                                        m.source, obj=m.ref, field="kind",
                                        hint="name the file kustomization.yaml and validate its folder (kustomize "
                                             "builds folders)" if kustomize else
                                             "keep it in a file of its own, apart from the manifests")))
            continue
        if not m.created_name:
            # Every object's metadata is validated before it is stored (apimachinery v0.36.0
            # pkg/api/validation/objectmeta.go 193-195); the API server refuses one with no name to give it.
            problems.append((i, Problem(RULE, "the object has neither a name nor a generateName: the API server "
                                        "refuses it (name or generateName is required)", m.source, obj=m.ref, field="metadata.name",
                                        hint="give the object metadata.name (or metadata.generateName, for "
                                             "kubectl create)")))
        path = find_schema(api, kind, root)
        if path is None:
            group = group_of(api)
            if not _API_VERSION.match(api):
                hint = "apiVersion is `<group>/<version>` or `<version>` (e.g. `batch/v1`, `v1`)"
            elif builtin_group(group, root):
                hint = (f"Kubernetes v{kubernetes_version(root)} serves no {api} {kind} (schemas/SOURCES.md lists every "
                        "kind it serves): correct apiVersion/kind, or, for a custom resource, copy its upstream CRD "
                        f"into crds/{group}/ (its row and sha256 in crds/SOURCES.md) and run make schemas")
            elif served := served_versions(group, kind, root):
                # The pinned CRD of this kind serves other versions only (scripts/gen_schemas.py writes a schema for
                # every served version): a cluster that runs it has no such resource ("no matches for kind"). Another
                # controller release may serve it (the corpus's kubeflow.org/v1beta2 PyTorchJob ran on the training
                # operator's predecessor), which the manifest does not show: a warning phrased as that condition.
                problems.append((i, Problem(RULE_MISSING, f"{kind} of {group} is served as {', '.join(served)} by the "
                                            f"CRD pinned in crds/, not {api.split('/', 1)[-1]}: a cluster that runs "
                                            f"that CRD refuses it (no matches for kind \"{kind}\" in version "
                                            f"\"{api}\"); its schema was not checked", m.source, obj=m.ref,
                                            field="apiVersion", severity=WARNING,
                                            hint=f"use apiVersion {group}/{served[-1]}, or, where your cluster serves "
                                                 f"{api}, copy that CRD into crds/ and run make schemas")))
                continue
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
