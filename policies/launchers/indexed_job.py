"""The Kubernetes Job controller (batch/v1 Job, kubernetes v1.36.0, pkg/controller/job/): the pods of an Indexed or
a NonIndexed Job, with the completion index it gives each pod of an Indexed one."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..kube.values import as_int, dig, listing, mapping
from ..kube.objects import MAX_GENERATED_NAME, Manifest
from .base import Bundle, Check, Launcher, ScaleSpec, Workload
from .job_validation import INDEXED, JOB_NAME_LABELS, UID_LABELS, indexed, job_validation, selector_validation
from .lifecycle import FAIL, RECREATE_POD, Decision, PodExit, RestartCount, completed, kubelet_restarts
from .pods import COMPLETION_INDEX, IF_ABSENT, Injected, PodGroup

KIND = "Job"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"


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
        in_place.head = lambda: f"restartPolicy OnFailure, backoffLimit {backoff} ({restarts} of {backoff} counted)"
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
    # Kueue's integration for it (FrameworkName, kubernetes-sigs/kueue v0.19.2
    # pkg/controller/jobs/job/job_controller.go:55)
    kueue_framework = "batch/job"
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
        # ValidateJob (pkg/apis/batch/validation/validation.go, v1.36.0) refuses the Job itself, naming metadata.name:
        # "will not able to create pod with invalid DNS label: <name>-<completions-1>".
        return [("metadata.name", f"{m.name}-{n}", f"the hostname of pod {n}", False)]

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
