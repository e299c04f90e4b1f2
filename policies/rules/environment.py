"""Environment declarations: the one place that says what the rules need to know about a cluster (node size, GPU
capacity, from how many pods a job needs gang admission, whether images need digests) and which rules it makes
stricter or milder. One `policy.yaml` beside an environment's Kustomize Component; an overlay that uses the
component gets it (see docs/validation.md#environments)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from ..render.files import read_config_text, rel as _rel
from ..render.loader import InputError
from ..kube.objects import ERROR, SEVERITIES, Problem
from ..kube.pod_security import MODES
from ..kube.pod_security_admission import config as pod_security_config
from ..kube.values import DNS1123_SUBDOMAIN
from ..launchers import BY_ID
from ..launchers.kueue import KUEUE_FRAMEWORKS
from ..render.kustomization import inputs, kustomization_file
from .kit import Environment

FILE_NAME = "policy.yaml"
# What a pod may reach of its node beyond its container (SEC008, SEC002): an environment's allowedHostAccess.
HOST_ACCESS = ("hostNetwork", "hostPID", "hostIPC", "hostPath", "privileged")
API_VERSION = "policies.ddp/v1"
KIND = "Environment"
# spec key -> (attribute, type, what it is for)
SPEC_KEYS: dict[str, tuple[str, type, str]] = {
    "gpusPerNode": ("gpus_per_node", int, "GPUs on one node: no pod may ask for more (RES003)"),
    "gpuCapacity": ("gpu_capacity", int, "GPUs the environment can give one overlay at once (RES004)"),
    "largeJobPods": ("large_job_pods", int, "a job with more pods than this is large: it needs gang admission "
                                             "(RES005) and explicit rendezvous timeouts (RDZV003)"),
    "requireImageDigest": ("require_image_digest", bool, "every image pinned by @sha256 digest (IMG002)"),
    "allowedCapabilities": ("allowed_capabilities", list, "Linux capabilities containers may add back (SEC003)"),
    "allowedHostAccess": ("allowed_host_access", list, "host access pods may have: hostNetwork, hostPID, hostIPC, "
                                                       "hostPath, privileged (SEC008, SEC002); [] allows none"),
    "allowedClusterKinds": ("allowed_cluster_kinds", list, "cluster-scoped and RBAC kinds the manifests may hold, "
                                                           "as group/Kind (/Namespace for the core group); [] allows "
                                                           "none (SEC009)"),
    "selfContained": ("self_contained", bool, "every object the manifests reference (ConfigMaps, Secrets, claims, an "
                                              "etcd Service) is in them: REF001 errors on one that is not"),
    "podLosses": ("pod_losses", int, "pod losses every training workload survives (a lost node takes its pod): "
                                      "counted as its controller counts them (RESTART007)"),
    "severity": ("severity", dict, "rule id -> error | warning | info: this environment's severity for the rule"),
    "real": ("real", bool, "a cluster you deploy to, not one of the template's examples: the example repository and "
                           "registry are errors here (ARGO010, IMG004)"),
    "clusterDomain": ("cluster_domain", str, "the cluster's DNS domain (the kubelet's clusterDomain): pod names end in "
                                             ".svc.<it> (TOPO003's endpoint, TOPO011's setHostnameAsFQDN limit); "
                                             "cluster.local is assumed where undeclared"),
    "kueueFrameworks": ("kueue_frameworks", list, "Kueue runs in the cluster with these integrations on (its "
                                                  "Configuration's integrations.frameworks): a workload of one of "
                                                  "them that names a LocalQueue waits for Kueue's admission "
                                                  "(make plan, RES005, ARGO012)"),
    "featureGates": ("feature_gates", dict, "each controller's feature gates as the cluster runs it, by launcher id "
                                            "(jobset: {RestartJob: true}); unlisted gates at their defaults: what a "
                                            "gate that is off refuses is an error (TOPO011)"),
    "podSecurity": ("pod_security", dict, "the cluster's Pod Security admission configuration, as its "
                                          "AdmissionConfiguration's PodSecurityConfiguration says it: defaults "
                                          "(enforce, enforce-version, warn, audit ...) for namespaces without labels "
                                          "and exemptions (namespaces, runtimeClasses, usernames) (SEC010)"),
}


_CACHE: dict[tuple[str, int], tuple[Environment | None, list[Problem]]] = {}


def _line_of(text: str, key: str) -> int:
    """The line where `key:` first appears (1-based); 1 if not found. Declarations are small and flat enough."""
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(f"{key}:"):
            return i
    return 1


def load(path: Path) -> tuple[Environment | None, list[Problem]]:
    """Read one declaration. Every mistake is an `ENV` error naming the file and line; a declaration with
    mistakes is not used (the rules that need it then say they could not run)."""
    path = Path(path)
    try:
        stat_key = (str(path.resolve()), path.stat().st_mtime_ns)
    except OSError:
        stat_key = None
    if stat_key and stat_key in _CACHE:
        return _CACHE[stat_key]
    result = _load(path)
    if stat_key:
        _CACHE[stat_key] = result
    return result


def _load(path: Path) -> tuple[Environment | None, list[Problem]]:
    src = str(path)

    def err(message: str, line: int = 1, hint: str | None = None) -> Problem:
        return Problem("ENV", message, src, hint=hint, severity=ERROR, location=(src, line))

    try:
        text = read_config_text(path)
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except InputError as exc:  # unreadable, or past the loader's bounds
        return None, [err(f"cannot read the environment declaration: {exc}")]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, [err(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", (mark.line + 1) if mark else 1)]
    if not isinstance(doc, dict) or doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        return None, [err(f"not an environment declaration (expected apiVersion {API_VERSION}, kind {KIND})",
                          hint=f"start the file with `apiVersion: {API_VERSION}` and `kind: {KIND}`")]
    name = str((doc.get("metadata") or {}).get("name") or path.parent.name)
    spec = doc.get("spec") or {}
    problems: list[Problem] = []
    if not isinstance(spec, dict):
        return None, [err("spec is not a mapping", _line_of(text, "spec"))]
    env = Environment(name=name, source=src)
    for key, value in spec.items():
        if key not in SPEC_KEYS:
            problems.append(err(f"unknown key spec.{key}", _line_of(text, str(key)),
                                f"use one of {', '.join(SPEC_KEYS)}"))
            continue
        attr, typ, _ = SPEC_KEYS[key]
        if typ is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            problems.append(err(f"spec.{key} is {value!r}, expected a whole number", _line_of(text, key)))
            continue
        if not isinstance(value, typ):
            problems.append(err(f"spec.{key} is {value!r}, expected a {typ.__name__}", _line_of(text, key)))
            continue
        setattr(env, attr, value)
    from . import RULES  # here, not at the top: a rule (ARGO010) reads real_environment

    for rule_id, level in list(env.severity.items()):
        if rule_id not in RULES:
            problems.append(err(f"severity for unknown rule {rule_id}", _line_of(text, str(rule_id)),
                                "name a rule listed in docs/rules.md"))
        elif level not in SEVERITIES:
            problems.append(err(f"severity of {rule_id} is {level!r}, expected one of {', '.join(SEVERITIES)}",
                                _line_of(text, str(rule_id))))
    env.allowed_capabilities = [str(c).upper() for c in env.allowed_capabilities]
    for item in env.allowed_host_access or []:
        if item not in HOST_ACCESS:
            problems.append(err(f"spec.allowedHostAccess lists {item!r}, expected some of {', '.join(HOST_ACCESS)}",
                                _line_of(text, "allowedHostAccess")))
    for item in env.allowed_cluster_kinds or []:
        if not isinstance(item, str) or item.count("/") != 1 or not item.split("/")[1]:
            problems.append(err(f"spec.allowedClusterKinds lists {item!r}, expected group/Kind (/Namespace for the "
                                "core group)", _line_of(text, "allowedClusterKinds")))
    for item in env.kueue_frameworks or []:
        if item not in KUEUE_FRAMEWORKS:
            problems.append(err(f"spec.kueueFrameworks lists {item!r}, which is not a Kueue integration",
                                _line_of(text, "kueueFrameworks"), f"use some of {', '.join(KUEUE_FRAMEWORKS)}"))
    for launcher_id, gates in env.feature_gates.items():
        known = BY_ID[launcher_id].feature_gates if launcher_id in BY_ID else {}
        if not known:
            gated = sorted(i for i, launcher in BY_ID.items() if launcher.feature_gates)
            problems.append(err(f"spec.featureGates names {launcher_id!r}, which has no feature gates modelled here",
                                _line_of(text, str(launcher_id)), f"use one of {', '.join(gated)}"))
        elif not isinstance(gates, dict) or not all(g in known and isinstance(v, bool) for g, v in gates.items()):
            problems.append(err(f"spec.featureGates.{launcher_id} is {gates!r}, expected gate: true|false for gates "
                                f"among {', '.join(known)}", _line_of(text, str(launcher_id))))
    if isinstance(env.pod_security, dict):
        parsed, why = pod_security_config(env.pod_security)
        problems += [err(w, _line_of(text, "podSecurity")) for w in why]
        env.pod_security = parsed
    domain = env.cluster_domain
    if domain is not None and (len(domain) > 253 or not DNS1123_SUBDOMAIN.fullmatch(domain)):
        problems.append(err(f"spec.clusterDomain is {domain!r}, expected a DNS-1123 subdomain (at most 253 lowercase "
                            "letters, digits, '-' and '.', a letter or digit at both ends of each label, e.g. "
                            "cluster.local)", _line_of(text, "clusterDomain")))
    return (None if problems else env), problems


# The rules an operator's policy governs in the Argo CD plugin: a repository's own declaration cannot lower them.
OPERATOR_RULES = ("SEC002", "SEC008", "SEC009")


def tightened(own: Environment | None, operator: Environment) -> Environment:
    """The environment a repository's overlay is checked in under an operator's policy (the Argo CD plugin): what
    the operator allows, narrowed by what the repository allows where it declares it; never wider. The operator's
    rules stay errors whatever the repository's severity says."""
    def narrowed(theirs: list[str] | None, ours: list[str] | None) -> list[str]:
        base = list(theirs or [])
        return base if ours is None else [x for x in base if x in ours]

    env = copy.copy(own) if own is not None else Environment(name=f"{operator.name} (operator)",
                                                             source=operator.source)
    env.operator = operator.name
    env.allowed_host_access = narrowed(operator.allowed_host_access, own.allowed_host_access if own else None)
    env.allowed_cluster_kinds = narrowed(operator.allowed_cluster_kinds, own.allowed_cluster_kinds if own else None)
    env.allowed_capabilities = narrowed(operator.allowed_capabilities, own.allowed_capabilities if own else None)
    env.severity = {**(own.severity if own else {}), **{r: ERROR for r in OPERATOR_RULES}}
    env.self_contained = bool(operator.self_contained or (own and own.self_contained))
    env.require_image_digest = bool(operator.require_image_digest or (own and own.require_image_digest))
    # The operator runs the cluster: its domain, where it declares one, is the one pod names end in.
    env.cluster_domain = operator.cluster_domain or (own.cluster_domain if own else None)
    env.feature_gates = {**(own.feature_gates if own else {}), **operator.feature_gates}
    # The operator's AdmissionConfiguration is the cluster's; a repository's own says what it believes it to be.
    env.pod_security = operator.pod_security or (own.pod_security if own else None)
    env.kueue_frameworks = operator.kueue_frameworks if operator.kueue_frameworks is not None else (
        own.kueue_frameworks if own else None)
    return env


def declarations_for(folder: Path) -> list[Path]:
    """The `policy.yaml` files beside the kustomizations an overlay reads (its own, its bases', its components')."""
    _, files = inputs(folder)
    seen: list[Path] = []
    for f in files:
        d = f.parent
        if kustomization_file(d) == f and (d / FILE_NAME).is_file() and d / FILE_NAME not in seen:
            seen.append(d / FILE_NAME)
    return seen


def for_overlay(folder: Path) -> tuple[Environment | None, list[Problem]]:
    """The environment of an overlay: the one declaration among the folders it reads. None without one; an `ENV`
    error when there are several (one environment, one declared place)."""
    found = declarations_for(folder)
    if not found:
        return None, []
    if len(found) > 1:
        names = ", ".join(_rel(p) for p in found)
        return None, [Problem("ENV", f"several environment declarations apply: {names}", str(folder),
                              hint="keep one policy.yaml per environment, in its component", severity=ERROR)]
    return load(found[0])


def kueue_frameworks(folder: Path) -> list[str] | None:
    """The Kueue integrations the environment of a rendered folder declares on (`kueueFrameworks`); None where it
    declares none, or its declaration cannot be read (an `ENV` problem make validate reports on the overlay)."""
    env, problems = for_overlay(folder)
    return env.kueue_frameworks if env is not None and not problems else None


def describe(env: Environment) -> dict[str, Any]:
    return {"name": env.name, "source": _rel(Path(env.source)), "gpusPerNode": env.gpus_per_node,
            "gpuCapacity": env.gpu_capacity, "largeJobPods": env.large_job_pods,
            "requireImageDigest": env.require_image_digest, "podLosses": env.pod_losses,
            "severity": dict(env.severity), "real": env.real,
            "clusterDomain": env.cluster_domain, "kueueFrameworks": env.kueue_frameworks,
            "featureGates": env.feature_gates, "podSecurity": _pod_security(env)}


def _pod_security(env: Environment) -> dict[str, Any] | None:
    """The declared Pod Security configuration as the declaration's keys say it (make plan's JSON)."""
    cfg = env.pod_security
    if cfg is None:
        return None
    d = cfg.defaults
    return {"defaults": {mode: str(getattr(d, mode).level) for mode in MODES}
            | {f"{mode}-version": str(getattr(d, mode).version) for mode in MODES},
            "exemptions": {"usernames": list(cfg.usernames), "namespaces": list(cfg.namespaces),
                           "runtimeClasses": list(cfg.runtime_classes)}}


def real_environment(folder: Path) -> str | None:
    """The name of the environment an overlay folder belongs to where its declaration (the `policy.yaml` beside a
    kustomization it reads) says `real: true`; None otherwise (an example environment, none, or one the loader
    refuses: validation says why). Read by for_overlay, as validation reads it."""
    folder = Path(folder)
    if not folder.is_dir() or kustomization_file(folder) is None:
        return None
    env, _ = for_overlay(folder)
    return env.name if env is not None and env.real else None
