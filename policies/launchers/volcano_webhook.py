"""The Volcano job webhook (pkg/webhooks/admission/jobs/validate/admit_job.go validateJobCreate and util.go at
volcano-sh/volcano v1.15.1): the checks on a Job's lifecycle policies, volumes, dependsOn graph, partition and
network topology and NUMA topology policy, kept apart from the controller's model (volcano.py, whose admission()
calls them in the webhook's order)."""
from __future__ import annotations

from typing import Any

from ..kube.admission_classes import REFUSED_PRIORITY, SYSTEM_PRIORITY_CLASSES
from ..kube.values import DNS1123_SUBDOMAIN, as_int, dig, group_of, listing, mapping, parse_quantity
from .base import Bundle, Check, Need

# The webhook's refusals end with this (TOPO011's wording for an admission webhook).
REFUSED = "the Volcano webhook refuses it"
# staging/src/volcano.sh/apis/pkg/apis/bus/v1alpha1/events.go and actions.go, as pkg/webhooks/admission/jobs/validate/
# util.go policyEventMap (lines 31-43) and policyActionMap (lines 46-60) allow them in a Job's policies: OutOfSync,
# CommandIssued and PodRunning (events), SyncJob, Enqueue, SyncQueue, OpenQueue and CloseQueue (actions) are
# internal and refused.
POLICY_EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated")
POLICY_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob",
                  "CompleteJob", "ResumeJob")
ANY_EVENT = "*"
# batch/v1alpha1 NumaPolicy None: a task topologyPolicy that asks for no NUMA alignment.
NUMA_NONE = "none"


def policy_checks(policies: Any, where: str, go_path: str) -> list[Check]:
    """util.go validatePolicies (lines 62-123) over one list of lifecycle policies (`spec.policies`, or a task's
    `policies`, which the webhook names `spec.tasks.policies`): an event (`event`, `events`) or an `exitCode`, never
    both, never neither; every event allowed, with an allowed action; an event in one policy only (a policy's own
    `event` and `events` are merged first); exit codes non-zero and used once; `*` alone. Like upstream, the list
    stops at its first refused policy, and an exitCode policy's action is not checked."""
    out: list[Check] = []
    valid = f"events are {', '.join(POLICY_EVENTS)}; actions are {', '.join(POLICY_ACTIONS)}"
    events: dict[str, str] = {}   # event -> the field that first named it
    codes: set[int] = set()
    for i, p in enumerate(listing(policies)):
        p = mapping(p)
        w = f"{where}[{i}]"
        event = str(p.get("event") or "")
        listed = [str(e) for e in listing(p.get("events"))]
        code = p.get("exitCode")
        if (event or listed) and code is not None:
            out.append(Check(f"{w}.exitCode", f"must not specify event and exitCode simultaneously: {REFUSED}",
                             "keep either the event(s) or the exitCode; use two policies for both"))
            break
        if not event and not listed and code is None:
            out.append(Check(w, f"either event and exitCode should be specified: {REFUSED}",
                             f"add an event or a non-zero exitCode ({valid})"))
            break
        if event or listed:
            # getEventList: `events`, then `event`, duplicates removed.
            named: list[tuple[str, str]] = []
            for k, e in [(f"{w}.events[{k}]", e) for k, e in enumerate(listed)] + (
                    [(f"{w}.event", event)] if event else []):
                if e not in (n for _, n in named):
                    named.append((k, e))
            stop = False
            for fld, e in named:
                action = str(p.get("action") or "")
                if e not in POLICY_EVENTS:
                    out.append(Check(fld, f"{go_path}: Invalid value: \"{e}\": invalid policy event: {REFUSED}",
                                     f"use an allowed event ({valid})"))
                    stop = True
                elif action not in POLICY_ACTIONS:
                    out.append(Check(f"{w}.action", f"{go_path}: Invalid value: \"{action}\": invalid policy "
                                     f"action: {REFUSED}", f"set an allowed action ({valid})"))
                    stop = True
                elif e in events:
                    out.append(Check(fld, f"duplicate event {e}  across different policy: {REFUSED}",
                                     f"handle {e} in one policy only (the first is {events[e]})"))
                    stop = True
                else:
                    events[e] = fld
                if stop:
                    break
            if stop:
                break
        else:
            exit_code = as_int(code)
            if exit_code == 0:
                out.append(Check(f"{w}.exitCode", f"0 is not a valid error code: {REFUSED}",
                                 "use a non-zero exit code (0 is success)"))
                break
            if exit_code in codes:
                out.append(Check(f"{w}.exitCode", f"duplicate exitCode {exit_code}: {REFUSED}",
                                 f"handle exit code {exit_code} in one policy only"))
                break
            if exit_code is not None:
                codes.add(exit_code)
    if ANY_EVENT in events and len(events) > 1:
        others = ", ".join(e for e in events if e != ANY_EVENT)
        out.append(Check(events[ANY_EVENT], f"if there's * here, no other policy should be here: {REFUSED}",
                         f"drop the policies for {others}, or replace '*' with the events it should cover"))
    return out


def io_checks(volumes: Any) -> list[Check]:
    """util.go validateIO (lines 169-194) over `spec.volumes`, stopping at the first refused volume: a mountPath,
    unique among the volumes; a volumeClaim or a volumeClaimName, not both; a claim name that is a DNS-1123
    subdomain (core validation ValidatePersistentVolumeName)."""
    paths: set[str] = set()
    for i, v in enumerate(listing(volumes)):
        v = mapping(v)
        w = f"spec.volumes[{i}]"
        path = str(v.get("mountPath") or "")
        claim_name = str(v.get("volumeClaimName") or "")
        if not path:
            return [Check(f"{w}.mountPath", f"mountPath is required: {REFUSED}", "set the path to mount it at")]
        if path in paths:
            return [Check(f"{w}.mountPath", f"duplicated mountPath: {path}: {REFUSED}",
                          "mount each volume at its own path")]
        if v.get("volumeClaim") is None and not claim_name:
            return [Check(w, f"either VolumeClaim or VolumeClaimName must be specified: {REFUSED}",
                          "name an existing PVC in volumeClaimName, or describe a new one in volumeClaim")]
        if claim_name:
            if v.get("volumeClaim") is not None:
                return [Check(f"{w}.volumeClaimName", "conflict: If you want to use an existing PVC, just specify "
                              "VolumeClaimName.If you want to create a new PVC, you do not need to specify "
                              f"VolumeClaimName: {REFUSED}", "keep volumeClaimName (an existing PVC) or "
                              "volumeClaim (a new one), not both")]
            if len(claim_name) > 253 or not DNS1123_SUBDOMAIN.match(claim_name):
                return [Check(f"{w}.volumeClaimName", f"invalid VolumeClaimName {claim_name}: not a DNS-1123 "
                              f"subdomain: {REFUSED}", "use lowercase letters, digits, '-' and '.', at most 253 "
                              "characters")]
        paths.add(path)
    return []


def dag_checks(ts: list[dict[str, Any]], upto: int) -> list[Check]:
    """admit_job.go lines 145-149 and 230-235 with util.go topoSort/makeGraph (lines 198-253): where a task (among
    the first `upto`, those the webhook's loop reached) has `dependsOn`, the tasks' dependsOn graph is sorted
    topologically and must take every task in. A name that is no task's, a cycle, or a name listed twice in one
    dependsOn (counted twice, removed once) leaves tasks out."""
    if not any(t.get("dependsOn") is not None for t in ts[:upto]):
        return []
    names = [str(t.get("name")) for t in ts]
    indegree: dict[str, int] = {n: 0 for n in names}
    graph: dict[str, set[str]] = {}
    for t in ts:
        for d in listing(mapping(t.get("dependsOn")).get("name")):
            graph.setdefault(str(d), set()).add(str(t.get("name")))
            indegree[str(t.get("name"))] += 1
    stack = [n for n, d in indegree.items() if d == 0]
    done: list[str] = []
    while stack:
        n = stack.pop()
        done.append(n)
        for m in sorted(graph.pop(n, set())):
            indegree[m] -= 1
            if indegree[m] == 0:
                stack.append(m)
    if len(done) == len(names):
        return []
    left = [i for i, n in enumerate(names) if n not in done and ts[i].get("dependsOn") is not None]
    ti = left[0] if left else 0
    unknown = sorted({str(d) for t in ts for d in listing(mapping(t.get("dependsOn")).get("name"))} - set(names))
    why = (f"dependsOn names {', '.join(unknown)}, which no task is called" if unknown else
           f"the tasks {', '.join(n for n in names if n not in done)} depend on each other in a cycle (or a name "
           "is listed twice)")
    return [Check(f"spec.tasks[{ti}].dependsOn", "job has dependencies between tasks, but doesn't form a directed "
                  f"acyclic graph(DAG): {REFUSED}", f"{why}: make dependsOn name other tasks of this job, once "
                  "each, without a cycle")]


def topology_checks(topology: Any, where: str) -> list[Check]:
    """admit_job.go validateNetworkTopology (lines 332-337)."""
    t = mapping(topology)
    if t.get("highestTierAllowed") is not None and t.get("highestTierName"):
        return [Check(where, "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
                      f"simultaneously: {REFUSED}", "keep highestTierAllowed or highestTierName, not both")]
    return []


def partition_checks(task: dict[str, Any], ti: int, job: str) -> list[Check]:
    """admit_job.go validatePartitionPolicy (lines 311-330): totalPartitions and partitionSize above 0, replicas =
    totalPartitions x partitionSize, and a task minAvailable = minPartitions x partitionSize where minPartitions is
    above 0; then the partition's networkTopology."""
    pp = task.get("partitionPolicy")
    if pp is None:
        return []
    pp = mapping(pp)
    w = f"spec.tasks[{ti}].partitionPolicy"
    name = task.get("name")
    total = as_int(pp.get("totalPartitions"), 0) or 0
    size = as_int(pp.get("partitionSize"), 0) or 0
    replicas = as_int(task.get("replicas"), 0) or 0
    min_parts = as_int(pp.get("minPartitions"), 0) or 0
    min_av = as_int(task.get("minAvailable"))
    out: list[Check] = []
    if total <= 0:
        out.append(Check(f"{w}.totalPartitions", f"'TotalPartitions' must be greater than 0 in task: {name}, job: "
                         f"{job}: {REFUSED}", "set totalPartitions to 1 or more"))
    elif size <= 0:
        out.append(Check(f"{w}.partitionSize", f"'PartitionSize' must be greater than 0 in task: {name}, job: {job}: "
                         f"{REFUSED}", "set partitionSize to 1 or more"))
    elif replicas != total * size:
        out.append(Check(f"spec.tasks[{ti}].replicas", f"'Replicas' are not equal to TotalPartitions*PartitionSize "
                         f"in task: {name}, job: {job}: {REFUSED}", f"set replicas to {total * size} "
                         f"({total} x {size}), or change the partitions"))
    elif min_av is not None and min_parts > 0 and min_parts * size != min_av:
        out.append(Check(f"spec.tasks[{ti}].minAvailable", f"'MinAvailable' is not equal to MinPartitions*"
                         f"PartitionSize in task: {name}, job: {job}: {REFUSED}",
                         f"set minAvailable to {min_parts * size} ({min_parts} x {size}), or leave it out"))
    return out + topology_checks(pp.get("networkTopology"), f"{w}.networkTopology")


def _whole_cpus(value: Any) -> int:
    """admit_job.go guaranteedCPUs (lines 414-421): Quantity.Value() where Value()*1000 == MilliValue() (both round
    up), else 0; an absent request is 0."""
    q = parse_quantity(value)
    if q is None:
        return 0
    v = q.value
    whole = -((-v.numerator) // v.denominator)
    milli = -((-(v * 1000).numerator) // (v * 1000).denominator)
    return whole if whole * 1000 == milli else 0


def numa_checks(task: dict[str, Any], ti: int) -> list[Check]:
    """admit_job.go validateTaskTopoPolicy (lines 384-412): with a task topologyPolicy other than none, every
    container and init container requests a whole number of CPUs (its limits stand in for empty requests)."""
    if str(task.get("topologyPolicy") or NUMA_NONE) == NUMA_NONE:
        return []
    spec = mapping(dig(task, "template", "spec"))
    listed = [(f"containers[{i}]", mapping(c)) for i, c in enumerate(listing(spec.get("containers")))]
    listed += [(f"initContainers[{i}]", mapping(c)) for i, c in enumerate(listing(spec.get("initContainers")))]
    for cid, (where, c) in enumerate(listed):
        res = mapping(c.get("resources"))
        requests = mapping(res.get("requests")) or mapping(res.get("limits"))
        if _whole_cpus(requests.get("cpu")) == 0:
            return [Check(f"spec.tasks[{ti}].template.spec.{where}.resources.requests.cpu", "the cpu request isn't  "
                          f"an integer in spec.task[{ti}] container[{cid}].: {REFUSED}",
                          "request a whole number of CPUs (1 or more) in every container, or drop topologyPolicy")]
    return []


# The queue hierarchy's root, which takes no Job, and the kind of Volcano's queues.
ROOT_QUEUE = "root"
QUEUE_KIND, SCHEDULING_GROUP = "Queue", "scheduling.volcano.sh"


def queues(bundle: Bundle) -> dict[str, str | None]:
    """The Volcano Queues in the manifests: name -> spec.parent (made once per bundle)."""
    return bundle.derived("volcano-queues", lambda b: {
        m.name: (str(dig(m.obj, "spec", "parent")) if dig(m.obj, "spec", "parent") else None)
        for m in b.manifests if m.kind == QUEUE_KIND and group_of(m.api_version) == SCHEDULING_GROUP})


def queue_checks(queue: str, known: dict[str, str | None]) -> list[Check]:
    """admit_job.go 201-228 (v1.15.1): the webhook refuses a Job in the `root` queue, and one in a queue that has
    child queues (here, where Queues in the manifests name it their parent; admit_job_test.go 2090-2160). Whether
    the queue exists and is Open needs the cluster's Queue objects (REF001 lists a queue not in the manifests)."""
    if queue == ROOT_QUEUE:
        return [Check("spec.queue", f"can not submit job to root queue: {REFUSED}",
                      "submit the Job to a leaf queue (default, or a queue of your own)")]
    children = sorted(n for n, parent in known.items() if parent == queue)
    if children:
        return [Check("spec.queue", f"can only submit job to leaf queue, queue `{queue}` has {len(children)} child "
                      f"queues: {REFUSED}", f"submit the Job to a leaf queue ({children[0]})")]
    return []


def queue_needs(queue: str, default: str, bundle: Bundle) -> list[Need]:
    """The Queue the webhook must find (admit_job.go 201-205 at v1.15.1, "unable to find job queue"), where it is
    neither in the manifests nor one Volcano creates itself (`default`, `root`): REF001's reference, said once."""
    if queue in (default, ROOT_QUEUE) or queue in queues(bundle):
        return []
    return [Need(QUEUE_KIND, "", queue, "spec.queue", "the Volcano webhook refuses the Job (unable to find job queue)")]


def job_priority(template: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A task's pod template as createJobPod makes its pods (pkg/controllers/job/job_controller_util.go 67-70 at
    v1.15.1): one that names no priorityClassName gets the Job's `spec.priorityClassName`, which the Priority plugin
    then resolves for each pod (ADM002 where the class is in the manifests)."""
    job_class = spec.get("priorityClassName")
    pod = mapping(template.get("spec"))
    if not isinstance(job_class, str) or not job_class or pod.get("priorityClassName"):
        return template
    return {**template, "spec": {**pod, "priorityClassName": job_class}}


def priority_needs(spec: dict[str, Any], tasks: list[dict[str, Any]]) -> list[Need]:
    """The Job's PriorityClass as REF001's reference, where pods get it (job_priority) and it is not a system class:
    without it the Priority plugin refuses those pods. The webhook reads no PriorityClass (validateJobCreate), and
    where every task names its own class the Job's goes only to the PodGroup (job_controller_actions.go 822, 877-878),
    whose class the scheduler, not finding it, reads as its default priority (pkg/scheduler/cache/cache.go 1538-1543):
    nothing is refused or waits, so it is not listed."""
    job_class = spec.get("priorityClassName")
    if not isinstance(job_class, str) or not job_class or job_class in SYSTEM_PRIORITY_CLASSES:
        return []
    if all(dig(t, "template", "spec", "priorityClassName") for t in tasks):
        return []
    return [Need("PriorityClass", "", job_class, "spec.priorityClassName", "the API server refuses every pod of the "
                 "tasks that name no class of their own (" + REFUSED_PRIORITY.format(job_class) + "), so none is "
                 "created")]
