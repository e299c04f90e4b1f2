"""Which Pod Security level a pod is held to, and by whom: the namespace's labels over the cluster's defaults, and the
cluster's exemptions (k8s.io/pod-security-admission v0.36.0, the `admission/` package; the levels and checks
themselves are `pod_security.py`, its `api/` and `policy/` packages).

The API server's PodSecurity admission plugin reads its defaults and exemptions from the cluster's
AdmissionConfiguration (a `PodSecurityConfiguration`, `admission/api/v1/types.go`); without one every default is
`privileged` at `latest` (`admission/api/v1/defaults.go` SetDefaults_PodSecurityDefaults) and nothing is exempt. An
environment declares its cluster's in `policy.yaml` (`spec.podSecurity`, the same keys), read by `config`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .objects import Manifest
from .pod_security import (DEFAULT_POLICY, LABEL_PREFIX, MODES, LevelVersion, Policy, parse_level, parse_version,
                           policy_to_evaluate)
from .values import DNS1123_LABEL, DNS1123_SUBDOMAIN, mapping

# admission/api/v1/types.go PodSecurityExemptions (PodSecurityDefaults: each of MODES, and its -version).
EXEMPTION_KEYS = ("usernames", "namespaces", "runtimeClasses")


@dataclass(frozen=True)
class Config:
    """A cluster's PodSecurityConfiguration: the policy of a namespace without labels, and who is exempt."""

    defaults: Policy = DEFAULT_POLICY
    usernames: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    runtime_classes: tuple[str, ...] = ()


DEFAULT_CONFIG = Config()


def config(value: Any) -> tuple[Config | None, list[str]]:
    """An environment's `podSecurity` (PodSecurityConfiguration's `defaults` and `exemptions`), defaulted as
    v1/defaults.go does and validated as admission/api/validation/validation.go ValidatePodSecurityConfiguration
    does: (the configuration, or None with the errors, each one line naming its field)."""
    errors: list[str] = []
    if not isinstance(value, dict):
        return None, [f"spec.podSecurity is {value!r}, expected a mapping with defaults and exemptions"]
    for key in value:
        if key not in ("defaults", "exemptions"):
            errors.append(f"spec.podSecurity.{key} is not a field of a PodSecurityConfiguration (defaults, "
                          "exemptions)")
    raw_defaults, raw_exemptions = value.get("defaults") or {}, value.get("exemptions") or {}
    if not isinstance(raw_defaults, dict) or not isinstance(raw_exemptions, dict):
        return None, errors + ["spec.podSecurity.defaults and .exemptions must be mappings"]
    known = {k for mode in MODES for k in (mode, f"{mode}-version")}
    errors += [f"spec.podSecurity.defaults.{k} is not a PodSecurityDefaults field ({', '.join(sorted(known))})"
               for k in raw_defaults if k not in known]
    modes: dict[str, LevelVersion] = {}
    for mode in MODES:
        level_text = raw_defaults.get(mode) or "privileged"      # defaults.go: an empty level is privileged
        version_text = raw_defaults.get(f"{mode}-version") or "latest"
        level, level_error = parse_level(level_text)
        version, version_error = parse_version(version_text)
        if level_error:
            errors.append(f"spec.podSecurity.defaults.{mode}: Invalid value: {level_text!r}: {level_error}")
        if version_error:
            errors.append(f"spec.podSecurity.defaults.{mode}-version: Invalid value: {version_text!r}: "
                          f"{version_error}")
        modes[mode] = LevelVersion(level, version)
    errors += [f"spec.podSecurity.exemptions.{k} is not a PodSecurityExemptions field ({', '.join(EXEMPTION_KEYS)})"
               for k in raw_exemptions if k not in EXEMPTION_KEYS]
    lists: dict[str, tuple[str, ...]] = {}
    for key in EXEMPTION_KEYS:
        items = raw_exemptions.get(key) or []
        if not isinstance(items, list):
            errors.append(f"spec.podSecurity.exemptions.{key} is {items!r}, expected a list")
            continue
        seen: list[str] = []
        for i, item in enumerate(items):
            where = f"spec.podSecurity.exemptions.{key}[{i}]"
            text = item if isinstance(item, str) else ""
            # validation.go validateNamespaces (ValidateNamespaceName: a DNS-1123 label), validateRuntimeClasses
            # (NameIsDNSSubdomain), validateUsernames (not empty).
            if key == "namespaces" and not (len(text) <= 63 and DNS1123_LABEL.fullmatch(text)):
                errors.append(f"{where}: Invalid value: {item!r}: a namespace name is a DNS-1123 label")
            elif key == "runtimeClasses" and not (len(text) <= 253 and DNS1123_SUBDOMAIN.fullmatch(text)):
                errors.append(f"{where}: Invalid value: {item!r}: a RuntimeClass name is a DNS-1123 subdomain")
            elif key == "usernames" and not text:
                errors.append(f"{where}: Invalid value: {item!r}: must be non-empty")
            elif text in seen:
                errors.append(f"{where}: Duplicate value: {item!r}")
            else:
                seen.append(text)
        lists[key] = tuple(seen)
    if errors:
        return None, errors
    return Config(Policy(modes["enforce"], modes["audit"], modes["warn"]), lists.get("usernames", ()),
                  lists.get("namespaces", ()), lists.get("runtimeClasses", ())), []


@dataclass
class NamespacePolicy:
    """The policy pods of one namespace are evaluated against (admission.go ValidatePod 346-352), and where it comes
    from: the Namespace object's labels where it is in the manifests, the labels an Argo CD Application sets on its
    destination namespace (`managed`), the cluster's defaults otherwise."""

    name: str
    policy: Policy
    namespace: Manifest | None             # the Namespace object, where the manifests hold it
    labels: dict[str, str] = field(default_factory=dict)  # its pod-security.kubernetes.io/ labels
    errors: list[str] = field(default_factory=list)       # its labels' parse errors (the API server refuses it)
    exempt: bool = False                  # the cluster's exemptions name it (nothing is evaluated)
    via: str = ""                         # who sets its labels where no Namespace object does (an Application)

    def shows(self, mode: str) -> bool:
        """Whether the input shows the level of `mode` (enforce, warn): a Namespace object does, with its label or
        without; an Application's managedNamespaceMetadata only for a label it sets (it applies its labels
        server-side, leaving others' labels on the namespace as they are)."""
        return self.namespace is not None or (bool(self.via) and f"{LABEL_PREFIX}{mode}" in self.labels)


def namespace_policy(name: str, namespaces: dict[str, Manifest], cfg: Config,
                     managed: dict[str, tuple[dict[str, str], str]] | None = None) -> NamespacePolicy:
    """The policy of namespace `name` (namespaces: the Namespace objects of the manifests by name; managed: the
    labels an Argo CD Application sets on a destination namespace and who sets them, by namespace)."""
    ns = namespaces.get(name)
    via = ""
    if ns is not None:
        labels = {str(k): str(v) for k, v in mapping(ns.metadata.get("labels")).items()}
    elif managed and name in managed:
        labels, via = managed[name]
    else:
        labels = {}
    policy, errors = policy_to_evaluate(labels, cfg.defaults)
    return NamespacePolicy(name, policy, ns, {k: v for k, v in labels.items() if k.startswith(LABEL_PREFIX)}, errors,
                           exempt=name in cfg.namespaces, via=via)
