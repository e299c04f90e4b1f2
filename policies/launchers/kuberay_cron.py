"""What KubeRay's controller refuses in a RayCronJob (ray-project/kuberay v1.7.0, ValidateRayCronJobSpec,
ray-operator/controllers/ray/utils/validation.go:968-1003), ported check by check; kuberay.py says where they run.

The RayCronJob controller runs only with KubeRay's RayCronJob feature gate on (main.go:353-359; alpha, off by default
at v1.7.0, pkg/features/features.go:106-116): without it nothing reads the object and no RayJob is ever made, a
warning that carries the gate (TOPO011 decides). With it, raycronjob_controller.go:77-82 runs ValidateRayCronJobSpec at
every reconcile and, on an error, records a Warning event (InvalidRayCronJobSpec) and returns: no RayJob is created.
So the jobTemplate is validated as a RayJob (ValidateRayJobSpec, with no annotations: validation.go:993-1000) when
the RayCronJob is reconciled, before any RayJob exists, and those refusals are the RayCronJob's. Each RayJob it then
creates (constructRayJob, raycronjob_controller.go:170-191: the template as its spec, the name
`<name>-<minutes since the epoch>`, only KubeRay's own label and annotation) passes the RayJob controller's own
ValidateRayJobSpec alike; its name must also be a DNS-1035 label (ValidateRayJobMetadata, rayjob_controller.go:143-160),
which only a RayCronJob named so makes sure of. Upstream returns the first error; each check here is one upstream
would refuse alone, so all are reported."""
from __future__ import annotations

import zoneinfo
from typing import Any

from ..kube.durations import go_duration
from ..kube.objects import INFO, WARNING, created_name
from ..kube.values import DNS1035, mapping
from .base import Check
from .kuberay_validation import FEATURE_GATES, LAUNCHER_ID, MAX_JOB_NAME, REFUSED, job_spec

KIND = "RayCronJob"
# utils/constant.go:382-385: "-" and up to a 10-digit minute count are added to name each RayJob.
MAX_CRON_NAME = MAX_JOB_NAME - 11
# A RayJob's name as the controller makes it today (raycronjob_controller.go:160-168: Unix minutes, 8 digits).
CHILD_SUFFIX = "-29000000"
# github.com/robfig/cron/v3 v3.0.1 (ray-operator/go.mod:17) parser.go: each field's bounds and names, and the
# descriptors ParseStandard (Minute | Hour | Dom | Month | Dow | Descriptor, 217-231) accepts; _range is getRange
# (252-319) with parseIntOrName and mustParseInt (321-342), schedule_problem is Parse (88-158), normalizeFields
# (160-215) and parseDescriptor (365-433), read against that tag's source.
FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}))
DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def _number(expr: str, names: dict[str, int]) -> int | str:
    """parseIntOrName / mustParseInt: a name of the field, or strconv.Atoi's number (not negative); the error text."""
    if expr.lower() in names:
        return names[expr.lower()]
    digits = expr[1:] if expr[:1] in ("+", "-") else expr
    if not digits.isascii() or not digits.isdigit():
        return f"failed to parse int from {expr}"
    value = int(expr)
    return value if value >= 0 else f"negative number ({value}) not allowed: {expr}"


def _range(expr: str, low: int, high: int, names: dict[str, int]) -> str | None:
    """getRange: `*`, `?`, a number or name, or `a-b`, each with an optional `/step`; the error, None where valid."""
    range_step = expr.split("/")
    low_high = range_step[0].split("-")
    if low_high[0] in ("*", "?"):
        start, end = low, high
    else:
        first = _number(low_high[0], names)
        if isinstance(first, str):
            return first
        start = end = first
        if len(low_high) == 2:
            last = _number(low_high[1], names)
            if isinstance(last, str):
                return last
            end = last
        elif len(low_high) > 2:
            return f"too many hyphens: {expr}"
    step = 1
    if len(range_step) == 2:
        got = _number(range_step[1], {})
        if isinstance(got, str):
            return got
        step = got
        if len(low_high) == 1:
            end = high
    elif len(range_step) > 2:
        return f"too many slashes: {expr}"
    if start < low:
        return f"beginning of range ({start}) below minimum ({low}): {expr}"
    if end > high:
        return f"end of range ({end}) above maximum ({high}): {expr}"
    if start > end:
        return f"beginning of range ({start}) beyond end of range ({end}): {expr}"
    if step == 0:
        return f"step of range should be a positive number: {expr}"
    return None


def schedule_problem(schedule: str) -> str | None:
    """cron.ParseStandard (robfig/cron v3.0.1 parser.go Parse): a descriptor, `@every <Go duration>`, or exactly five
    fields of comma-separated ranges within their bounds; why it is refused, None where it parses."""
    if not schedule:
        return "empty spec string"
    if schedule.startswith("@"):
        if schedule in DESCRIPTORS:
            return None
        if schedule.startswith("@every "):
            return None if go_duration(schedule[len("@every "):]) is not None else \
                f"failed to parse duration {schedule}"
        return f"unrecognized descriptor: {schedule}"
    fields = schedule.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    for text, (_, low, high, names) in zip(fields, FIELDS):
        for expr in (e for e in text.split(",") if e):  # strings.FieldsFunc: empty ranges dropped
            why = _range(expr, low, high, names)
            if why:
                return why
    return None


def time_zone_known(name: str) -> bool | None:
    """time.LoadLocation with Go's bundled database (validation.go:9 imports time/tzdata): UTC and Local always,
    no name with `..` or a leading slash; None where this machine has no time zone database to tell."""
    if name in ("UTC", "Local"):
        return True
    if ".." in name or name.startswith(("/", "\\")):
        return False
    try:
        zoneinfo.ZoneInfo(name)
        return True
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False if zoneinfo.available_timezones() else None


def cron_checks(obj: dict[str, Any], gates: dict[str, bool] | None = None) -> list[Check]:
    """ValidateRayCronJobSpec (validation.go:968-1003) and the checks its RayJobs meet (see the module's
    docstring), on a RayCronJob as the API server stores it; `gates`: KubeRay's feature gates (defaults where None)."""
    on = {**FEATURE_GATES, **(gates or {})}
    meta, spec = mapping(obj.get("metadata")), mapping(obj.get("spec"))
    out: list[Check] = []
    if not on["RayCronJob"]:
        out.append(Check("kind", "a RayCronJob needs KubeRay's feature gate RayCronJob (alpha, off by default at "
                         "v1.7.0): without it the operator starts no RayCronJob controller (main.go:353-359) and no "
                         "RayJob is ever created", "run the KubeRay operator with --feature-gates=RayCronJob=true",
                         severity=WARNING, gate=(LAUNCHER_ID, "RayCronJob")))

    def refuse(field: str, message: str, hint: str) -> None:
        out.append(Check(field, f"{message}: {REFUSED[KIND]}", hint))

    name, where = created_name(meta)
    if name:
        if len(name) > MAX_CRON_NAME:
            refuse(where, f"RayCronJob name should be no more than {MAX_CRON_NAME} characters (it is {len(name)})",
                   f"shorten the name to at most {MAX_CRON_NAME} characters")
        elif not DNS1035.match(name + CHILD_SUFFIX):
            out.append(Check(where, f"the RayJobs this RayCronJob creates are named '{name}-<minutes>', not a "
                             "DNS-1035 label: the KubeRay controller fails each RayJob (ValidationFailed; no "
                             "RayCluster is created)", "rename it: lower case letters, digits and '-', starting "
                             "with a letter"))
    schedule = spec.get("schedule")
    if isinstance(schedule, str):
        why = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead" if "TZ" in schedule else None
        why = why or (f"invalid cron schedule: {problem}" if (problem := schedule_problem(schedule)) else None)
        if why:
            refuse("spec.schedule", why, "write five fields (minute hour day-of-month month day-of-week) or a "
                   "descriptor such as @daily; set the time zone in timeZone")
    zone = spec.get("timeZone")
    if isinstance(zone, str):
        if not zone:
            refuse("spec.timeZone", "timeZone must not be empty string, omit the field to use the local time zone "
                   "of the KubeRay operator", "leave timeZone out, or name a time zone")
        elif (known := time_zone_known(zone)) is False:
            refuse("spec.timeZone", f"invalid time zone: unknown time zone {zone}", "name an IANA time zone, such as "
                   "Europe/Berlin or UTC")
        elif known is None:
            out.append(Check("spec.timeZone", f"time zone {zone} was not checked: this machine has no time zone "
                             "database (KubeRay's controller carries its own)", "install the tzdata package "
                             "(pip install tzdata) to have it checked", severity=INFO))
    template = spec.get("jobTemplate")
    if isinstance(template, dict):
        out += job_spec({"spec": template}, on, KIND)
    return out
