"""The JobSet webhook (pkg/webhooks/jobset_webhook.go ValidateCreate at kubernetes-sigs/jobset v0.12.0): what it
refuses about a JobSet, kept apart from the controller's model (jobset.py) as upstream keeps them."""
from __future__ import annotations

import re
from typing import Any

from ..kube.values import DNS1035, DNS1123_SUBDOMAIN, LABEL_VALUE, as_int, dig, listing, mapping
from ..kube.objects import WARNING
from . import job_validation
from .base import Check

# The controller's feature gates and their defaults: kubernetes-sigs/jobset v0.12.0 pkg/features/features.go:68-76
# (defaultFeatureGates; InPlaceRestart, RestartJob and ElasticJobSet alpha, TLSOptions beta).
FEATURE_GATES = {"InPlaceRestart": False, "TLSOptions": True, "RestartJob": False, "ElasticJobSet": False}
DEFAULT_GROUP = "default"  # a replicated Job's groupName where unset (the controller uses it too)
MAX_INT32 = 2**31 - 1  # jobset_webhook.go ValidateCreate lines 218-225 at v0.12.0: replicas x parallelism per Job


def _dns1035(value: str) -> str | None:
    if len(value) > 63:
        return f"'{value}' is {len(value)} characters, more than 63"
    if not DNS1035.match(value):
        return f"'{value}' is not a DNS-1035 label (lowercase letters, digits and '-', starting with a letter)"
    return None


def validation(name: str, spec: dict[str, Any], prefix: str, coordinator: str | None) -> list[Check]:
    """What the JobSet webhook refuses (pkg/webhooks/jobset_webhook.go ValidateCreate at v0.12.0), after its
    defaulting (completionMode Indexed where unset): subdomain, group, Job and pod names that are not DNS-1035
    labels of at most 63 characters, a coordinator that names no pod, or one whose label value (`coordinator`, the
    endpoint the controller makes of it) is invalid."""
    out: list[Check] = []
    network = mapping(spec.get("network"))
    if network.get("subdomain"):
        why = _dns1035(str(network["subdomain"]))
        if why:
            out.append(Check(f"{prefix}.network.subdomain", f"subdomain {why}: the JobSet webhook refuses it "
                             "(it names the headless Service)", "use a shorter lowercase subdomain"))
    rjobs = [mapping(r) for r in listing(spec.get("replicatedJobs"))]
    # The controller adds each volumeClaimPolicies template as a pod volume of the Jobs that mount it
    # (volume_claim_policy.go addVolumes at v0.12.0) before the Jobs reach the API server.
    claims = tuple(str(mapping(mapping(t).get("metadata")).get("name")) for policy in
                   listing(spec.get("volumeClaimPolicies")) for t in listing(mapping(policy).get("templates")))
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
        if (js.get("completionMode") or job_validation.INDEXED) == job_validation.INDEXED and completions is not None:
            pod = f"{job}-{completions - 1}-abcde"
            why = _dns1035(pod)
            if why:
                out.append(Check(f"{where}.name", f"pod name {why}: the JobSet webhook refuses it",
                                 "shorten the JobSet or replicated Job name"))
        # The webhook's Default sets an unset template restartPolicy to OnFailure (jobset_webhook.go lines 125-126
        # at v0.12.0) before the child Jobs reach the API server's Job validation.
        out += job_validation.job_validation(js, f"{where}.template.spec", restart_default="OnFailure",
                                          added_volumes=claims)
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
            if completions is None or (tjs.get("completionMode") or job_validation.INDEXED) != job_validation.INDEXED:
                why = "job for coordinator pod must be indexed completion mode, and completions number must be set"
            elif not 0 <= pod_index < completions:
                why = f"coordinator pod index {pod_index} is invalid for replicatedJob {target.get('name')}"
        if why is None:
            endpoint = coordinator or ""
            if len(endpoint) > 63 or not LABEL_VALUE.match(endpoint):
                why = f"coordinator endpoint '{endpoint}' is not a valid label value (at most 63 characters)"
        if why:
            out.append(Check(f"{prefix}.coordinator", f"{why}: the JobSet webhook refuses it",
                             "point the coordinator at an existing pod, with names short enough"))
    return (out + _managed_by(spec, prefix) + _failure_rules(spec, prefix) + _order_and_targets(spec, rjobs, prefix)
            + _volume_claims(name, spec, rjobs, prefix))


def _managed_by(spec: dict[str, Any], prefix: str) -> list[Check]:
    """spec.managedBy (v0.12.0 jobset_webhook.go ValidateCreate, lines 200-210): the same domain-prefixed path of at
    most 63 characters the Job API asks (job_validation.managed_by_problems)."""
    if spec.get("managedBy") is None:
        return []
    manager = str(spec["managedBy"])
    return [Check(f"{prefix}.managedBy", f"managedBy '{manager}' {why}: the JobSet webhook refuses it",
                  "leave managedBy out (the JobSet controller), or name a controller like example.com/my-controller")
            for why in job_validation.managed_by_problems(manager)]


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
    """dependsOn and the replicated Jobs the success and failure policies name (v0.12.0: jobset_webhook.go
    ValidateCreate lines 177-180 and 258-263, the success policy at 284-289, validateFailurePolicy at 425). The CRD's
    own rule that startupPolicy InOrder and dependsOn exclude each other (api/jobset/v1alpha2/jobset_types.go line
    120) is the schema stage's (policies/schema/cel.py evaluates every x-kubernetes-validations rule)."""
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
    # Alpha gates, off by default (FEATURE_GATES): without them the webhook refuses these (ValidateCreate lines
    # 169-175, validateFailurePolicy lines 441-444); a cluster may turn them on, and an environment say so.
    gated = [(f"{prefix}.failurePolicy.rules[{i}].action", f"action {mapping(rule).get('action')}", "RestartJob")
             for i, rule in enumerate(listing(mapping(spec.get("failurePolicy")).get("rules")))
             if mapping(rule).get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts")]
    if mapping(spec.get("failurePolicy")).get("restartStrategy") == "InPlaceRestart":
        gated.append((f"{prefix}.failurePolicy.restartStrategy", "restartStrategy InPlaceRestart", "InPlaceRestart"))
    for where, what, gate in gated:
        out.append(Check(where, f"{what} needs the JobSet feature gate {gate} (alpha, off by default): without it "
                         "the webhook refuses the JobSet", f"run the JobSet controller with --feature-gates={gate}=true, "
                         "or use RestartJobSet", severity=WARNING, gate=("jobset", gate)))
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
