"""JobSet (jobset.x-k8s.io/v1alpha2, kubernetes-sigs/jobset v0.12.0): child Jobs `<jobset>-<replicatedJob>-<index>`,
each run by the Job controller, labelled and annotated by the JobSet controller and published under one headless
Service (pkg/controllers/jobset_controller.go); what its webhook refuses is jobset_webhook.py."""
from __future__ import annotations

import copy
import functools
import hashlib
from typing import Any, Callable, Iterator

from ..kube import admission_classes
from ..kube.admission_classes import PRIORITY_API, admit_priority
from ..kube.values import as_int, dig, listing, mapping
from ..kube.objects import Manifest
from . import indexed_job, job_validation, jobset_webhook
from .base import Bundle, Check, Launcher, ScaleSpec, Workload
from .jobset_webhook import DEFAULT_GROUP
from .lifecycle import FAIL, RECREATE_ALL, WAIT, Decision, PodExit, RestartCount
from .pods import Injected, PodGroup

KIND = "JobSet"
PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = PREFIX + "jobset-name"
REPLICATED_JOB_NAME = PREFIX + "replicatedjob-name"
REPLICATED_JOB_REPLICAS = PREFIX + "replicatedjob-replicas"
GLOBAL_REPLICAS = PREFIX + "global-replicas"
JOB_INDEX = PREFIX + "job-index"
JOB_GLOBAL_INDEX = PREFIX + "job-global-index"
JOB_KEY = PREFIX + "job-key"
GROUP_NAME = PREFIX + "group-name"
GROUP_REPLICAS = PREFIX + "group-replicas"
JOB_GROUP_INDEX = PREFIX + "job-group-index"
RESTART_ATTEMPT = PREFIX + "restart-attempt"
COORDINATOR = PREFIX + "coordinator"
# pod_webhook.go Default: every JobSet pod with a priority gets it as a label (not with the node-selector strategy).
PRIORITY = PREFIX + "priority"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"


def subdomain_of(name: str, spec: dict[str, Any]) -> str | None:
    """The subdomain the controller gives the pods: `network.subdomain`, else the JobSet's name; None with DNS
    hostnames off, where the pod template's own subdomain stays (jobset_controller.go constructJob lines 951-956,
    dnsHostnamesEnabled: the webhook defaults enableDNSHostnames to true)."""
    network = mapping(spec.get("network"))
    if network.get("enableDNSHostnames") is False:
        return None
    return str(network.get("subdomain") or name)


def coordinator_endpoint(name: str, spec: dict[str, Any]) -> str | None:
    """`<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>` of `spec.coordinator` (CoordinatorEndpoint),
    None when no coordinator is set."""
    coord = spec.get("coordinator")
    if not isinstance(coord, dict):
        return None
    sub = str(mapping(spec.get("network")).get("subdomain") or name)
    return (f"{name}-{coord.get('replicatedJob')}-{as_int(coord.get('jobIndex'), 0)}-"
            f"{as_int(coord.get('podIndex'), 0)}.{sub}")


def child_meta(name: str, namespace: str, spec: dict[str, Any], annotations: dict[str, Any],
               replicas: Callable[[dict[str, Any]], int]) -> Callable[[int, int], tuple[dict[str, str], dict[str, str]]]:
    """(labels, annotations) the JobSet controller puts on the pods of child Job `j` of replicated Job `ri`
    (labelAndAnnotateObject at v0.12.0), worked out when asked: a JobSet may ask for 2^31 - 1 child Jobs. The
    jobset-uid is known only in the cluster and left out; job-restart-attempt only comes with the RestartJob feature
    gate, off by default."""
    rjobs = [mapping(r) for r in listing(spec.get("replicatedJobs"))]
    counts = [replicas(r) for r in rjobs]
    groups = [str(r.get("groupName") or DEFAULT_GROUP) for r in rjobs]
    coordinator = coordinator_endpoint(name, spec)
    seen = [sum(counts[:ri]) for ri in range(len(rjobs))]
    before_in_group = [sum(c for c, g in zip(counts[:ri], groups[:ri]) if g == groups[ri]) for ri in range(len(rjobs))]
    in_group = {g: sum(c for c, h in zip(counts, groups) if h == g) for g in groups}

    def meta(ri: int, j: int) -> tuple[dict[str, str], dict[str, str]]:
        rjob, rname, group = rjobs[ri], str(rjobs[ri].get("name")), groups[ri]
        child = f"{name}-{rname}-{j}"
        common = {JOBSET_NAME: name, REPLICATED_JOB_NAME: rname, RESTART_ATTEMPT: "0",
                  REPLICATED_JOB_REPLICAS: str(counts[ri]), GLOBAL_REPLICAS: str(sum(counts)),
                  JOB_INDEX: str(j), JOB_KEY: hashlib.sha1(f"{namespace}/{child}".encode()).hexdigest(),
                  JOB_GLOBAL_INDEX: str(seen[ri] + j), GROUP_NAME: group, GROUP_REPLICAS: str(in_group[group]),
                  JOB_GROUP_INDEX: str(before_in_group[ri] + j)}
        if coordinator:
            common[COORDINATOR] = coordinator
        notes = dict(common)
        rjob_annotations = mapping(dig(rjob, "template", "metadata", "annotations"))
        for source in (annotations, rjob_annotations):
            if EXCLUSIVE in source:
                notes[EXCLUSIVE] = str(source[EXCLUSIVE])
                if NODE_SELECTOR_STRATEGY in source:
                    notes[NODE_SELECTOR_STRATEGY] = str(source[NODE_SELECTOR_STRATEGY])
        return common, notes

    return meta


def pod_priority(pod_spec: dict[str, Any], priorities: dict[str, dict[str, Any]]) -> str | None:
    """The pod's spec.priority after the Priority admission plugin (kube/admission_classes.py admit_priority): its
    own, its PriorityClass's value (a class of the manifests or a system one), the manifests' globalDefault class's
    without a class, else 0 without a class (no globalDefault class on a default cluster); None where only the
    cluster knows it."""
    spec, _ = admit_priority(pod_spec, priorities)
    if spec.get("priority") is not None:
        return str(spec["priority"])
    return None if pod_spec.get("priorityClassName") else "0"


def child_groups(spec: dict[str, Any], name: str, namespace: str, field_prefix: str,
                 annotations: dict[str, Any] | None = None,
                 aux: Callable[[dict[str, Any]], bool] = lambda rjob: False,
                 inject: Callable[[str, int, int, str, bool], list[Injected]] | None = None,
                 replicas: Callable[[dict[str, Any]], int] | None = None,
                 priorities: dict[str, dict[str, Any]] | None = None) -> list[PodGroup]:
    """The pods of every child Job of a JobSet spec, in replicated-Job order (jobset_controller.go constructJobs):
    child Job `<jobset>-<replicatedJob>-<index>`, its pod template labelled and annotated by the JobSet controller
    and its subdomain forced to the JobSet's where DNS hostnames are on; the webhook defaults completionMode to
    Indexed only where it is unset. One group per replicated Job, its pods child Job after child Job, each pod's
    child Job worked out from its index (replicas may be 2^31 - 1). `aux(rjob)` marks pods outside the training
    world; `inject(rjob, job_index, pod_index, container, init)` adds a caller's env (the Trainer's)."""
    count_of = replicas or (lambda r: as_int(r.get("replicas"), 1) or 0)
    subdomain = subdomain_of(name, spec)
    meta = child_meta(name, namespace, spec, annotations or {}, count_of)
    groups: list[PodGroup] = []
    offset = 0
    for ri, rjob in enumerate(listing(spec.get("replicatedJobs"))):
        rjob = mapping(rjob)
        g = _replicated_job_group(rjob, ri, name, count_of(rjob), f"{field_prefix}.replicatedJobs[{ri}].template.spec"
                                  ".template", offset, meta, inject, priorities or {})
        # With DNS hostnames off the controller leaves the template's own subdomain alone (constructJob sets it
        # only under dnsHostnamesEnabled).
        g.subdomain, g.subdomain_forced, g.aux = subdomain, subdomain is not None, aux(rjob)
        groups.append(g)
        if not g.aux:
            offset += g.count
    return groups


def _replicated_job_group(rjob: dict[str, Any], ri: int, name: str, jobs: int, template_field: str, offset: int,
                          meta: Callable[[int, int], tuple[dict[str, str], dict[str, str]]],
                          inject: Callable[[str, int, int, str, bool], list[Injected]] | None,
                          priorities: dict[str, dict[str, Any]]) -> PodGroup:
    """The pods of a replicated Job's `jobs` child Jobs: pod `i` is pod `i % per_job` of child Job `i // per_job`,
    which the Job controller makes as it makes any Job's (indexed_job.job_group)."""
    rname = str(rjob.get("name"))
    js = dict(mapping(dig(rjob, "template", "spec")))
    js.setdefault("completionMode", job_validation.INDEXED)
    per_job = indexed_job.job_pods(js)
    priority = pod_priority(mapping(dig(js, "template", "spec")), priorities)

    @functools.lru_cache(maxsize=64)
    def child(j: int) -> PodGroup:
        labels, notes = meta(ri, j)
        if priority is not None and NODE_SELECTOR_STRATEGY not in notes:
            labels = {**labels, PRIORITY: priority}
        return indexed_job.job_group(js, f"{name}-{rname}-{j}", template_field, rname, 0,
                                     labels=lambda i: labels, annotations=lambda i: notes)

    def pod_name(i: int) -> str:
        return child(i // per_job).name(i % per_job)

    def pod_inject(i: int, container: str, init: bool) -> list[Injected]:
        j, k = divmod(i, per_job)
        return child(j).inject(k, container, init) + (inject(rname, j, k, container, init) if inject else [])

    is_indexed = job_validation.indexed(js)
    return PodGroup(
        role=rname, count=jobs * per_job, offset=offset, template=mapping(js.get("template")),
        template_field=template_field, name=pod_name,
        # Indexed: `<child job>-<index>`, forced; NonIndexed: no stable hostname, the generated pod name.
        hostname=(lambda i: child(i // per_job).hostname(i % per_job)) if is_indexed else pod_name,
        hostname_forced=is_indexed,
        labels=lambda i: child(i // per_job).labels(i % per_job),
        annotations=lambda i: child(i // per_job).annotations(i % per_job),
        inject=pod_inject)


def validation(name: str, spec: dict[str, Any], prefix: str = "spec") -> list[Check]:
    """What the JobSet webhook refuses (jobset_webhook.py), the coordinator's endpoint as this controller makes it."""
    return jobset_webhook.validation(name, spec, prefix, coordinator_endpoint(name, spec))


def priority_classes(bundle: Bundle) -> dict[str, dict[str, Any]]:
    """The PriorityClasses the Priority plugin would find: the system ones and the manifests'."""
    return admission_classes.priority_classes([m.obj for m in bundle.manifests
                                               if m.kind == "PriorityClass" and m.api_version == PRIORITY_API])


def service(name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The headless Service the controller creates when DNS hostnames are on (jobset_controller.go createHeadless
    SvcIfNecessary): named after the subdomain, selecting the JobSet's pods by its name."""
    sub = subdomain_of(name, spec)
    if sub is None:
        return []
    publish = mapping(spec.get("network")).get("publishNotReadyAddresses")
    return [{"name": sub, "clusterIP": "None", "selector": {JOBSET_NAME: name},
             "publishNotReadyAddresses": publish is not False}]


class JobSetLauncher(Launcher[Workload]):
    id = "jobset"
    order = 30
    upstream = "kubernetes-sigs/jobset v0.12.0"
    title = "JobSet"
    managed_by_field = ("spec", "managedBy")
    controller_name = "jobset.sigs.k8s.io/jobset-controller"  # api/jobset/v1alpha2/jobset_types.go:59
    managed_by_source = "kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go:144, 1177"
    suspend_field = ("spec", "suspend")
    # jobset_controller.go:969 constructJob writes the JobSet's suspend into every child Job; 234 suspendJobs
    suspend_source = "kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go:969, 234"
    kinds = (("jobset.x-k8s.io", KIND),)
    # v1alpha1 is served only by jobset v0.1.x, whose pods take the subdomain `<jobset>-<replicatedJob>` (v0.1.2
    # pkg/controllers/jobset_controller.go 289-293, 467-470, 575-577), not `<jobset>`: not read as v1alpha2.
    unread_versions = ("v1alpha1",)
    # Kueue's integration for it (FrameworkName, kubernetes-sigs/kueue v0.19.2
    # pkg/controller/jobs/jobset/jobset_controller.go:44)
    kueue_framework = "jobset.x-k8s.io/jobset"
    feature_gates = jobset_webhook.FEATURE_GATES
    managed_dns = True
    immutable = ("spec.replicatedJobs",)
    ttl_field = ("spec", "ttlSecondsAfterFinished")
    scale = ScaleSpec(
        pods=[(("spec", "replicatedJobs", 0, "template", "spec", "completions"), 0),
              (("spec", "replicatedJobs", 0, "template", "spec", "parallelism"), 0)],
        env_container=("spec", "replicatedJobs", 0, "template", "spec", "template", "spec", "containers", 0),
        resources=[("spec", "replicatedJobs", 0, "template", "spec", "template", "spec", "containers", 0,
                    "resources")])

    def build(self, m: Manifest, bundle: Bundle) -> Workload:
        spec = mapping(m.obj.get("spec"))
        w = Workload(m, self, child_groups(spec, m.name, m.namespace, "spec", m.metadata.get("annotations") or {},
                                           priorities=priority_classes(bundle)), m.namespace)
        return w

    def services(self, w: Workload) -> list[dict[str, Any]]:
        return service(w.manifest.name, mapping(w.manifest.obj.get("spec")))

    def pods_field(self, w: Workload) -> str:
        return "spec.replicatedJobs"

    def dns_field(self, w: Workload, pod: Any) -> str:
        return "spec.network.subdomain"

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        spec = mapping(m.obj.get("spec"))
        sub = subdomain_of(m.name, spec)
        field_path = "spec.network.subdomain" if mapping(spec.get("network")).get("subdomain") else "metadata.name"
        return [(field_path, sub, "the headless Service the controller creates", True)] if sub else []

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        for field_path, js in self.job_specs(m):
            if isinstance(js.get("template"), dict):
                yield f"{field_path}.template", js["template"]

    def job_specs(self, m: Manifest, trainer_only: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        for i, rj in enumerate(listing(dig(m.obj, "spec", "replicatedJobs"))):
            js = dig(rj, "template", "spec")
            if isinstance(js, dict):
                yield f"spec.replicatedJobs[{i}].template.spec", js

    def defaulted(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The webhook names each unnamed failure policy rule `failurePolicyRule<i>` (v0.12.0 jobset_webhook.go
        Default, lines 140-148, defaultRuleNameFmt line 79) before the API server checks the CRD, which requires
        `name` (api/jobset/v1alpha2/jobset_types.go line 446, `json:"name"`): upstream's failure-policy examples
        leave it out and run."""
        rules = listing(dig(obj, "spec", "failurePolicy", "rules"))
        if all(not isinstance(r, dict) or r.get("name") for r in rules):
            return obj
        out = copy.deepcopy(obj)
        for i, rule in enumerate(out["spec"]["failurePolicy"]["rules"]):
            if isinstance(rule, dict) and not rule.get("name"):
                rule["name"] = f"failurePolicyRule{i}"
        return out

    def admission(self, w: Workload, bundle: Bundle, torchrun: bool) -> list[Check]:
        # With generateName the API server picks the name (5 characters after the prefix) before the webhook runs.
        # With generateName the API server picks the name before the webhook runs (Manifest.created_name).
        return validation(w.manifest.created_name, mapping(w.manifest.obj.get("spec")))

    def jobs(self, w: Workload) -> tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None:
        return w.manifest, list(self.job_specs(w.manifest)), "OnFailure"

    def publishes_not_ready(self, w: Workload) -> Check | None:
        if mapping(dig(w.manifest.obj, "spec", "network")).get("publishNotReadyAddresses") is False:
            return Check("spec.network.publishNotReadyAddresses", "JobSet publishes only Ready pods: peers cannot "
                         "resolve pod 0 until it is Ready", "remove it, or set it to true")
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        return job_restarts(self.job_specs(w.manifest), mapping(w.manifest.obj.get("spec")))

    def restart_limit(self, w: Workload, losses: int) -> tuple[str, str]:
        return "spec.failurePolicy.maxRestarts", (f"set failurePolicy.maxRestarts to {losses} or more: every Job is "
                                                  "recreated after a lost pod")

    def after_exit(self, w: Workload, bundle: Bundle, ended: PodExit, count: RestartCount) -> Decision:
        return jobset_after_exit(w, self.jobs(w), mapping(w.manifest.obj.get("spec")), ended, count)

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        for _, js in self.job_specs(m):
            js["completions"] = js["parallelism"] = nodes
        return [f"{m.ref}: completions, parallelism -> {nodes}"]


def job_restarts(job_specs: Iterator[tuple[str, dict[str, Any]]], jobset_spec: dict[str, Any]) -> list[str]:
    """What restarts a JobSet's world: a Job's backoffLimit and the JobSet's failurePolicy.maxRestarts."""
    why = indexed_job.backoff_restarts(job_specs)
    max_restarts = mapping(jobset_spec.get("failurePolicy")).get("maxRestarts")
    if isinstance(max_restarts, int) and max_restarts > 0:
        why.append(f"failurePolicy.maxRestarts {max_restarts}")
    return why


# jobset v0.12.0 pkg/controllers/failure_policy.go: no failurePolicy fails the JobSet on its first failed Job (line
# 53); otherwise the first matching rule's action, by default RestartJobSet (line 45), which recreates every child
# Job (failurePolicyRecreateAll) until restarts reach maxRestarts (restartJobSetActionApplier, line 226).
JOBSET_SOURCE = "jobset v0.12.0 pkg/controllers/failure_policy.go"


def jobset_after_exit(w: Workload, jobs: tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None,
                      jobset_spec: dict[str, Any], ended: PodExit, count: RestartCount,
                      who: str = "JobSet controller") -> Decision:
    """The child Job's controller first (indexed_job.job_after_exit); a failed child Job then meets the JobSet's
    failurePolicy."""
    if jobs is None:
        return Decision(WAIT, who, "no Job found for the pod: nothing modelled restarts it", JOBSET_SOURCE)
    pod = w.pod(ended.index)
    group, _ = w.group_at(ended.index)
    _, sites, default_policy = jobs
    job_spec = next((js for f, js in sites if group.template_field.removeprefix("(runtime) ").startswith(f)),
                    sites[0][1] if sites else {})
    local = RestartCount({0: count.container_restarts.get(ended.index, 0)}, {0: count.failed_pods.get(ended.index, 0)})
    job = indexed_job.job_after_exit(job_spec, pod.spec, str(pod.container.get("name")),
                                     PodExit(0, ended.exit_code, ended.deleted, ended.node_lost), local, default_policy)
    if job.action != FAIL:
        return job
    who = f"{job.controller} + {who}"
    policy = jobset_spec.get("failurePolicy")
    if not isinstance(policy, dict):
        return Decision(FAIL, who, f"{job.why}; no failurePolicy -> JobSet failed", JOBSET_SOURCE + ":53")
    reason = "PodFailurePolicy" if "podFailurePolicy" in job.why else "BackoffLimitExceeded"
    action, rule_name = "RestartJobSet", None
    for rule in listing(policy.get("rules")):
        rule = mapping(rule)
        reasons = listing(rule.get("onJobFailureReasons"))
        targets = listing(rule.get("targetReplicatedJobs"))
        if (not reasons or reason in reasons) and (not targets or group.role in targets):
            action, rule_name = str(rule.get("action")), str(rule.get("name"))
            break
    via = f"failurePolicy rule {rule_name}: {action}" if rule_name else "failurePolicy"
    max_restarts = as_int(policy.get("maxRestarts"), 0) or 0
    if action == "FailJobSet":
        return Decision(FAIL, who, f"{job.why}; {via} -> JobSet failed", JOBSET_SOURCE + ":215")
    if action == "RestartJobSetAndIgnoreMaxRestarts":
        return Decision(RECREATE_ALL, who, f"{job.why}; {via} -> every Job recreated (not counted)",
                        JOBSET_SOURCE + ":267", counted=False)
    if count.workload_restarts >= max_restarts:
        return Decision(FAIL, who, f"{job.why}; {via}, maxRestarts {max_restarts} ({count.workload_restarts} "
                        "used) -> JobSet failed (ReachedMaxRestarts)", JOBSET_SOURCE + ":226")
    return Decision(RECREATE_ALL, who, f"{job.why}; {via}, maxRestarts {max_restarts} (restart "
                    f"{count.workload_restarts + 1} of {max_restarts}) -> every Job recreated", JOBSET_SOURCE + ":226")


LAUNCHER = JobSetLauncher()
