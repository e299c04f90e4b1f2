"""JobSet (jobset.x-k8s.io/v1alpha2, kubernetes-sigs/jobset v0.12.0): child Jobs `<jobset>-<replicatedJob>-<index>`,
each run by the Job controller, labelled and annotated by the JobSet controller and published under one headless
Service (pkg/controllers/jobset_controller.go, pkg/webhooks/jobset_webhook.go)."""
from __future__ import annotations

import copy
import functools
import hashlib
import re
from typing import Any, Callable, Iterator

from ..kube import DNS1035, DNS1123_SUBDOMAIN, as_int, dig, listing, mapping
from ..model import WARNING, Manifest
from . import indexed_job
from .base import Bundle, Check, Launcher, ScaleSpec, Workload
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
DEFAULT_GROUP = "default"


def subdomain_of(name: str, spec: dict[str, Any]) -> str | None:
    """The subdomain the pods get: `network.subdomain`, else the JobSet's name; None with DNS hostnames off
    (jobset_controller.go constructJob, dnsHostnamesEnabled: the webhook defaults enableDNSHostnames to true)."""
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


def pod_priority(pod_spec: dict[str, Any], priorities: dict[str, str]) -> str | None:
    """The pod's spec.priority after the Priority admission plugin: its own, its PriorityClass's value (where the
    class is among the manifests), 0 without a class (no globalDefault class on a default cluster); None where only
    the cluster knows it."""
    if pod_spec.get("priority") is not None:
        return str(pod_spec["priority"])
    cls = pod_spec.get("priorityClassName")
    if not cls:
        return "0"
    return priorities.get(str(cls))


def child_groups(spec: dict[str, Any], name: str, namespace: str, field_prefix: str,
                 annotations: dict[str, Any] | None = None,
                 aux: Callable[[dict[str, Any]], bool] = lambda rjob: False,
                 inject: Callable[[str, int, int, str, bool], list[Injected]] | None = None,
                 replicas: Callable[[dict[str, Any]], int] | None = None,
                 priorities: dict[str, str] | None = None) -> list[PodGroup]:
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
        g.subdomain, g.subdomain_forced, g.aux = subdomain, True, aux(rjob)
        groups.append(g)
        if not g.aux:
            offset += g.count
    return groups


def _replicated_job_group(rjob: dict[str, Any], ri: int, name: str, jobs: int, template_field: str, offset: int,
                          meta: Callable[[int, int], tuple[dict[str, str], dict[str, str]]],
                          inject: Callable[[str, int, int, str, bool], list[Injected]] | None,
                          priorities: dict[str, str]) -> PodGroup:
    """The pods of a replicated Job's `jobs` child Jobs: pod `i` is pod `i % per_job` of child Job `i // per_job`,
    which the Job controller makes as it makes any Job's (indexed_job.job_group)."""
    rname = str(rjob.get("name"))
    js = dict(mapping(dig(rjob, "template", "spec")))
    js.setdefault("completionMode", indexed_job.INDEXED)
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

    is_indexed = indexed_job.indexed(js)
    return PodGroup(
        role=rname, count=jobs * per_job, offset=offset, template=mapping(js.get("template")),
        template_field=template_field, name=pod_name,
        # Indexed: `<child job>-<index>`, forced; NonIndexed: no stable hostname, the generated pod name.
        hostname=(lambda i: child(i // per_job).hostname(i % per_job)) if is_indexed else pod_name,
        hostname_forced=is_indexed,
        labels=lambda i: child(i // per_job).labels(i % per_job),
        annotations=lambda i: child(i // per_job).annotations(i % per_job),
        inject=pod_inject)


MAX_INT32 = 2**31 - 1  # jobset_webhook.go ValidateCreate lines 218-225 at v0.12.0: replicas x parallelism per Job
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _dns1035(value: str) -> str | None:
    if len(value) > 63:
        return f"'{value}' is {len(value)} characters, more than 63"
    if not DNS1035.match(value):
        return f"'{value}' is not a DNS-1035 label (lowercase letters, digits and '-', starting with a letter)"
    return None


def validation(name: str, spec: dict[str, Any], prefix: str = "spec") -> list[Check]:
    """What the JobSet webhook refuses (pkg/webhooks/jobset_webhook.go ValidateCreate at v0.12.0), after its
    defaulting (completionMode Indexed where unset): subdomain, group, Job and pod names that are not DNS-1035
    labels of at most 63 characters, a coordinator that names no pod, or one whose label value is invalid."""
    out: list[Check] = []
    network = mapping(spec.get("network"))
    if network.get("subdomain"):
        why = _dns1035(str(network["subdomain"]))
        if why:
            out.append(Check(f"{prefix}.network.subdomain", f"subdomain {why}: the JobSet webhook refuses it "
                             "(it names the headless Service)", "use a shorter lowercase subdomain"))
    rjobs = [mapping(r) for r in listing(spec.get("replicatedJobs"))]
    for ri, rjob in enumerate(rjobs):
        where = f"{prefix}.replicatedJobs[{ri}]"
        group = str(rjob.get("groupName") or DEFAULT_GROUP)
        why = _dns1035(group)
        if why:
            out.append(Check(f"{where}.groupName", f"groupName {why}: the JobSet webhook refuses it",
                             "use a lowercase group name of at most 63 characters"))
        replicas = as_int(rjob.get("replicas"), 1) or 1
        parallelism = as_int(dig(rjob, "template", "spec", "parallelism"), 1)
        if parallelism is not None and parallelism * replicas > MAX_INT32:
            out.append(Check(f"{where}.replicas", f"replicas {replicas} x parallelism {parallelism} is more than "
                             f"{MAX_INT32}: the JobSet webhook refuses it (the product of replicas and parallelism "
                             "must not exceed 2147483647)", "lower replicas or parallelism"))
        job = f"{name}-{rjob.get('name')}-{replicas - 1}"
        why = _dns1035(job)
        if why:
            out.append(Check(f"{where}.name", f"child Job name {why}: the JobSet webhook refuses it",
                             "shorten the JobSet or replicated Job name"))
        js = mapping(dig(rjob, "template", "spec"))
        completions = as_int(js.get("completions"))
        if (js.get("completionMode") or indexed_job.INDEXED) == indexed_job.INDEXED and completions is not None:
            pod = f"{job}-{completions - 1}-abcde"
            why = _dns1035(pod)
            if why:
                out.append(Check(f"{where}.name", f"pod name {why}: the JobSet webhook refuses it",
                                 "shorten the JobSet or replicated Job name"))
        out += indexed_job.job_validation(js, f"{where}.template.spec")
    coord = spec.get("coordinator")
    if isinstance(coord, dict):
        target = next((r for r in rjobs if r.get("name") == coord.get("replicatedJob")), None)
        job_index, pod_index = as_int(coord.get("jobIndex"), 0) or 0, as_int(coord.get("podIndex"), 0) or 0
        why = None
        if target is None:
            why = f"coordinator replicatedJob {coord.get('replicatedJob')} does not exist"
        elif not 0 <= job_index < (as_int(target.get("replicas"), 1) or 1):
            why = f"coordinator job index {job_index} is invalid for replicatedJob {target.get('name')}"
        else:
            tjs = mapping(dig(target, "template", "spec"))
            completions = as_int(tjs.get("completions"))
            if completions is None or (tjs.get("completionMode") or indexed_job.INDEXED) != indexed_job.INDEXED:
                why = "job for coordinator pod must be indexed completion mode, and completions number must be set"
            elif not 0 <= pod_index < completions:
                why = f"coordinator pod index {pod_index} is invalid for replicatedJob {target.get('name')}"
        if why is None:
            endpoint = coordinator_endpoint(name, spec) or ""
            if len(endpoint) > 63 or not LABEL_VALUE.match(endpoint):
                why = f"coordinator endpoint '{endpoint}' is not a valid label value (at most 63 characters)"
        if why:
            out.append(Check(f"{prefix}.coordinator", f"{why}: the JobSet webhook refuses it",
                             "point the coordinator at an existing pod, with names short enough"))
    return (out + _managed_by(spec, prefix) + _failure_rules(spec, prefix) + _order_and_targets(spec, rjobs, prefix)
            + _volume_claims(name, spec, rjobs, prefix))


def _managed_by(spec: dict[str, Any], prefix: str) -> list[Check]:
    """spec.managedBy (v0.12.0 jobset_webhook.go ValidateCreate, lines 200-210): the same domain-prefixed path of at
    most 63 characters the Job API asks (indexed_job.managed_by_problems)."""
    if spec.get("managedBy") is None:
        return []
    manager = str(spec["managedBy"])
    return [Check(f"{prefix}.managedBy", f"managedBy '{manager}' {why}: the JobSet webhook refuses it",
                  "leave managedBy out (the JobSet controller), or name a controller like example.com/my-controller")
            for why in indexed_job.managed_by_problems(manager)]


# v0.12.0 jobset_webhook.go: failure policy rule names (lines 416-418) and the Job failure reasons a rule may match
# (validOnJobFailureReasons, lines 85-91: batch/v1's JobReason* constants).
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
MAX_RULE_NAME = 128
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                       "PodFailurePolicy")


def _failure_rules(spec: dict[str, Any], prefix: str) -> list[Check]:
    """failurePolicy.rules (v0.12.0 jobset_webhook.go validateFailurePolicy, lines 455-492): each name 1 to 128
    characters matching RULE_NAME and unique, each onJobFailureReasons entry a Job failure reason. Names are
    checked after the webhook's Default names unnamed rules failurePolicyRule<i> (lines 140-148)."""
    out: list[Check] = []
    first: dict[str, int] = {}
    for i, rule in enumerate(listing(mapping(spec.get("failurePolicy")).get("rules"))):
        rule = mapping(rule)
        where = f"{prefix}.failurePolicy.rules[{i}]"
        rname = str(rule.get("name") or f"failurePolicyRule{i}")
        if len(rname) > MAX_RULE_NAME:
            out.append(Check(f"{where}.name", f"failure policy rule name is {len(rname)} characters, more than "
                             f"{MAX_RULE_NAME}: the JobSet webhook refuses it", "shorten the rule name"))
        if not RULE_NAME.match(rname):
            out.append(Check(f"{where}.name", f"failure policy rule name '{rname}' does not start with a letter and "
                             "end with a letter, digit or '_' (only letters, digits and '_,:' between): the JobSet "
                             "webhook refuses it", "rename the rule, e.g. restartOnBackoff"))
        if rname in first:
            out.append(Check(f"{where}.name", f"failure policy rule name '{rname}' is also rules[{first[rname]}]'s: "
                             "the JobSet webhook refuses rule names that are not unique", "give each rule its own name"))
        first.setdefault(rname, i)
        for j, reason in enumerate(listing(rule.get("onJobFailureReasons"))):
            if reason not in JOB_FAILURE_REASONS:
                out.append(Check(f"{where}.onJobFailureReasons[{j}]", f"'{reason}' is not a Job failure reason: the "
                                 "JobSet webhook refuses it", f"use one of {', '.join(JOB_FAILURE_REASONS)}"))
    return out


def _order_and_targets(spec: dict[str, Any], rjobs: list[dict[str, Any]], prefix: str) -> list[Check]:
    """dependsOn, startupPolicy and the replicated Jobs the success and failure policies name (v0.12.0:
    jobset_webhook.go ValidateCreate lines 177-180 and 258-263, the success policy at 284-289, validateFailurePolicy
    at 425; the CRD's CEL rule api/jobset/v1alpha2/jobset_types.go line 120, which the API server applies)."""
    out: list[Check] = []
    if rjobs and rjobs[0].get("dependsOn") is not None:
        out.append(Check(f"{prefix}.replicatedJobs[0].dependsOn", "the first replicated Job has dependsOn: the JobSet "
                         "webhook refuses it (DependsOn can't be set for the first ReplicatedJob)",
                         "remove dependsOn from the first replicated Job, or list it after the one it waits for"))
    seen: set[str] = set()
    for ri, rjob in enumerate(rjobs):
        seen.add(str(rjob.get("name")))  # the webhook adds a Job's own name before it checks that Job's dependsOn
        for di, dep in enumerate(listing(rjob.get("dependsOn"))):
            target = str(mapping(dep).get("name"))
            if target not in seen:
                out.append(Check(f"{prefix}.replicatedJobs[{ri}].dependsOn[{di}].name",
                                 f"replicatedJob {rjob.get('name')} depends on {target}, which is not listed before "
                                 "it: the JobSet webhook refuses it",
                                 "depend only on a replicated Job listed earlier in spec.replicatedJobs"))
    if (mapping(spec.get("startupPolicy")).get("startupPolicyOrder") == "InOrder"
            and any(r.get("dependsOn") is not None for r in rjobs)):
        out.append(Check(f"{prefix}.startupPolicy", "startupPolicy InOrder together with dependsOn: the API server "
                         "refuses it (StartupPolicy and DependsOn APIs are mutually exclusive)",
                         "drop startupPolicy (deprecated) and order the Jobs with dependsOn"))
    # Alpha gates, off by default (pkg/features/features.go lines 69 and 73 at v0.12.0): without them the webhook
    # refuses these (ValidateCreate lines 169-175, validateFailurePolicy lines 441-444); a cluster may turn them on.
    gated = [(f"{prefix}.failurePolicy.rules[{i}].action", f"action {mapping(rule).get('action')}", "RestartJob")
             for i, rule in enumerate(listing(mapping(spec.get("failurePolicy")).get("rules")))
             if mapping(rule).get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts")]
    if mapping(spec.get("failurePolicy")).get("restartStrategy") == "InPlaceRestart":
        gated.append((f"{prefix}.failurePolicy.restartStrategy", "restartStrategy InPlaceRestart", "InPlaceRestart"))
    for where, what, gate in gated:
        out.append(Check(where, f"{what} needs the JobSet feature gate {gate} (alpha, off by default): without it "
                         "the webhook refuses the JobSet", f"run the JobSet controller with --feature-gates={gate}=true, "
                         "or use RestartJobSet", severity=WARNING))
    names = {str(r.get("name")) for r in rjobs}
    targets = [(f"{prefix}.successPolicy.targetReplicatedJobs",
                listing(mapping(spec.get("successPolicy")).get("targetReplicatedJobs")))]
    targets += [(f"{prefix}.failurePolicy.rules[{i}].targetReplicatedJobs",
                 listing(mapping(rule).get("targetReplicatedJobs")))
                for i, rule in enumerate(listing(mapping(spec.get("failurePolicy")).get("rules")))]
    for where, listed in targets:
        for j, target in enumerate(listed):
            if str(target) not in names:
                out.append(Check(f"{where}[{j}]", f"replicatedJob '{target}' does not appear in spec.replicatedJobs: "
                                 "the JobSet webhook refuses it", "name a replicated Job of this JobSet"))
    return out


MAX_VOLUME_CLAIM_NAME = 63  # jobset_webhook.go maxVolumeClaimLength at v0.12.0


def _volume_claims(name: str, spec: dict[str, Any], rjobs: list[dict[str, Any]], prefix: str) -> list[Check]:
    """volumeClaimPolicies (v0.12.0 jobset_webhook.go validateVolumeClaimPolicies and
    validateReplicatedJobsVolumeClaims, lines 536-656): each template name is unique and a DNS-1123 subdomain, its
    claim `<template>-<jobset>` (controllers.GeneratePVCName) has at most 63 characters, no replicated Job
    declares a pod volume of that name, and some container or init container mounts it (the controller adds the
    volume to those Jobs only, volume_claim_policy.go addVolumes, line 80). Whether a claim of that name already
    exists with another spec is the cluster's state, not the file's, and is not checked."""
    out: list[Check] = []
    pods = [mapping(dig(r, "template", "spec", "template", "spec")) for r in rjobs]
    seen: set[str] = set()
    for pi, policy in enumerate(listing(spec.get("volumeClaimPolicies"))):
        for ti, template in enumerate(listing(mapping(policy).get("templates"))):
            where = f"{prefix}.volumeClaimPolicies[{pi}].templates[{ti}].metadata.name"
            claim = str(mapping(mapping(template).get("metadata")).get("name") or "")
            why = None
            if claim in seen:
                why = f"claim template name '{claim}' is used twice"
            elif len(claim) > 253 or not DNS1123_SUBDOMAIN.match(claim):
                why = f"claim template name '{claim}' is not a DNS-1123 subdomain"
            elif len(f"{claim}-{name}") > MAX_VOLUME_CLAIM_NAME:
                why = f"claim name '{claim}-{name}' is more than {MAX_VOLUME_CLAIM_NAME} characters"
            seen.add(claim)
            if why:
                out.append(Check(where, f"{why}: the JobSet webhook refuses it",
                                 "give each claim template a short, unique lowercase name"))
            for ri, pod in enumerate(pods):
                for vi, vol in enumerate(listing(pod.get("volumes"))):
                    if mapping(vol).get("name") == claim:
                        out.append(Check(f"{prefix}.replicatedJobs[{ri}].template.spec.template.spec.volumes[{vi}]"
                                         ".name", f"pod volume '{claim}' has the name of a volumeClaimPolicies "
                                         "template: the JobSet webhook refuses it",
                                         "remove the pod volume (the controller adds the claim) or rename it"))
            mounted = any(mapping(mt).get("name") == claim
                          for pod in pods for c in listing(pod.get("containers")) + listing(pod.get("initContainers"))
                          for mt in listing(mapping(c).get("volumeMounts")))
            if not mounted:
                out.append(Check(where, f"no container mounts claim template '{claim}': the JobSet webhook refuses "
                                 "it", f"add a volumeMount named {claim} where the claim is used, or drop the "
                                 "template"))
    return out


def priority_classes(bundle: Bundle) -> dict[str, str]:
    return {m.name: str(m.obj.get("value")) for m in bundle.manifests
            if m.kind == "PriorityClass" and m.obj.get("value") is not None}


def service(name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The headless Service the controller creates when DNS hostnames are on (jobset_controller.go createHeadless
    SvcIfNecessary): named after the subdomain, selecting the JobSet's pods by its name."""
    sub = subdomain_of(name, spec)
    if sub is None:
        return []
    publish = mapping(spec.get("network")).get("publishNotReadyAddresses")
    return [{"name": sub, "clusterIP": "None", "selector": {JOBSET_NAME: name},
             "publishNotReadyAddresses": publish is not False}]


class JobSetLauncher(Launcher):
    id = "jobset"
    order = 30
    upstream = "kubernetes-sigs/jobset v0.12.0"
    title = "JobSet"
    kinds = (("jobset.x-k8s.io", KIND),)
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
        w.suspended = spec.get("suspend") is True
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
        m = w.manifest
        name = m.name or (str(m.metadata.get("generateName") or "") + "abcde")
        return validation(name, mapping(m.obj.get("spec")))

    def jobs(self, w: Workload) -> tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None:
        return w.manifest, list(self.job_specs(w.manifest)), "OnFailure"

    def publishes_not_ready(self, w: Workload) -> Check | None:
        if mapping(dig(w.manifest.obj, "spec", "network")).get("publishNotReadyAddresses") is False:
            return Check("spec.network.publishNotReadyAddresses", "JobSet publishes only Ready pods: peers cannot "
                         "resolve pod 0 until it is Ready", "remove it, or set it to true")
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        return job_restarts(self.job_specs(w.manifest), mapping(w.manifest.obj.get("spec")))

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
                                     PodExit(0, ended.exit_code, ended.deleted), local, default_policy)
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
