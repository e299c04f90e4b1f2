"""The Kubernetes Job controller (batch/v1 Job, kubernetes v1.36.0, pkg/controller/job/): the pods of an Indexed or
a NonIndexed Job, with the completion index it gives each pod of an Indexed one."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from ..model import Manifest
from .base import (COMPLETION_INDEX, FAIL, IF_ABSENT, RECREATE_POD, Bundle, Check, Decision, Injected, Launcher,
                   PodExit, PodGroup, RestartCount, ScaleSpec, Workload, as_int, dig, kubelet_restarts, listing,
                   mapping)

KIND = "Job"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEXED = "Indexed"
# pkg/apis/batch/validation/validation.go: maxParallelismForIndexedJob and maxCompletionsForIndexedJob
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
    return min(parallelism, completions) if completions is not None else parallelism


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
    """What the kubelet and the Job controller do when a pod of a Job ends with a failure (job_controller.go
    syncJob at v1.36.0). restartPolicy OnFailure: the kubelet restarts the container and the controller counts the
    restarts against backoffLimit (pastBackoffLimitOnFailure). Never, or a deleted pod: the pod failed; the
    podFailurePolicy decides (FailJob, Ignore, Count), then backoffLimitPerIndex or backoffLimit; a replacement pod
    for the index comes after the pod failure back-off."""
    backoff = as_int(job_spec.get("backoffLimit"), DEFAULT_BACKOFF_LIMIT)
    backoff = DEFAULT_BACKOFF_LIMIT if backoff is None else backoff
    per_index = as_int(job_spec.get("backoffLimitPerIndex"))
    spec = {**pod_spec, "restartPolicy": pod_spec.get("restartPolicy") or default_policy or "Never"}
    in_place = kubelet_restarts(spec, ended, count)
    if in_place is not None:
        restarts = count.total_restarts() + count.total_failed() + 1
        if per_index is None and restarts > backoff:
            return Decision(FAIL, who, f"restartPolicy OnFailure, backoffLimit {backoff}: {restarts} restart"
                            f"{'s' if restarts != 1 else ''} > {backoff} -> Job failed (BackoffLimitExceeded)",
                            JOB_SOURCE + "job_controller.go pastBackoffLimitOnFailure")
        in_place.why = f"restartPolicy OnFailure, backoffLimit {backoff} ({restarts} of {backoff} used): " + \
            in_place.why.split(": ", 1)[1]
        return in_place
    how = f"restartPolicy {spec['restartPolicy']}" + (", pod deleted (DisruptionTarget)" if ended.deleted else "")
    rule = matching_failure_rule(job_spec, container, ended)
    policy_source = JOB_SOURCE + "pod_failure_policy.go matchPodFailurePolicy"
    if rule is not None and rule[1] == "FailJob":
        return Decision(FAIL, who, f"{how}, podFailurePolicy rule {rule[0]} FailJob matches exit code "
                        f"{ended.exit_code} -> Job failed", policy_source)
    ignored = rule is not None and rule[1] == "Ignore"
    n_index = count.failed_pods.get(ended.index, 0) + (0 if ignored else 1)
    total = count.total_failed() + (0 if ignored else 1)
    delay = min(POD_FAILURE_BACKOFF * 2 ** max(total - 1, 0), MAX_POD_FAILURE_BACKOFF)
    if ignored:
        return Decision(RECREATE_POD, who, f"{how}, podFailurePolicy rule {rule[0]} Ignore (not counted) -> new pod for "
                        f"index {ended.index}", policy_source, 0.0, counted=False)
    if per_index is not None:
        if n_index > per_index:
            return Decision(FAIL, who, f"{how}, backoffLimitPerIndex {per_index}: index {ended.index} failed {n_index} "
                            "times -> index failed; the other ranks cannot finish without it -> Job failed",
                            JOB_SOURCE + "backoff_utils.go / indexed_job_utils.go")
        return Decision(RECREATE_POD, who, f"{how}, backoffLimitPerIndex {per_index} ({n_index} of {per_index} used) "
                        f"-> new pod for index {ended.index} after {delay:.0f} s", JOB_SOURCE +
                        "indexed_job_utils.go", delay)
    if total > backoff:
        return Decision(FAIL, who, f"{how}, backoffLimit {backoff}: {total} failed pod{'s' if total != 1 else ''} > "
                        f"{backoff} -> Job failed (BackoffLimitExceeded)", JOB_SOURCE + "job_controller.go syncJob")
    return Decision(RECREATE_POD, who, f"{how}, backoffLimit {backoff} ({total} of {backoff} used) -> new pod for "
                    f"index {ended.index} after {delay:.0f} s (pod failure back-off)",
                    JOB_SOURCE + "job_controller.go manageJob", delay)


def job_validation(js: dict[str, Any], field: str) -> list[Check]:
    """What the API server's Job validation refuses that the schema cannot say (pkg/apis/batch/validation/
    validation.go validateJobSpec at v1.36.0)."""
    out: list[Check] = []
    if indexed(js):
        if js.get("completions") is None:
            out.append(Check(f"{field}.completions", "an Indexed Job without completions: the API server refuses it "
                             "(completions is required when completion mode is Indexed)",
                             "set completions to the number of pods"))
        for key in ("completions", "parallelism"):
            value = as_int(js.get(key))
            if value is not None and value > MAX_INDEXED:
                out.append(Check(f"{field}.{key}", f"{key} {value} is above {MAX_INDEXED}: the API server refuses "
                                 "an Indexed Job that large", f"keep {key} at most {MAX_INDEXED}"))
    policy = dig(js, "template", "spec", "restartPolicy")
    if js.get("podFailurePolicy") is not None and policy != "Never":
        out.append(Check(f"{field}.template.spec.restartPolicy", f"restartPolicy is {policy or 'unset'} with a "
                         "podFailurePolicy: the API server accepts only Never there", "set restartPolicy: Never"))
    return out


class JobLauncher(Launcher):
    id = "indexed-job"
    title = "Indexed Job + headless Service"
    kinds = (("batch", KIND),)
    immutable = ("spec.template", "spec.selector", "spec.completionMode", "spec.completions")
    ttl_field = ("spec", "ttlSecondsAfterFinished")
    scale = ScaleSpec(pods=[(("spec", "completions"), 0), (("spec", "parallelism"), 0)],
                      env_container=("spec", "template", "spec", "containers", 0),
                      resources=[("spec", "template", "spec", "containers", 0, "resources")])

    def build(self, m: Manifest, bundle: Bundle) -> Workload:
        spec = mapping(m.obj.get("spec"))
        w = Workload(m, self, [job_group(spec, m.name, "spec.template", "pod", 0)], m.namespace)
        w.facts.update(completions=as_int(spec.get("completions")), parallelism=as_int(spec.get("parallelism"), 1),
                       completion_mode=spec.get("completionMode") or "NonIndexed")
        return w

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
        return job_validation(mapping(w.manifest.obj.get("spec")), "spec")

    def jobs(self, w: Workload) -> tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None:
        return w.manifest, list(self.job_specs(w.manifest)), None

    def startup(self, w: Workload) -> Check | None:
        """Fewer pods running at once than the world needs (the Job controller runs at most `parallelism`), or a
        NonIndexed Job whose pods have no index to take a rank from."""
        f = w.facts
        if f.get("completion_mode") != INDEXED:
            if w.pods > 1:
                return Check("spec.completionMode", f"completionMode is {f.get('completion_mode')}: the {w.pods} "
                             "pods get no index and no stable hostname", "set completionMode: Indexed")
            return None
        comp, par = f.get("completions"), f.get("parallelism")
        if comp is not None and par is not None and par < comp:
            return Check("spec.parallelism", f"parallelism is {par} but completions is {comp}: not every rank runs "
                         "at the same time", f"set parallelism and completions both to {comp}")
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        return backoff_restarts(self.job_specs(w.manifest))

    def after_exit(self, w: Workload, bundle: Bundle, ended: PodExit, count: RestartCount) -> Decision:
        pod = w.pod(ended.index)
        return job_after_exit(mapping(w.manifest.obj.get("spec")), pod.spec, str(pod.container.get("name")), ended,
                              count)

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        spec = m.obj.setdefault("spec", {})
        spec["completions"] = spec["parallelism"] = nodes
        return [f"{m.ref}: completions, parallelism -> {nodes}"]


LAUNCHER = JobLauncher()
