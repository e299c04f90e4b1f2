"""What the API server's Job validation refuses that the schema cannot say (kubernetes v1.36.0
pkg/apis/batch/validation/validation.go: ValidateJob, validateJobSpec, validatePodFailurePolicy*,
validatePodReplacementPolicy, validateSuccessPolicy*, validateGeneratedSelector), for a Job of its own
(indexed_job) and the Jobs a JobSet makes (jobset_webhook)."""
from __future__ import annotations

from typing import Any

from ..kube.values import as_int, dig, domain_prefixed_path_problems, listing, mapping, selects
from . import core_validation
from .base import Check

JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
INDEXED = "Indexed"
# pkg/apis/batch/validation/validation.go at v1.36.0: maxParallelismForIndexedJob (completions has no such limit),
# maxFailedIndexesForIndexedJob; above completionsSoftLimit with backoffLimitPerIndex, maxFailedIndexes is required
# and it and parallelism are bounded (parallelismLimitForHighCompletions, maxFailedIndexesLimitForHighCompletions);
# maxPodFailurePolicyRules, maxPodFailurePolicyOnExitCodesValues, maxPodFailurePolicyOnPodConditionsPatterns,
# maxSuccessPolicyRule, maxJobSuccessPolicySucceededIndexesLimit; the actions, operators and condition statuses it
# supports.
MAX_INDEXED = 100000
MAX_FAILED_INDEXES = 100_000
COMPLETIONS_SOFT_LIMIT = 100_000
HIGH_COMPLETIONS_LIMIT = 10_000
MAX_POD_FAILURE_RULES = 20
MAX_EXIT_CODE_VALUES = 255
MAX_CONDITION_PATTERNS = 20
MAX_SUCCESS_RULES = 20
MAX_SUCCEEDED_INDEXES = 64 * 1024
POD_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
EXIT_CODE_OPERATORS = ("In", "NotIn")
CONDITION_STATUSES = ("False", "True", "Unknown")


def indexed(job_spec: dict[str, Any]) -> bool:
    return job_spec.get("completionMode") == INDEXED


MAX_MANAGED_BY = 63
POD_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")


def managed_by_problems(manager: str) -> list[str]:
    """Why a `managedBy` value is refused: not a domain-prefixed path (IsDomainPrefixedPath), or longer than 63
    characters. The Job API (validateJobSpec) and the JobSet webhook (jobset_webhook.go:200-210 at v0.12.0) apply
    the same two checks."""
    why = domain_prefixed_path_problems(manager)
    if len(manager) > MAX_MANAGED_BY:
        why.append(f"is {len(manager)} characters, more than {MAX_MANAGED_BY}")
    return why


def _index_count(indexes: str) -> int | None:
    """How many indexes `succeededIndexes` ("1,3-5") names; None where it does not parse as integers."""
    total = 0
    for part in indexes.split(","):
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            return None
        total += max(last - first + 1, 0)
    return total


NONNEGATIVE = ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished",
               "backoffLimitPerIndex", "maxFailedIndexes")
JOB_RESTART_POLICIES = ("OnFailure", "Never")


def job_validation(js: dict[str, Any], field: str, restart_default: str | None = None,
                   added_volumes: tuple[str, ...] = ()) -> list[Check]:
    """What the API server's Job validation refuses that the schema cannot say (pkg/apis/batch/validation/
    validation.go validateJobSpec, validatePodFailurePolicy*, validatePodReplacementPolicy, validateSuccessPolicy*
    at v1.36.0), the pod template's included (core_validation.pod_template). `restart_default` is the template's
    restartPolicy where the object's own webhook fills it in before the Job reaches the API server (the JobSet
    webhook's OnFailure); without one the API server defaults it to Always and then refuses it. `added_volumes`: the
    pod volumes the object's controller adds to the Job (a JobSet's volumeClaimPolicies)."""
    out: list[Check] = []
    refuse = "the API server refuses it"
    for key in NONNEGATIVE:
        value = js.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            out.append(Check(f"{field}.{key}", f"{key} {value} is negative (must be greater than or equal to 0): "
                             f"{refuse}", f"set {key} to 0 or more"))
    if js.get("maxFailedIndexes") is not None and js.get("backoffLimitPerIndex") is None:
        out.append(Check(f"{field}.backoffLimitPerIndex", "maxFailedIndexes without backoffLimitPerIndex (Required "
                         f"value: when maxFailedIndexes is specified): {refuse}", "set backoffLimitPerIndex"))
    mode = js.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", INDEXED):
        out.append(Check(f"{field}.completionMode", f"completionMode '{mode}' is neither NonIndexed nor Indexed: "
                         f"{refuse}", "set completionMode: Indexed"))
    template = mapping(js.get("template"))
    out += core_validation.pod_template(template, f"{field}.template", added_volumes)
    restart = mapping(template.get("spec")).get("restartPolicy") or restart_default
    if restart in (None, "Always"):
        out.append(Check(f"{field}.template.spec.restartPolicy", f"restartPolicy is {restart or 'unset (Always)'}: "
                         "a Job's pods must say Never or OnFailure (Required value): the API server refuses it",
                         "set restartPolicy: Never (the Job controller then replaces a failed pod)"))
    if js.get("managedBy") is not None:
        manager = str(js["managedBy"])
        out += [Check(f"{field}.managedBy", f"managedBy '{manager}' {why}: {refuse}",
                      "leave managedBy out (the Job controller), or name a controller like example.com/my-controller")
                for why in managed_by_problems(manager)]
    completions = as_int(js.get("completions"))
    if indexed(js):
        # SetDefaults_Job (pkg/apis/batch/v1/defaults.go) sets completions and parallelism to 1 where both are
        # unset, before validation: only completions unset beside a parallelism is refused.
        if js.get("completions") is None and js.get("parallelism") is not None:
            out.append(Check(f"{field}.completions", "an Indexed Job without completions: the API server refuses it "
                             "(completions is required when completion mode is Indexed)",
                             "set completions to the number of pods"))
        parallelism = as_int(js.get("parallelism"))
        if parallelism is not None and parallelism > MAX_INDEXED:
            out.append(Check(f"{field}.parallelism", f"parallelism {parallelism} is above {MAX_INDEXED}: the API "
                             "server refuses an Indexed Job that large", f"keep parallelism at most {MAX_INDEXED}"))
        max_failed = as_int(js.get("maxFailedIndexes"))
        if completions is not None and max_failed is not None and max_failed > completions:
            out.append(Check(f"{field}.maxFailedIndexes", f"maxFailedIndexes {max_failed} is above completions "
                             f"{completions}: {refuse}", f"set maxFailedIndexes at most {completions}"))
        if max_failed is not None and max_failed > MAX_FAILED_INDEXES:
            out.append(Check(f"{field}.maxFailedIndexes", f"maxFailedIndexes {max_failed} is above "
                             f"{MAX_FAILED_INDEXES:,}: {refuse}", f"set maxFailedIndexes at most {MAX_FAILED_INDEXES}"))
        if completions is not None and completions > COMPLETIONS_SOFT_LIMIT and js.get("backoffLimitPerIndex") is not None:
            high = f"with completions above {COMPLETIONS_SOFT_LIMIT:,} and backoffLimitPerIndex"
            if js.get("maxFailedIndexes") is None:
                out.append(Check(f"{field}.maxFailedIndexes", f"no maxFailedIndexes {high} (Required value: must be "
                                 f"specified when completions is above {COMPLETIONS_SOFT_LIMIT}): {refuse}",
                                 f"set maxFailedIndexes, at most {HIGH_COMPLETIONS_LIMIT}"))
            for key, value in (("parallelism", parallelism), ("maxFailedIndexes", max_failed)):
                if value is not None and value > HIGH_COMPLETIONS_LIMIT:
                    out.append(Check(f"{field}.{key}", f"{key} {value} is above {HIGH_COMPLETIONS_LIMIT:,} {high}: "
                                     f"{refuse}", f"set {key} at most {HIGH_COMPLETIONS_LIMIT}"))
    else:
        for key in ("backoffLimitPerIndex", "maxFailedIndexes"):
            if js.get(key) is not None:
                out.append(Check(f"{field}.{key}", f"{key} on a NonIndexed Job: {refuse} (it requires indexed "
                                 "completion mode)", "set completionMode: Indexed, or drop it"))
    out += _pod_failure_policy(js, field) + _success_policy(js, field, completions)
    replacement = js.get("podReplacementPolicy")
    if replacement is not None:
        allowed = ("Failed",) if js.get("podFailurePolicy") is not None else POD_REPLACEMENT_POLICIES
        if replacement not in allowed:
            out.append(Check(f"{field}.podReplacementPolicy", f"podReplacementPolicy '{replacement}'"
                             + (" with a podFailurePolicy" if len(allowed) == 1 else "") + f": {refuse} (supported "
                             f"values: {', '.join(allowed)})", f"set podReplacementPolicy: {allowed[0]}"))
    policy = restart
    if js.get("podFailurePolicy") is not None and policy == "OnFailure":
        out.append(Check(f"{field}.template.spec.restartPolicy", f"restartPolicy is {policy or 'unset'} with a "
                         "podFailurePolicy: the API server accepts only Never there", "set restartPolicy: Never"))
    return out


def _pod_failure_policy(js: dict[str, Any], field: str) -> list[Check]:
    """validatePodFailurePolicyRule / ...OnExitCodes: each rule has exactly one of onExitCodes and onPodConditions;
    exit codes are listed once each, in increasing order, never 0 under In; containerName names a container or init
    container of the template; FailIndex needs backoffLimitPerIndex."""
    out: list[Check] = []
    pod = mapping(dig(js, "template", "spec"))
    names = {mapping(c).get("name") for c in listing(pod.get("containers")) + listing(pod.get("initContainers"))}
    rules = listing(mapping(js.get("podFailurePolicy")).get("rules"))
    if len(rules) > MAX_POD_FAILURE_RULES:
        out.append(Check(f"{field}.podFailurePolicy.rules", f"{len(rules)} podFailurePolicy rules, more than the "
                         f"{MAX_POD_FAILURE_RULES} the API server allows (Too many): the API server refuses it",
                         f"keep at most {MAX_POD_FAILURE_RULES} rules"))
    for i, rule in enumerate(rules):
        rule, where = mapping(rule), f"{field}.podFailurePolicy.rules[{i}]"
        codes, conditions = rule.get("onExitCodes"), listing(rule.get("onPodConditions"))
        action = rule.get("action")
        if action is not None and action not in POD_FAILURE_ACTIONS:
            out.append(Check(f"{where}.action", f"action '{action}' is not one of {', '.join(POD_FAILURE_ACTIONS)}: "
                             "the API server refuses it", "set action: FailJob, FailIndex, Ignore or Count"))
        if len(conditions) > MAX_CONDITION_PATTERNS:
            out.append(Check(f"{where}.onPodConditions", f"{len(conditions)} onPodConditions patterns, more than "
                             f"{MAX_CONDITION_PATTERNS} (Too many): the API server refuses it",
                             f"keep at most {MAX_CONDITION_PATTERNS}"))
        for j, pattern in enumerate(conditions):
            status = mapping(pattern).get("status")
            if status is not None and status not in CONDITION_STATUSES:
                out.append(Check(f"{where}.onPodConditions[{j}].status", f"status '{status}' is not one of "
                                 f"{', '.join(CONDITION_STATUSES)}: the API server refuses it", "set status: \"True\""))
            ctype = mapping(pattern).get("type")
            if ctype is not None and core_validation.label_key_problem(str(ctype)):
                out.append(Check(f"{where}.onPodConditions[{j}].type", f"condition type '{ctype}' is not a "
                                 "qualified name: the API server refuses it", "name a condition such as "
                                 "DisruptionTarget"))
        if codes is not None and conditions:
            out.append(Check(where, "rule has both onExitCodes and onPodConditions: the API server refuses it",
                             "split it into two rules"))
        if codes is None and not conditions:
            out.append(Check(where, "rule has neither onExitCodes nor onPodConditions: the API server refuses it",
                             "add onExitCodes or onPodConditions"))
        if rule.get("action") == "FailIndex" and js.get("backoffLimitPerIndex") is None:
            out.append(Check(f"{where}.action", "action FailIndex without backoffLimitPerIndex: the API server "
                             "refuses it", "set backoffLimitPerIndex, or use FailJob"))
        codes = mapping(codes)
        container = codes.get("containerName")
        if container is not None and container not in names:
            out.append(Check(f"{where}.onExitCodes.containerName", f"containerName '{container}' is not a container "
                             "or init container of the pod template: the API server refuses it",
                             f"name one of {', '.join(sorted(str(n) for n in names))}"))
        operator = codes.get("operator")
        if rule.get("onExitCodes") is not None and operator is not None and operator not in EXIT_CODE_OPERATORS:
            out.append(Check(f"{where}.onExitCodes.operator", f"operator '{operator}' is neither In nor NotIn: the API "
                             "server refuses it", "set operator: In"))
        raw = listing(codes.get("values"))
        if rule.get("onExitCodes") is not None and not raw:
            out.append(Check(f"{where}.onExitCodes.values", "no exit codes (at least one value is required): the API "
                             "server refuses it", "list the exit codes the rule is about"))
        elif len(raw) > MAX_EXIT_CODE_VALUES:
            out.append(Check(f"{where}.onExitCodes.values", f"{len(raw)} exit codes, more than the "
                             f"{MAX_EXIT_CODE_VALUES} the API server allows (Too many): it refuses them",
                             f"keep at most {MAX_EXIT_CODE_VALUES} (NotIn names the few that are not)"))
        values = [v for v in raw if isinstance(v, int)]
        if codes.get("operator") == "In" and 0 in values:
            out.append(Check(f"{where}.onExitCodes.values", "exit code 0 under operator In: the API server refuses it "
                             "(a pod that exits 0 succeeded)", "remove 0 from the values"))
        if len(set(values)) != len(values):
            out.append(Check(f"{where}.onExitCodes.values", "an exit code is listed twice: the API server refuses it",
                             "list each exit code once"))
        if values != sorted(values):
            out.append(Check(f"{where}.onExitCodes.values", f"exit codes {values} are not in increasing order: the "
                             "API server refuses them (must be ordered)", f"list them as {sorted(set(values))}"))
    return out


def _success_policy(js: dict[str, Any], field: str, completions: int | None) -> list[Check]:
    """validateJobSpec / validateSuccessPolicyRule: a successPolicy needs Indexed mode and at least one rule, each
    with succeededCount or succeededIndexes, succeededCount at most completions and at most the indexes listed."""
    policy = js.get("successPolicy")
    if policy is None:
        return []
    where = f"{field}.successPolicy"
    if not indexed(js):
        return [Check(where, "successPolicy on a NonIndexed Job: the API server refuses it (it requires indexed "
                      "completion mode)", "set completionMode: Indexed, or drop successPolicy")]
    rules = listing(mapping(policy).get("rules"))
    if not rules:
        return [Check(f"{where}.rules", "successPolicy without rules: the API server refuses it",
                      "add a rule with succeededCount or succeededIndexes")]
    out: list[Check] = []
    if len(rules) > MAX_SUCCESS_RULES:
        out.append(Check(f"{where}.rules", f"{len(rules)} successPolicy rules, more than the {MAX_SUCCESS_RULES} the "
                         "API server allows (Too many): it refuses them", f"keep at most {MAX_SUCCESS_RULES}"))
    for i, rule in enumerate(rules):
        rule = mapping(rule)
        count, indexes = as_int(rule.get("succeededCount")), rule.get("succeededIndexes")
        if rule.get("succeededCount") is None and indexes is None:
            out.append(Check(f"{where}.rules[{i}]", "rule has neither succeededCount nor succeededIndexes: the API "
                             "server refuses it", "set succeededCount or succeededIndexes"))
        if count is not None and completions is not None and count > completions:
            out.append(Check(f"{where}.rules[{i}].succeededCount", f"succeededCount {count} is above completions "
                             f"{completions}: the API server refuses it", f"set it at most {completions}"))
        if indexes is not None and len(str(indexes)) > MAX_SUCCEEDED_INDEXES:
            out.append(Check(f"{where}.rules[{i}].succeededIndexes", f"succeededIndexes is {len(str(indexes)):,} "
                             f"characters, more than {MAX_SUCCEEDED_INDEXES:,} (Too long): the API server refuses it",
                             "write ranges (0-99) rather than every index"))
            continue
        total = _index_count(str(indexes)) if indexes is not None else None
        if count is not None and total is not None and count > total:
            out.append(Check(f"{where}.rules[{i}].succeededCount", f"succeededCount {count} is above the {total} "
                             "indexes succeededIndexes lists: the API server refuses it", f"set it at most {total}"))
    return out


def selector_validation(js: dict[str, Any], name: str) -> list[Check]:
    """ValidateJobSpec and validateGeneratedSelector (pkg/apis/batch/validation/validation.go at v1.36.0): with
    `manualSelector: true` the selector must select the template's labels; without it the API server adds the
    `controller-uid` label to the selector it generates (pkg/registry/batch/job/strategy.go generateSelector), and a
    selector the user wrote must select only the labels the Job controller puts on its pods (`controller-uid`,
    `job-name` = the Job's name): anything else is "`selector` not auto-generated"."""
    selector = js.get("selector")
    if not isinstance(selector, dict):
        return []
    if js.get("manualSelector") is True:
        labels = mapping(mapping(mapping(js.get("template")).get("metadata")).get("labels"))
        if selects(selector, {str(k): str(v) for k, v in labels.items()}):
            return []
        return [Check("spec.template.metadata.labels", "the selector does not select the template's labels "
                      "(`selector` does not match template `labels`): the API server refuses it",
                      "give the template the labels spec.selector asks for")]
    generated = {label: name for label in JOB_NAME_LABELS}
    expressions = [mapping(e) for e in listing(selector.get("matchExpressions"))]
    if any(str(e.get("key")) in UID_LABELS for e in expressions):
        return []  # decided by the Job's uid, which only the API server knows
    if all(str(k) in UID_LABELS or generated.get(str(k)) == str(v)
           for k, v in mapping(selector.get("matchLabels")).items()) and \
            selects({"matchExpressions": expressions}, generated):
        return []
    return [Check("spec.selector", "a selector without manualSelector: true (`selector` not auto-generated): the API "
                  "server refuses it", "remove spec.selector (the API server generates it), or set manualSelector: "
                  "true and give the template the selected labels")]
