"""Kueue's flavor assignment (kubernetes-sigs/kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go), as far
as it settles that a ClusterQueue can never admit a workload, whatever else runs or ran: the reasons its scheduler
gives when a pod set fits no flavor even with the queue empty. It stays pending with that message in its
QuotaReserved condition, and Kueue never unsuspends the job.

A pod set is a pod template and its count; its requests are resourcehelpers.PodRequests of the template after
AdjustResources made each missing request its limit (pkg/workload/resources.go 124-156; workload.go 105-140 then
multiplies by the count). Kueue's `pods` resource is the count where the ClusterQueue covers `pods` (flavorassigner.go
738-745). For each resource of a pod set, the resource group that covers it (none: `resource %s unavailable in
ClusterQueue`, 1069-1072) offers its flavors in order; a flavor fits (checkFlavorForPodSets 1208-1257) unless one of
its nodeTaints with effect NoSchedule or NoExecute is tolerated neither by the pod nor by the flavor (`untolerated
taint %s in flavor %s`), its nodeLabels do not match the pod's required node affinity (`flavor %s doesn't match node
affinity`: kube/scheduling.py `flavor_matches`), or a resource of the group needs more than the flavor's maximum
capacity (fitsResourceQuota 1330-1354: `insufficient quota for %s in flavor %s, previously considered podsets
requests (%s) + current podset request (%s) > maximum capacity (%s)`). The maximum capacity is the flavor's
nominalQuota for a ClusterQueue in no cohort; in a cohort at most nominalQuota + borrowingLimit, and with no
borrowingLimit whatever the cohort lends, which the manifests do not settle (pkg/cache/scheduler/resource_node.go
potentialAvailable 124-140). A reason is Kueue's own (Status.Message sorts and joins them with ", ", 353-365).

Beyond one pod set: every pod set must get a flavor whose capacity holds what it and the pod sets before it put
there, so pod sets that together need more of a resource than all the flavors any of them may use can hold are never
admitted together (said in this module's words, as Kueue says it for whichever pod set comes last).

A pod set's `spec.overhead` counts (pod_requests): the template's own, or the one of its RuntimeClass, which Kueue
adds where the template sets none (pkg/workload/resources.go handlePodOverhead 57-73; RES010 gives it where the
manifests hold the RuntimeClass). Not read, and so never the ground for a claim: LimitRange defaults and the overhead
of a RuntimeClass not in the manifests (they only raise requests), Kueue's Configuration where the manifests do not
hold it (launchers/kueue_config.py reads it where they do: RES010 drops the excluded prefixes' requests before this
module sees them, and passes quotaCheckStrategy), partial admission, TAS placement in the
topology, a flavor the manifests do not hold (it may fit). The pod sets of one TAS podset group (podset_group) are
assigned as one: their requests summed, one flavor that suits each.

Before any flavor, a ClusterQueue Kueue keeps inactive admits nothing (inactive_reasons, in the words of its Active
condition): stopped by its stopPolicy; naming a ResourceFlavor, an AdmissionCheck or (on a TAS flavor) a Topology that
does not exist, judged only where the manifests are complete (the environment's `selfContained`); an AdmissionCheck
never Active (a provisioning check whose parameters name no ProvisioningRequestConfig); or MultiKueue checks Kueue
refuses to combine. A LocalQueue's stopPolicy stops it the same way (stop_policy)."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..kube.limit_range import canonical, containers, pod_totals
from ..kube.scheduling import flavor_matches, taint_text, untolerated_taint
from ..kube.values import Quantity, as_int, dig, listing, mapping, parse_quantity, selects

KUEUE_GROUP = "kueue.x-k8s.io"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server gives every namespace this label, its name
# workload.ErrNamespaceMismatch (pkg/workload/resources.go 42)
NAMESPACE_MISMATCH = "workload namespace doesn't match ClusterQueue selector"
POD_COUNT = "pods"
LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
TAINT_EFFECTS = ("NoSchedule", "NoExecute")
# Annotations and labels under which Kueue may admit fewer pods, or reads the pod sets from elsewhere: nothing is
# claimed of such a workload (partial admission: jobframework's job-min-parallelism; workload slices; a prebuilt
# Workload).
NOT_SETTLED = ("kueue.x-k8s.io/job-min-parallelism", "kueue.x-k8s.io/elastic-job",
               "kueue.x-k8s.io/prebuilt-workload-name")


@dataclass
class PodSet:
    name: str                      # in words (the template's field)
    count: int
    spec: dict[str, Any]           # the pod spec Kueue reads (tolerations, affinity)
    requests: dict[str, Quantity]  # one pod's (PodRequests after limits-as-requests), none zero
    group: str | None = None       # its TAS podset group (podset_group), whose pod sets get one flavor together


# A pod template's TAS podset group (pkg/controller/jobframework/tas.go 70, 111-113: the annotation counts only beside a
# required or preferred topology; apis/kueue/v1beta2/topology_types.go 98): the flavor assigner sums the requests of
# the pod sets of one group and gives them one flavor, which must suit each (flavorassigner.go 778-783, 786-830).
PODSET_GROUP = "kueue.x-k8s.io/podset-group-name"
GROUP_TOPOLOGY = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology")


def podset_group(annotations: dict[str, Any]) -> str | None:
    group = annotations.get(PODSET_GROUP)
    return str(group) if group is not None and any(k in annotations for k in GROUP_TOPOLOGY) else None


def workloads_per_object(framework: str | None, obj: dict[str, Any]) -> int:
    """How many alike Workloads Kueue makes of one object: one per LeaderWorkerSet group (its `spec.replicas`, default
    1: pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler.go 261-290, each group's pod sets its leader
    and its workers, podSets 400-); one for every other integration (a JobSet's replicated Jobs, a PyTorchJob's replica
    types, a Job's min(parallelism, completions): job_controller.go 451-458, are one Workload's pod sets)."""
    if framework == LWS_FRAMEWORK:
        replicas = as_int(dig(obj, "spec", "replicas"), 1)
        return replicas if replicas is not None and replicas > 0 else 1
    return 1


def pod_requests(spec: dict[str, Any]) -> dict[str, Quantity]:
    """One pod's requests as Kueue counts them: containers summed, init containers and sidecars as PodRequests
    takes them, each missing request its limit, the pod's overhead added; zero values left out."""
    total = dict(pod_totals(containers(spec), False))
    for k, v in mapping(spec.get("overhead")).items():
        q = parse_quantity(v)
        if q is not None:
            total[str(k)] = Quantity(total[str(k)].value + q.value, q.suffix, q.number) if k in total else q
    return {k: q for k, q in total.items() if q.value > 0}


def _amount(resource: str, value: Fraction) -> str:
    q = Quantity(value, "", "")
    return canonical(q, "BinarySI" if resource in ("memory", "ephemeral-storage") or
                     resource.startswith("hugepages-") else "DecimalSI")


@dataclass
class Flavor:
    name: str
    obj: dict[str, Any] | None               # the ResourceFlavor, where the manifests hold it
    capacity: dict[str, Fraction | None]     # resource -> maximum capacity (None: the manifests do not settle it)


def resource_groups(cq: dict[str, Any],
                    flavor_objs: dict[str, dict[str, Any]]) -> list[tuple[set[str], list[Flavor]]]:
    """(covered resources, flavors in order) of each of a ClusterQueue's resource groups; `flavor_objs`: the
    ResourceFlavors the manifests hold, by name."""
    spec = mapping(cq.get("spec"))
    cohort = spec.get("cohortName") or spec.get("cohort")  # v1beta2, v1beta1
    out = []
    for rg in listing(spec.get("resourceGroups")):
        covered = {str(r) for r in listing(mapping(rg).get("coveredResources"))}
        flavors = []
        for f in listing(mapping(rg).get("flavors")):
            caps: dict[str, Fraction | None] = {}
            for r in listing(mapping(f).get("resources")):
                nominal = parse_quantity(mapping(r).get("nominalQuota", 0))
                borrow = mapping(r).get("borrowingLimit")
                limit = parse_quantity(borrow) if borrow is not None else None
                cap: Fraction | None = nominal.value if nominal is not None else None
                if cohort and cap is not None:
                    cap = cap + limit.value if limit is not None else None
                caps[str(mapping(r).get("name"))] = cap
            name = str(mapping(f).get("name"))
            flavors.append(Flavor(name, flavor_objs.get(name), caps))
        out.append((covered, flavors))
    return out


def _group(groups: list[tuple[set[str], list[Flavor]]], resource: str) -> int | None:
    return next((i for i, (covered, _) in enumerate(groups) if resource in covered), None)


def never_admitted(cq: dict[str, Any], flavor_objs: dict[str, dict[str, Any]], podsets: list[PodSet],
                   ignore_undeclared: bool = False) -> list[str]:
    """Why the ClusterQueue `cq` can never admit these pod sets together, in Kueue's words where it has them; empty
    where it may. `flavor_objs`: the ResourceFlavors the manifests hold, by name. `ignore_undeclared`: Kueue's
    Configuration sets quotaCheckStrategy IgnoreUndeclared, and a resource no group covers is skipped
    (flavorassigner.go 803-812; launchers/kueue_config.py)."""
    groups = resource_groups(cq, flavor_objs)
    pods_covered = _group(groups, POD_COUNT) is not None
    reasons: list[str] = []
    usable: dict[str, set[str]] = {}   # resource -> flavors some pod set may put it in
    needed: dict[str, Fraction] = {}   # resource -> what all the pod sets need
    units: dict[str, list[PodSet]] = {}  # a podset group's pod sets are assigned as one
    for i, ps in enumerate(podsets):
        units.setdefault(f"group {ps.group}" if ps.group is not None else str(i), []).append(ps)
    for members in units.values():
        ps = members[0]
        totals: dict[str, Fraction] = {}
        for m in members:
            for k, q in m.requests.items():
                if k != POD_COUNT:
                    totals[k] = totals.get(k, Fraction(0)) + q.value * m.count
            if pods_covered and m.count:
                totals[POD_COUNT] = totals.get(POD_COUNT, Fraction(0)) + m.count
        why: list[str] = []
        by_group: dict[int, list[str]] = {}
        for r in sorted(totals):
            gi = _group(groups, r)
            if gi is None and not ignore_undeclared:
                why.append(f"resource {r} unavailable in ClusterQueue")
            elif gi is None:
                continue
            else:
                by_group.setdefault(gi, []).append(r)
        for gi, wanted in by_group.items():
            fits, said = _flavors_for(members, groups[gi][1], wanted, totals)
            if not fits:
                why += said
            for f in fits:
                for r in wanted:
                    usable.setdefault(r, set()).add(f.name)
        if why:
            together = (f" (assigned with {', '.join(m.name for m in members[1:])} as podset group {ps.group})"
                        if len(members) > 1 else "")
            reasons.append(f"couldn't assign flavors to pod set {ps.name}{together}: {', '.join(sorted(why))}")
        for r, v in totals.items():
            needed[r] = needed.get(r, Fraction(0)) + v
    if reasons or len(podsets) < 2:
        return reasons
    for r in sorted(needed):
        gi = _group(groups, r)
        caps = [f.capacity.get(r, Fraction(0)) for f in groups[gi][1] if f.name in usable.get(r, set())] \
            if gi is not None else []
        if caps and all(c is not None for c in caps) and needed[r] > sum(c for c in caps if c is not None):
            names = ", ".join(sorted(usable[r]))
            most = sum((c for c in caps if c is not None), Fraction(0))
            reasons.append(f"insufficient quota for {r}: the pod sets together request {_amount(r, needed[r])}, more "
                           f"than the maximum capacity of the flavors they may use ({names}: {_amount(r, most)})")
    return reasons


def _flavors_for(members: list[PodSet], flavors: list[Flavor], wanted: list[str], totals: dict[str, Fraction]) \
        -> tuple[list[Flavor], list[str]]:
    """The flavors of one resource group that may take the `wanted` resources of the pod sets assigned together (one,
    or a podset group), and Kueue's reasons for each that cannot (checkFlavorForPodSets over each pod set, then
    fitsResourceQuota for each resource with the queue empty)."""
    fits: list[Flavor] = []
    said: list[str] = []
    for f in flavors:
        if f.obj is None:  # not in the manifests: it may fit
            fits.append(f)
            continue
        fspec = mapping(f.obj.get("spec"))
        taint = next((t for ps in members if (t := untolerated_taint(
            fspec.get("nodeTaints"), listing(ps.spec.get("tolerations")) + listing(fspec.get("tolerations")),
            TAINT_EFFECTS)) is not None), None)
        if taint is not None:
            said.append(f"untolerated taint {taint_text(taint)} in flavor {f.name}")
            continue
        if not all(flavor_matches(ps.spec, mapping(fspec.get("nodeLabels"))) for ps in members):
            said.append(f"flavor {f.name} doesn't match node affinity")
            continue
        over = [(r, cap) for r in wanted if (cap := f.capacity.get(r, Fraction(0))) is not None and totals[r] > cap]
        for r, cap in over:
            said.append(f"insufficient quota for {r} in flavor {f.name}, previously considered podsets requests "
                        f"(0) + current podset request ({_amount(r, totals[r])}) > maximum capacity "
                        f"({_amount(r, cap)})")
        if not over:
            fits.append(f)
    return fits, said


def namespace_refused(cq: dict[str, Any], namespace: str, ns_obj: dict[str, Any] | None) -> str | None:
    """workload.ValidateAdmissibility's first check (pkg/workload/resources.go 228-246, before any flavor: scheduler.go
    683-693): the ClusterQueue's namespaceSelector must select the workload's namespace. An unset selector is
    LabelSelectorAsSelector(nil), which selects nothing (clusterqueue_types.go 108-113: "Defaults to null which is a
    nothing selector"; pkg/cache/scheduler/clusterqueue.go 173-177). The namespace's labels are its Namespace
    object's where the manifests hold it, else only the name label the API server sets, and then only a selector on
    that label alone is judged. None where it selects the namespace or the manifests do not settle it."""
    spec = mapping(cq.get("spec"))
    selector = spec.get("namespaceSelector")
    if selector is None:
        return f"{NAMESPACE_MISMATCH} (the ClusterQueue sets no namespaceSelector, which selects no namespace)"
    if not namespace or not isinstance(selector, dict):
        return None
    keys = set(mapping(selector.get("matchLabels"))) | {mapping(e).get("key") for e in
                                                         listing(selector.get("matchExpressions"))}
    if ns_obj is None and keys - {NAMESPACE_NAME_LABEL}:
        return None
    labels = {str(k): str(v) for k, v in mapping(dig(ns_obj or {}, "metadata", "labels")).items()}
    labels[NAMESPACE_NAME_LABEL] = namespace
    return None if selects(selector, labels) else f"{NAMESPACE_MISMATCH} (namespace {namespace})"


def queue_objects(manifests: list[Any], namespace: str, queue: str) -> tuple[Any, Any, dict[str, dict[str, Any]]]:
    """The LocalQueue `queue` of `namespace` (either namespace unset: any), its ClusterQueue, and every
    ResourceFlavor by name, among these manifests; None for those they do not hold."""
    def kueue(m: Any, kind: str) -> bool:
        return bool(m.kind == kind and m.api_version.split("/")[0] == KUEUE_GROUP)

    local = next((m for m in manifests if kueue(m, "LocalQueue") and m.name == queue and
                  (not namespace or not m.namespace or m.namespace == namespace)), None)
    target = dig(local.obj, "spec", "clusterQueue") if local is not None else None
    cluster = next((m for m in manifests if kueue(m, "ClusterQueue") and m.name == target), None) if target else None
    flavors = {m.name: m.obj for m in manifests if kueue(m, "ResourceFlavor")}
    return local, cluster, flavors


# A ClusterQueue Kueue's cache marks inactive admits nothing: the scheduler leaves its workloads pending with
# `ClusterQueue %s is inactive` (kueue v0.19.2 pkg/scheduler/scheduler.go 677-679, before the namespace check and any
# flavor), the reasons in the queue's Active condition (pkg/cache/scheduler/clusterqueue.go inactiveReason 310-366).
CQ_INACTIVE = "Can't admit new workloads: {}."
MULTIKUEUE = "kueue.x-k8s.io/multikueue"                 # kueue.MultiKueueControllerName
PROVISIONING = "kueue.x-k8s.io/provisioning-request"     # kueue.ProvisioningRequestControllerName
PROVISIONING_CONFIG = "ProvisioningRequestConfig"


def stop_policy(queue: dict[str, Any]) -> str | None:
    """The stopPolicy that stops a ClusterQueue or LocalQueue (Hold, HoldAndDrain), None where it admits: any value but
    the default None stops it (clusterqueue.go 179 `isStopped`; for a LocalQueue pkg/controller/core/
    workload_controller.go 741 `lqActive`), and no new workload is admitted while it is set (clusterqueue_types.go
    132-144: `no new reservation being made`; HoldAndDrain also evicts the admitted ones)."""
    policy = dig(queue, "spec", "stopPolicy")
    return str(policy) if policy not in (None, "", "None") else None


def admission_checks(cq: dict[str, Any]) -> dict[str, set[str]]:
    """Each AdmissionCheck a ClusterQueue names, with the flavors it applies to: NewAdmissionChecks (pkg/util/
    admissioncheck/admissioncheck.go 168-184: a rule without onFlavors applies to every flavor) of the v1beta2 spec;
    a v1beta1 `spec.admissionChecks` list converts to rules without onFlavors, in place of any strategy
    (apis/kueue/v1beta1/clusterqueue_conversion.go 48-59)."""
    spec = mapping(cq.get("spec"))
    every = {str(mapping(f).get("name")) for rg in listing(spec.get("resourceGroups"))
             for f in listing(mapping(rg).get("flavors"))}
    names = listing(spec.get("admissionChecks"))
    rules = [{"name": n} for n in names] if names else listing(mapping(spec.get("admissionChecksStrategy"))
                                                                 .get("admissionChecks"))
    return {str(mapping(r).get("name")): {str(f) for f in listing(mapping(r).get("onFlavors"))} or every
            for r in rules}


def check_never_active(ac: dict[str, Any], configs: set[str], complete: bool) -> str | None:
    """Why an AdmissionCheck the manifests hold is never Active, where they settle it; None where its controller
    decides (a check is Active only where its controller sets the condition: pkg/cache/scheduler/cache.go 345-350).
    Of the checks Kueue's own controllers run, the provisioning-request controller sets it False where the
    parameters do not name a ProvisioningRequestConfig (pkg/controller/admissionchecks/provisioning/
    admissioncheck_reconciler.go 44-57; ConfigFromRef and refValidForGK, pkg/util/admissioncheck/admissioncheck.go
    92-126, whose errors these are), or where that config does not exist (judged only in `complete` manifests);
    where that controller does not run, nothing sets it Active either."""
    spec = mapping(ac.get("spec"))
    if spec.get("controllerName") != PROVISIONING:
        return None
    ref = spec.get("parameters")
    if not isinstance(ref, dict):
        return "missing parameters reference"
    if not ref.get("name"):
        return "empty name: bad parameters reference"
    if ref.get("apiGroup") != KUEUE_GROUP:
        return f'wrong group "{ref.get("apiGroup") or ""}", expecting "{KUEUE_GROUP}": bad parameters reference'
    if ref.get("kind") != PROVISIONING_CONFIG:
        return f'wrong kind "{ref.get("kind") or ""}", expecting "{PROVISIONING_CONFIG}": bad parameters reference'
    if complete and str(ref["name"]) not in configs:
        return f'provisioningrequestconfigs.kueue.x-k8s.io "{ref["name"]}" not found'
    return None


def never_active_checks(cq: dict[str, Any], objs: dict[str, dict[str, dict[str, Any]]],
                        complete: bool) -> dict[str, str]:
    """The AdmissionChecks of the ClusterQueue that the manifests hold and settle are never Active, by name (sorted),
    with why (check_never_active)."""
    checks, configs = objs.get("AdmissionCheck", {}), set(objs.get(PROVISIONING_CONFIG, {}))
    return {n: why for n in sorted(admission_checks(cq)) if n in checks and
            (why := check_never_active(checks[n], configs, complete))}


def inactive_reasons(cq: dict[str, Any], objs: dict[str, dict[str, dict[str, Any]]], complete: bool) -> list[str]:
    """Kueue's reasons a ClusterQueue is inactive, in its words and order (clusterqueue.go updateQueueStatus 250-273,
    inactiveReason 310-366), as far as the manifests settle them: stopped; a ResourceFlavor, an AdmissionCheck or a
    TAS flavor's Topology that does not exist (judged only where the manifests are `complete`: the cluster may hold
    it); an AdmissionCheck never Active (check_never_active); more than one MultiKueue check, one applied to some
    flavors only, or MultiKueue beside ProvisioningRequest (updateWithAdmissionChecks 418-495: these read each
    check's controllerName, which the manifests hold). `objs`: the Kueue objects of the manifests, by kind and name
    (kueue_objects)."""
    flavors, checks = objs.get("ResourceFlavor", {}), objs.get("AdmissionCheck", {})
    out = [] if stop_policy(cq) is None else ["is stopped"]
    names = [str(mapping(f).get("name")) for rg in listing(dig(cq, "spec", "resourceGroups"))
             for f in listing(mapping(rg).get("flavors"))]
    every = set(names)
    missing = [n for n in names if n not in flavors]
    if complete and missing:
        out.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
    wanted = admission_checks(cq)
    absent = sorted(n for n in wanted if n not in checks)
    if complete and absent:
        out.append(f"references missing AdmissionCheck(s): {','.join(absent)}")
    never = never_active_checks(cq, objs, complete)
    if never:
        out.append(f"references inactive AdmissionCheck(s): {','.join(never)}")
    controller = {n: str(dig(checks[n], "spec", "controllerName") or "") for n in wanted if n in checks}
    multi = sorted(n for n, c in controller.items() if c == MULTIKUEUE)
    provisioning = sorted(n for n, c in controller.items() if c == PROVISIONING)
    if len(multi) > 1:
        out.append(f"Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: {','.join(multi)}")
    per_flavor = [n for n in multi if wanted[n] != every]
    if per_flavor:
        out.append(f"Cannot specify MultiKueue AdmissionCheck per flavor, found: {','.join(per_flavor)}")
    if multi and provisioning:
        out.append("Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: "
                   f"{','.join(multi)}, {','.join(provisioning)}")
    if complete and not multi:  # isTASViolated 368-380 (TopologyAwareScheduling: on by default since v0.14)
        topologies = objs.get("Topology", {})
        for name in sorted(every):
            topology = dig(flavors.get(name) or {}, "spec", "topologyName")
            if topology and str(topology) not in topologies:
                out.append(f'there is no Topology "{topology}" for TAS flavor "{name}"')
    return out


def kueue_objects(manifests: list[Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """The Kueue objects of the manifests by kind, then name."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for m in manifests:
        if m.api_version.split("/")[0] == KUEUE_GROUP:
            out.setdefault(str(m.kind), {}).setdefault(str(m.name), m.obj)
    return out
