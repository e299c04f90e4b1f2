"""Kubernetes Pod Security Admission, ported from k8s.io/pod-security-admission v0.36.0 (Kubernetes 1.36): the `api`
package's levels, versions and namespace-label policy (`api/constants.go`, `api/helpers.go`), and the check
registry that evaluates a pod at a level and version (`policy/registry.go`, `policy/checks.go`) as
`policy.NewEvaluator(policy.DefaultChecks(), 1.36)` builds it. The checks themselves are `pod_security_checks.py`.

What a caller must know:
- `privileged` allows everything; `baseline` runs the baseline checks; `restricted` runs the restricted checks plus
  every baseline check that no restricted check overrides at that version (capabilities_baseline by
  capabilities_restricted from 1.22, seccompProfile_baseline by seccompProfile_restricted from 1.19,
  hostPathVolumes by restrictedVolumes, procMount by procMount_restricted from 1.35).
- The newest version any check has is v1.35; "latest" and every version past it (v1.36, v1.99) evaluate as v1.35
  (registry.go:67-88: a version newer than the registry's max evaluates as the max; the 1.36 emulation version is not
  older than 1.35, so it does not lower it).
- A pod with `spec.os.name: windows` is exempt from allowPrivilegeEscalation, capabilities_restricted and
  seccompProfile_restricted from v1.25 on; a pod with `spec.hostUsers: false` (a user namespace) is exempt from
  runAsNonRoot and runAsUser, and from the baseline procMount check, from v1.35 on (restricted still forbids an
  unmasked procMount there).
- The pod is evaluated as the API server hands it to admission: a volume with no source is an emptyDir
  (SetDefaults_Volume), as upstream's fixtures expect; no other defaulting matters to these checks.
- Malformed input never raises: a field of the wrong type reads as unset (pod_security_checks.py says how).
- Only the default (versioned) checks: upstream's experimental checks (policy/checks.go:154-165) are left out;
  v0.36.0 registers none.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .values import go_atoi, mapping

from .pod_security_checks import DEFAULT_CHECKS, Check, CheckFn, go_quote, with_volume_defaults
from .pod_security_checks import CheckResult as CheckResult

# api/constants.go:21-33
LEVEL_PRIVILEGED, LEVEL_BASELINE, LEVEL_RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (LEVEL_PRIVILEGED, LEVEL_BASELINE, LEVEL_RESTRICTED)
# api.Policy's modes (api/helpers.go:155-160), each a label `<LABEL_PREFIX><mode>` and a PodSecurityDefaults key.
MODES = ("enforce", "audit", "warn")
VERSION_LATEST = "latest"

# api/constants.go:35-50
LABEL_PREFIX = "pod-security.kubernetes.io/"
ENFORCE_LEVEL_LABEL = LABEL_PREFIX + "enforce"
ENFORCE_VERSION_LABEL = LABEL_PREFIX + "enforce-version"
AUDIT_LEVEL_LABEL = LABEL_PREFIX + "audit"
AUDIT_VERSION_LABEL = LABEL_PREFIX + "audit-version"
WARN_LEVEL_LABEL = LABEL_PREFIX + "warn"
WARN_VERSION_LABEL = LABEL_PREFIX + "warn-version"
AUDIT_ANNOTATION_PREFIX = LABEL_PREFIX
EXEMPTION_REASON_ANNOTATION_KEY = "exempt"
AUDIT_VIOLATIONS_ANNOTATION_KEY = "audit-violations"
ENFORCED_POLICY_ANNOTATION_KEY = "enforce-policy"

# policy/checks.go:125 (UnknownForbiddenReason)
UNKNOWN_FORBIDDEN_REASON = "unknown forbidden reason"


@dataclass(frozen=True)
class Version:
    """api.Version (api/helpers.go:30-69)."""

    major: int = 0
    minor: int = 0
    latest: bool = False

    def __str__(self) -> str:
        return VERSION_LATEST if self.latest else f"v{self.major}.{self.minor}"

    def older(self, other: Version) -> bool:
        """Version.Older (api/helpers.go:44-55): latest is never older, even than a future version."""
        if self.latest:
            return False
        if other.latest:
            return True
        if self.major != other.major:
            return self.major < other.major
        return self.minor < other.minor


LATEST = Version(latest=True)


@dataclass(frozen=True)
class LevelVersion:
    """api.LevelVersion (api/helpers.go:138-153)."""

    level: str
    version: Version

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"

    def equivalent(self, other: LevelVersion) -> bool:
        return (self.level == LEVEL_PRIVILEGED and other.level == LEVEL_PRIVILEGED) or self == other


@dataclass(frozen=True)
class Policy:
    """api.Policy (api/helpers.go:155-176)."""

    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion

    def fully_privileged(self) -> bool:
        return self.enforce.level == self.audit.level == self.warn.level == LEVEL_PRIVILEGED


# The admission plugin's defaults with no AdmissionConfiguration: privileged:latest for all three modes
# (admission/api/v1/defaults.go, SetDefaults_PodSecurityDefaults).
_PRIVILEGED_LATEST = LevelVersion(LEVEL_PRIVILEGED, LATEST)
DEFAULT_POLICY = Policy(_PRIVILEGED_LATEST, _PRIVILEGED_LATEST, _PRIVILEGED_LATEST)


def parse_level(value: Any) -> tuple[str, str | None]:
    """api.ParseLevel (api/helpers.go:99-107): an invalid level reads as restricted, with the error."""
    if isinstance(value, str) and value in LEVELS:
        return value, None
    return LEVEL_RESTRICTED, f"must be one of {', '.join(LEVELS)}"


# api/helpers.go:121: Go's `$` is the end of the text (Python's \Z), [0-9] is ASCII digits.
_VERSION = re.compile(r"v1\.([0-9]|[1-9][0-9]*)\Z")


def parse_version(value: Any) -> tuple[Version, str | None]:
    """api.ParseVersion (api/helpers.go:123-136): an invalid version reads as latest, with the error."""
    if value == VERSION_LATEST:
        return LATEST, None
    match = _VERSION.match(value) if isinstance(value, str) else None
    minor = go_atoi(match.group(1)) if match is not None else None  # strconv.Atoi: beyond int64 is an error
    if minor is None:
        return LATEST, 'must be "latest" or "v1.x"'
    return Version(1, minor), None


def compare_levels(a: str, b: str) -> int:
    """api.CompareLevels (api/helpers.go:241-259)."""
    if a == b:
        return 0
    if a == LEVEL_PRIVILEGED:
        return -1
    if a == LEVEL_RESTRICTED:
        return 1
    if b == LEVEL_PRIVILEGED:
        return 1
    if b == LEVEL_RESTRICTED:
        return -1
    return 0


def _label_error(label: str, value: Any, detail: str) -> str:
    """field.Invalid(field.NewPath("metadata", "labels").Key(label), value, detail).Error() (api/helpers.go:262-268),
    worded as apimachinery v0.36.0 pkg/util/validation/field/errors.go 99-160 words it ("%s: %q" for a string)."""
    shown = go_quote(value) if isinstance(value, str) else ("null" if value is None else str(value).lower()
                                                            if isinstance(value, bool) else str(value))
    return f"metadata.labels[{label}]: Invalid value: {shown}: {detail}"


def policy_to_evaluate(labels: Any, defaults: Policy = DEFAULT_POLICY) -> tuple[Policy, list[str]]:
    """api.PolicyToEvaluate (api/helpers.go:181-238): a namespace's labels over the defaults. An invalid enforce level
    fails closed (restricted), an invalid audit or warn level fails open (privileged), an invalid version reads as
    latest; with no warn label, warn is raised to a valid enforce level (and its version, unless warn-version is
    set). Labels that are not a mapping read as none; a label value that is not a string is an invalid value."""
    labels = {k: v for k, v in labels.items() if isinstance(k, str)} if isinstance(labels, dict) else {}
    errors: list[str] = []
    enforce, audit, warn = defaults.enforce, defaults.audit, defaults.warn
    if not labels:
        return defaults, errors

    def level(label: str, fail_open: bool) -> str | None:
        if label not in labels:
            return None
        parsed, err = parse_level(labels[label])
        if err is not None:
            errors.append(_label_error(label, labels[label], err))
            return LEVEL_PRIVILEGED if fail_open else parsed
        return parsed

    def version(label: str) -> Version | None:
        if label not in labels:
            return None
        parsed, err = parse_version(labels[label])
        if err is not None:
            errors.append(_label_error(label, labels[label], err))
        return parsed

    has_enforce_level = False
    if (lvl := level(ENFORCE_LEVEL_LABEL, fail_open=False)) is not None:
        enforce = LevelVersion(lvl, enforce.version)
        has_enforce_level = parse_level(labels[ENFORCE_LEVEL_LABEL])[1] is None
    if (ver := version(ENFORCE_VERSION_LABEL)) is not None:
        enforce = LevelVersion(enforce.level, ver)
    if (lvl := level(AUDIT_LEVEL_LABEL, fail_open=True)) is not None:
        audit = LevelVersion(lvl, audit.version)
    if (ver := version(AUDIT_VERSION_LABEL)) is not None:
        audit = LevelVersion(audit.level, ver)
    if (lvl := level(WARN_LEVEL_LABEL, fail_open=True)) is not None:
        warn = LevelVersion(lvl, warn.version)
    if (ver := version(WARN_VERSION_LABEL)) is not None:
        warn = LevelVersion(warn.level, ver)
    if WARN_LEVEL_LABEL not in labels and has_enforce_level and compare_levels(enforce.level, warn.level) > 0:
        warn = LevelVersion(enforce.level, warn.version if WARN_VERSION_LABEL in labels else enforce.version)
    return Policy(enforce, audit, warn), errors


# --- the registry (policy/registry.go) --------------------------------------------------------------------------


@dataclass
class Registry:
    """checkRegistry (registry.go:40-47): per version, the check functions of each level in evaluation order."""

    baseline: dict[Version, list[CheckFn]] = field(default_factory=dict)
    restricted: dict[Version, list[CheckFn]] = field(default_factory=dict)
    max_version: Version = Version()

    def evaluate_pod(self, lv: LevelVersion, metadata: dict[str, Any], spec: dict[str, Any]) -> list[CheckResult]:
        """EvaluatePod (registry.go:67-88), the forbidden results only: privileged runs nothing, a version newer than
        the registry's max evaluates as the max, a level other than baseline evaluates as restricted."""
        if lv.level == LEVEL_PRIVILEGED:
            return []
        version = self.max_version if self.max_version.older(lv.version) else lv.version
        table = self.baseline if lv.level == LEVEL_BASELINE else self.restricted
        return [r for r in (check(metadata, spec) for check in table.get(version, [])) if r is not None]


def validate_checks(checks: tuple[Check, ...]) -> str | None:
    """validateChecks (registry.go:90-138): the first error, or None where the checks are valid."""
    levels: dict[str, str] = {}
    for check in checks:
        if check.id in levels:
            return f"multiple checks registered for ID {check.id}"
        levels[check.id] = check.level
        if check.level not in (LEVEL_BASELINE, LEVEL_RESTRICTED):
            return f"check {check.id}: invalid level {check.level}"
        if not check.versions:
            return f"check {check.id}: empty"
        newest = Version()
        for vc in check.versions:
            v = Version(*vc.minimum)
            if v == Version():
                return f"check {check.id}: undefined version found"
            if newest == v:
                return f"check {check.id}: duplicate version {v}"
            if not newest.older(v):
                return f"check {check.id}: versions must be strictly increasing"
            newest = v
    for check in checks:
        for vc in check.versions:
            if vc.overrides and check.level != LEVEL_RESTRICTED:
                return f"check {check.id}: only restricted checks may set overrides"
            for override in vc.overrides:
                if override in levels and levels[override] != LEVEL_BASELINE:
                    return f"check {check.id}: overrides {levels[override]} check {override}"
    return None


def _next_minor(v: Version) -> Version:
    """nextMinor (registry.go:227-232)."""
    return v if v.latest else Version(v.major, v.minor + 1)


def _inflate(check: Check, versions: dict[Version, dict[str, tuple[CheckFn, tuple[str, ...]]]],
             max_version: Version) -> None:
    """inflateVersions (registry.go:194-214): each variant holds from its minimum version up to the next one's."""
    for i, vc in enumerate(check.versions):
        nxt = (Version(*check.versions[i + 1].minimum) if i + 1 < len(check.versions) else _next_minor(max_version))
        v = Version(*vc.minimum)
        while v.older(nxt):
            versions.setdefault(v, {})[check.id] = (vc.check, vc.overrides)
            v = _next_minor(v)


def new_evaluator(checks: tuple[Check, ...] = DEFAULT_CHECKS, emulation: Version | None = Version(1, 36)) -> Registry:
    """NewEvaluator and populate (registry.go:49-65, 140-192); ValueError where validateChecks refuses the checks."""
    error = validate_checks(checks)
    if error is not None:
        raise ValueError(error)
    r = Registry()
    for c in checks:
        last = Version(*c.versions[-1].minimum)
        if r.max_version.older(last):
            r.max_version = last
    restricted_versioned: dict[Version, dict[str, tuple[CheckFn, tuple[str, ...]]]] = {}
    baseline_versioned: dict[Version, dict[str, tuple[CheckFn, tuple[str, ...]]]] = {}
    for c in checks:
        _inflate(c, restricted_versioned if c.level == LEVEL_RESTRICTED else baseline_versioned, r.max_version)
    ordered = sorted(c.id for c in checks if c.level != LEVEL_RESTRICTED) + sorted(
        c.id for c in checks if c.level == LEVEL_RESTRICTED)  # baseline checks first, then restricted
    v = Version(1, 0)
    while v.older(_next_minor(r.max_version)):
        overrides = {o for _, ids in restricted_versioned.get(v, {}).values() for o in ids}
        for cid, entry in baseline_versioned.get(v, {}).items():
            if cid not in overrides:
                restricted_versioned.setdefault(v, {})[cid] = entry
        r.restricted[v] = [restricted_versioned[v][i][0] for i in ordered if i in restricted_versioned.get(v, {})]
        r.baseline[v] = [baseline_versioned[v][i][0] for i in ordered if i in baseline_versioned.get(v, {})]
        v = _next_minor(v)
    if emulation is not None and emulation.older(r.max_version):
        r.max_version = emulation
    return r


_REGISTRY = new_evaluator()


def evaluate(lv: LevelVersion, metadata: Any, spec: Any) -> list[CheckResult]:
    """checkRegistry.EvaluatePod (registry.go:67-88) on the default registry, the forbidden results only, in check
    order (baseline checks by ID, then restricted checks by ID), on the pod as the API server hands it to admission
    (a volume with no source defaulted to an emptyDir: `with_volume_defaults`). Never raises on a malformed pod."""
    if lv.level == LEVEL_PRIVILEGED:
        return []  # EvaluatePod runs no check: the pod is not defaulted for nothing
    return _REGISTRY.evaluate_pod(lv, metadata if isinstance(metadata, dict) else {},
                                  with_volume_defaults(mapping(spec)))


def _reasons(results: list[CheckResult]) -> list[str]:
    return [r.reason or UNKNOWN_FORBIDDEN_REASON for r in results]  # AggregateCheckResults, checks.go:127-147


def forbidden_reason(results: list[CheckResult]) -> str:
    """AggregateCheckResult.ForbiddenReason (policy/checks.go:99-103)."""
    return ", ".join(_reasons(results))


def forbidden_detail(results: list[CheckResult]) -> str:
    """AggregateCheckResult.ForbiddenDetail (policy/checks.go:106-122): `reason (detail), reason`."""
    return ", ".join(f"{reason} ({r.detail})" if r.detail else reason for reason, r in zip(_reasons(results), results))
