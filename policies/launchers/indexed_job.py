"""The Kubernetes Job controller (batch/v1 Job, kubernetes v1.36.0, pkg/controller/job/): the pods of an Indexed or
a NonIndexed Job, with the completion index it gives each pod of an Indexed one."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..kube import as_int, dig, domain_prefixed_path_problems, listing, mapping, selects
from ..model import Manifest
from . import core_validation
from .base import Bundle, Check, Launcher, ScaleSpec, Workload
from .lifecycle import FAIL, RECREATE_POD, Decision, PodExit, RestartCount, completed, kubelet_restarts
from .pods import COMPLETION_INDEX, IF_ABSENT, Injected, PodGroup

KIND = "Job"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEXED = "Indexed"
# pkg/apis/batch/validation/validation.go: maxParallelismForIndexedJob (completions has no such limit)
MAX_INDEXED = 100000
# names.MaxGeneratedNameLength: 63 minus the 5 random characters generateName appends.
MAX_GENERATED_NAME = 58


def indexed(job_spec: dict[str, Any]) -> bool:
    return job_spec.get("completionMode") == INDEXED


def job_pods(job_spec: dict[str, Any]) -> int:
    """How many pods run at once: the Job controller keeps `min(parallelism, completions - succeeded)` active
    (job_controller.go manageJob), and the API server defaults parallelism to 1."""
    parallelism = as_int(job_spec.get("parallelism"), 1) or 0
    completions = as_int(job_spec.get("completions"))
    # A negative count is refused by the API server (job_validation): no pods, never a negative number of them.
    return max(min(parallelism, completions) if completions is not None else parallelism, 0)


def generate_name(job: str, index: int | None) -> str:
    """The pod's generateName (podGenerateNameWithIndex): `<job>-<index>-`, the job name cut so that the prefix
    keeps within 58 characters; `<job>-` for a NonIndexed Job (the apiserver's generateName truncation alike)."""
    suffix = f"-{index}-" if index is not None else "-"
    prefix = job + suffix
    if len(prefix) > MAX_GENERATED_NAME:
        prefix = prefix[:MAX_GENERATED_NAME - len(suffix)] + suffix
    return prefix + "<random>"


def job_group(job_spec: dict[str, Any], job_name: str, template_field: str, role: str, offset: int,
              labels: Callable[[int], dict[str, str]] | None = None,
              annotations: Callable[[int], dict[str, str]] | None = None) -> PodGroup:
    """The pods the Job controller creates for one Job (also a JobSet's child Jobs).

    Indexed mode (job_controller.go manageJob, indexed_job_utils.go at v1.36.0): each pod gets the
    `batch.kubernetes.io/job-completion-index` annotation and label, its hostname forced to `<job>-<index>`, a
    generated name `<job>-<index>-<random>`, and `JOB_COMPLETION_INDEX` (a fieldRef to that label) appended to every
    container and init container that does not define it already (addCompletionIndexEnvVariable)."""
    is_indexed = indexed(job_spec)
    extra_labels = labels or (lambda i: {})
    extra_annotations = annotations or (lambda i: {})

    def pod_labels(i: int) -> dict[str, str]:
        out = {k: job_name for k in JOB_NAME_LABELS}
        if is_indexed:
            out[COMPLETION_INDEX] = str(i)
        out.update(extra_labels(i))
        return out

    per_index = job_spec.get("backoffLimitPerIndex") is not None

    def pod_annotations(i: int) -> dict[str, str]:
        out = {COMPLETION_INDEX: str(i)} if is_indexed else {}
        if is_indexed and per_index:
            out[INDEX_FAILURE_COUNT] = "0"  # addIndexFailureCountAnnotation, on the first pod of each index
        out.update(extra_annotations(i))
        return out

    def inject(i: int, container: str, init: bool) -> list[Injected]:
        if not is_indexed:
            return []
        return [Injected(COMPLETION_INDEX_ENV, field_ref=f"metadata.labels['{COMPLETION_INDEX}']", mode=IF_ABSENT)]

    return PodGroup(
        role=role,
        count=job_pods(job_spec),
        offset=offset,
        template=mapping(job_spec.get("template")),
        template_field=template_field,
        name=(lambda i: generate_name(job_name, i)) if is_indexed else (lambda i: generate_name(job_name, None)),
        hostname=(lambda i: f"{job_name}-{i}") if is_indexed else (lambda i: generate_name(job_name, None)),
        hostname_forced=is_indexed,
        labels=pod_labels,
        annotations=pod_annotations,
        inject=inject,
    )


def backoff_restarts(job_specs: Iterator[tuple[str, dict[str, Any]]]) -> list[str]:
    """A Job whose backoffLimit (default 6) is above 0 recreates failed pods."""
    for _, js in job_specs:
        backoff = js.get("backoffLimit")
        if not isinstance(backoff, int) or backoff > 0:
            return [f"backoffLimit {backoff if backoff is not None else '6 (default)'}"]
    return []


# kubernetes v1.36.0 pkg/controller/job/job_controller.go: DefaultJobPodFailureBackOff 10 s, MaxJobPodFailureBackOff
# 10 min (a failed pod's replacement waits 10 s x 2^(failures-1)); the API server defaults backoffLimit to 6.
JOB_SOURCE = "kubernetes v1.36.0 pkg/controller/job/"
POD_FAILURE_BACKOFF, MAX_POD_FAILURE_BACKOFF, DEFAULT_BACKOFF_LIMIT = 10.0, 600.0, 6
DISRUPTION_TARGET = "DisruptionTarget"


def matching_failure_rule(job_spec: dict[str, Any], container: str, ended: PodExit) -> tuple[int, str] | None:
    """The first podFailurePolicy rule a failed pod matches, and its action (pod_failure_policy.go
    matchPodFailurePolicy): onExitCodes on a non-zero exit of the named container (any, unnamed), onPodConditions on
    DisruptionTarget, which a deleted or evicted pod carries."""
    for i, rule in enumerate(listing(dig(job_spec, "podFailurePolicy", "rules"))):
        rule = mapping(rule)
        codes = rule.get("onExitCodes")
        if isinstance(codes, dict):
            name = codes.get("containerName")
            values = [as_int(v) for v in listing(codes.get("values"))]
            if ended.exit_code != 0 and name in (None, container) and (
                    (codes.get("operator") == "In" and ended.exit_code in values)
                    or (codes.get("operator") == "NotIn" and ended.exit_code not in values)):
                return i, str(rule.get("action"))
        elif any(mapping(c).get("type") == DISRUPTION_TARGET and str(mapping(c).get("status", "True")) == "True"
                 for c in listing(rule.get("onPodConditions"))) and ended.deleted:
            return i, str(rule.get("action"))
    return None


def job_after_exit(job_spec: dict[str, Any], pod_spec: dict[str, Any], container: str, ended: PodExit,
                   count: RestartCount, default_policy: str | None = None, who: str = "Job controller") -> Decision:
    """What the kubelet and the Job controller do when a pod of a Job ends (job_controller.go syncJob at v1.36.0).
    Exit 0 under OnFailure or Never: the pod succeeded. restartPolicy OnFailure: the kubelet restarts the container
    and the controller sums the restartCounts of the Job's running and pending pods, failing it once the sum reaches
    backoffLimit (pastBackoffLimitOnFailure: `result >= *job.Spec.BackoffLimit`, any restart when the limit is 0;
    upstream's TestJobBackoffForOnFailure: backoffLimit 1 and one restart fail the Job). Never, or a deleted pod:
    the pod failed; the podFailurePolicy decides (FailJob, Ignore, Count), then backoffLimitPerIndex or
    backoffLimit (failed pods > backoffLimit); a replacement pod for the index comes after the pod failure back-off.
    A pod on a lost node is evicted by the taint manager (DisruptionTarget) and stays Terminating until the node is
    deleted: with podReplacementPolicy Failed (required with a podFailurePolicy) its replacement waits for that."""
    backoff = as_int(job_spec.get("backoffLimit"), DEFAULT_BACKOFF_LIMIT)
    backoff = DEFAULT_BACKOFF_LIMIT if backoff is None else backoff
    per_index = as_int(job_spec.get("backoffLimitPerIndex"))
    spec = {**pod_spec, "restartPolicy": pod_spec.get("restartPolicy") or default_policy or "Never"}
    done = completed(spec, ended, who)
    if done is not None:
        return done
    in_place = kubelet_restarts(spec, ended, count)
    if in_place is not None:
        restarts = count.total_restarts() + 1
        if per_index is None and (restarts > 0 if backoff == 0 else restarts >= backoff):
            return Decision(FAIL, who, f"restartPolicy OnFailure, backoffLimit {backoff}: {restarts} container "
                            f"restart{'s' if restarts != 1 else ''} reach the limit -> Job failed "
                            "(BackoffLimitExceeded)", JOB_SOURCE + "job_controller.go pastBackoffLimitOnFailure")
        in_place.why = f"restartPolicy OnFailure, backoffLimit {backoff} ({restarts} of {backoff} counted): " + \
            in_place.why.split(": ", 1)[1]
        return in_place
    how = f"restartPolicy {spec['restartPolicy']}" + (
        ", pod on a lost node (evicted: DisruptionTarget)" if ended.node_lost else
        ", pod deleted (DisruptionTarget)" if ended.deleted else "")
    if ended.node_lost:
        ended = PodExit(ended.index, ended.exit_code, True, True)
    rule = matching_failure_rule(job_spec, container, ended)
    policy_source = JOB_SOURCE + "pod_failure_policy.go matchPodFailurePolicy"
    if rule is not None and rule[1] == "FailJob":
        return Decision(FAIL, who, f"{how}, podFailurePolicy rule {rule[0]} FailJob matches exit code "
                        f"{ended.exit_code} -> Job failed", policy_source)
    ignored = rule is not None and rule[1] == "Ignore"
    # podReplacementPolicy Failed (the only value with a podFailurePolicy): a replacement only for a pod that failed,
    # which a pod left Terminating on a lost node is not until the node is deleted.
    waits = ended.node_lost and (job_spec.get("podReplacementPolicy") == "Failed" or
                                 job_spec.get("podFailurePolicy") is not None)
    until = ", once the lost node is deleted (podReplacementPolicy Failed)" if waits else ""
    n_index = count.failed_pods.get(ended.index, 0) + (0 if ignored else 1)
    total = count.total_failed() + (0 if ignored else 1)
    delay = min(POD_FAILURE_BACKOFF * 2 ** max(total - 1, 0), MAX_POD_FAILURE_BACKOFF)
    if rule is not None and ignored:
        return Decision(RECREATE_POD, who, f"{how}, podFailurePolicy rule {rule[0]} Ignore (not counted) -> new pod for "
                        f"index {ended.index}{until}", policy_source, 0.0, counted=False, awaits_node=waits)
    if per_index is not None:
        if n_index > per_index:
            return Decision(FAIL, who, f"{how}, backoffLimitPerIndex {per_index}: index {ended.index} failed {n_index} "
                            "times -> index failed; the other ranks cannot finish without it -> Job failed",
                            JOB_SOURCE + "backoff_utils.go / indexed_job_utils.go")
        return Decision(RECREATE_POD, who, f"{how}, backoffLimitPerIndex {per_index} ({n_index} of {per_index} used) "
                        f"-> new pod for index {ended.index} after {delay:.0f} s{until}", JOB_SOURCE +
                        "indexed_job_utils.go", delay, awaits_node=waits)
    if total > backoff:
        return Decision(FAIL, who, f"{how}, backoffLimit {backoff}: {total} failed pod{'s' if total != 1 else ''} > "
                        f"{backoff} -> Job failed (BackoffLimitExceeded)", JOB_SOURCE + "job_controller.go syncJob")
    return Decision(RECREATE_POD, who, f"{how}, backoffLimit {backoff} ({total} of {backoff} used) -> new pod for "
                    f"index {ended.index} after {delay:.0f} s (pod failure back-off){until}",
                    JOB_SOURCE + "job_controller.go manageJob", delay, awaits_node=waits)


# kubernetes v1.36.0 pkg/apis/batch/validation/validation.go: maxManagedByLength, and a domain-prefixed path.
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
    for i, rule in enumerate(listing(mapping(js.get("podFailurePolicy")).get("rules"))):
        rule, where = mapping(rule), f"{field}.podFailurePolicy.rules[{i}]"
        codes, conditions = rule.get("onExitCodes"), listing(rule.get("onPodConditions"))
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
        values = [v for v in listing(codes.get("values")) if isinstance(v, int)]
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
    for i, rule in enumerate(rules):
        rule = mapping(rule)
        count, indexes = as_int(rule.get("succeededCount")), rule.get("succeededIndexes")
        if rule.get("succeededCount") is None and indexes is None:
            out.append(Check(f"{where}.rules[{i}]", "rule has neither succeededCount nor succeededIndexes: the API "
                             "server refuses it", "set succeededCount or succeededIndexes"))
        if count is not None and completions is not None and count > completions:
            out.append(Check(f"{where}.rules[{i}].succeededCount", f"succeededCount {count} is above completions "
                             f"{completions}: the API server refuses it", f"set it at most {completions}"))
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


@dataclass
class JobWorkload(Workload):
    """A Job's pods, and what the Job controller reads of its spec."""

    completions: int | None = None
    parallelism: int | None = 1
    completion_mode: Any = "NonIndexed"


class JobLauncher(Launcher[JobWorkload]):
    id = "indexed-job"
    order = 40
    upstream = "kubernetes/kubernetes v1.36.0"
    title = "Indexed Job + headless Service"
    # job_controller.go at v1.36.0: syncJob returns at once for a Job whose managedBy is set and is not
    # batch.JobControllerName (managedByExternalController; JobManagedBy is GA in 1.35), and manageJob creates no pod
    # of a suspended Job (it deletes the active ones).
    managed_by_field = ("spec", "managedBy")
    controller_name = "kubernetes.io/job-controller"
    managed_by_source = "kubernetes v1.36.0 pkg/controller/job/job_controller.go syncJob, managedByExternalController"
    suspend_field = ("spec", "suspend")
    suspend_source = "kubernetes v1.36.0 pkg/controller/job/job_controller.go manageJob, jobSuspended"
    kinds = (("batch", KIND),)
    immutable = ("spec.template", "spec.selector", "spec.completionMode", "spec.completions")
    ttl_field = ("spec", "ttlSecondsAfterFinished")
    scale = ScaleSpec(pods=[(("spec", "completions"), 0), (("spec", "parallelism"), 0)],
                      env_container=("spec", "template", "spec", "containers", 0),
                      resources=[("spec", "template", "spec", "containers", 0, "resources")])

    def build(self, m: Manifest, bundle: Bundle) -> JobWorkload:
        spec = mapping(m.obj.get("spec"))
        return JobWorkload(m, self, [job_group(spec, m.name, "spec.template", "pod", 0)], m.namespace,
                           completions=as_int(spec.get("completions")), parallelism=as_int(spec.get("parallelism"), 1),
                           completion_mode=spec.get("completionMode") or "NonIndexed")

    def pods_field(self, w: Workload) -> str:
        return "spec.completions" if indexed(mapping(w.manifest.obj.get("spec"))) else "spec.parallelism"

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        spec = mapping(m.obj.get("spec"))
        if not indexed(spec):
            return []
        n = max((as_int(spec.get("completions"), 1) or 1) - 1, 0)
        return [("spec.completions", f"{m.name}-{n}", f"the hostname of pod {n}", False)]

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        tmpl = mapping(m.obj.get("spec")).get("template")
        if isinstance(tmpl, dict):
            yield "spec.template", tmpl

    def job_specs(self, m: Manifest, trainer_only: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        spec = m.obj.get("spec")
        if isinstance(spec, dict):
            yield "spec", spec

    def admission(self, w: Workload, bundle: Bundle, torchrun: bool) -> list[Check]:
        spec = mapping(w.manifest.obj.get("spec"))
        return job_validation(spec, "spec") + selector_validation(spec, w.manifest.name)

    def jobs(self, w: Workload) -> tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None:
        return w.manifest, list(self.job_specs(w.manifest)), None

    def startup(self, w: JobWorkload) -> Check | None:
        """Fewer pods running at once than the world needs (the Job controller runs at most `parallelism`), or a
        NonIndexed Job whose pods have no index to take a rank from."""
        if w.completion_mode != INDEXED:
            if w.pods > 1:
                return Check("spec.completionMode", f"completionMode is {w.completion_mode}: the {w.pods} "
                             "pods get no index and no stable hostname", "set completionMode: Indexed")
            return None
        comp, par = w.completions, w.parallelism
        if comp is not None and par is not None and par < comp:
            return Check("spec.parallelism", f"parallelism is {par} but completions is {comp}: not every rank runs "
                         "at the same time", f"set parallelism and completions both to {comp}")
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        return backoff_restarts(self.job_specs(w.manifest))

    def restart_limit(self, w: Workload, losses: int) -> tuple[str, str]:
        return "spec.backoffLimit", ("a Job restarts no torchrun world as a whole: fail it as a whole (RESTART001) and "
                                     "run a world that must survive a lost pod as a JobSet or TrainJob with "
                                     "failurePolicy.maxRestarts, or as a PyTorchJob")

    def after_exit(self, w: Workload, bundle: Bundle, ended: PodExit, count: RestartCount) -> Decision:
        pod = w.pod(ended.index)
        return job_after_exit(mapping(w.manifest.obj.get("spec")), pod.spec, str(pod.container.get("name")), ended,
                              count)

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        spec = m.obj.setdefault("spec", {})
        spec["completions"] = spec["parallelism"] = nodes
        return [f"{m.ref}: completions, parallelism -> {nodes}"]


LAUNCHER = JobLauncher()
