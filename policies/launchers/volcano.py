"""Volcano `Job` (batch.volcano.sh/v1alpha1, volcano-sh/volcano v1.15.1) with its job plugins `pytorch`, `svc` and
`env`: pods `<job>-<task>-<index>`, one group per task, published under the headless Service named after the job,
with the env each plugin appends (pkg/controllers/job/job_controller_util.go createJobPod,
job_controller_actions.go syncJob, pkg/controllers/job/plugins/, pkg/webhooks/admission/jobs/).

A Volcano Job can run any mix of tasks. With the `pytorch` plugin the torchrun world is its `--master` and
`--worker` tasks (WORLD_SIZE counts only those), pod 0 is master 0 and the other tasks' pods are listed, not ranked.
Without it, every task's pods make the world, as JobSet's replicated Jobs do.

`admission()` is the job webhook's validateJobCreate, in its order (its policy, volume, DAG, partition and queue
checks are volcano_webhook.py; a queue not in the manifests is REF001's, as is the Job's `priorityClassName`, which
createJobPod gives the pods of a task that names no class), negative counts are the CRD schema's
(SCHEMA rules), and the chart's optional ValidatingAdmissionPolicy (off by default) is not modelled."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..kube.values import QUALIFIED_NAME, as_int, dig, listing, mapping
from ..kube.objects import Manifest
from . import core_validation
from .volcano_webhook import (REFUSED, dag_checks, io_checks, job_priority, numa_checks, partition_checks,
                              policy_checks, priority_needs, queue_checks, queue_needs, queues, topology_checks)
from .base import MAX_GROUP_PODS, Unreadable, Bundle, Check, Launcher, Workload
from .pods import Injected, PodGroup, indexed

GROUP = "batch.volcano.sh"
KIND = "Job"

# staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/labels.go and scheduling/v1beta1/labels.go
TASK_SPEC = "volcano.sh/task-spec"
TASK_INDEX = "volcano.sh/task-index"
JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
QUEUE_NAME = "volcano.sh/queue-name"
TEMPLATE_UID = "volcano.sh/template-uid"
PARTITION_ID = "volcano.sh/partition-id"
# scheduling/v1beta1/labels.go: what createJobPod copies from the Job's own labels and annotations to each pod.
PREEMPTABLE = "volcano.sh/preemptable"
COOLDOWN_TIME = "volcano.sh/cooldown-time"
REVOCABLE_ZONE = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
NUMA_POLICY = "volcano.sh/numa-topology-policy"


def propagated(meta: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) createJobPod (pkg/controllers/job/job_controller_util.go at v1.15.1) copies from the
    Job's metadata onto every pod: the labels preemptable and cooldown-time; the annotations preemptable,
    cooldown-time, revocable-zone and jdb-min-available, else jdb-max-unavailable (the two are exclusive)."""
    labels = {str(k): str(v) for k, v in mapping(meta.get("labels")).items() if k in (PREEMPTABLE, COOLDOWN_TIME)}
    annotations = mapping(meta.get("annotations"))
    keys = [PREEMPTABLE, COOLDOWN_TIME, REVOCABLE_ZONE,
            JDB_MIN_AVAILABLE if JDB_MIN_AVAILABLE in annotations else JDB_MAX_UNAVAILABLE]
    return labels, {k: str(annotations[k]) for k in keys if k in annotations}
DEFAULT_TASK = "default"
# mutate_job.go: the queue a Job without one is put in.
DEFAULT_QUEUE = "default"

# plugins/factory.go init(): the plugins the controller knows; the webhook refuses any other.
PLUGINS = ("ssh", "env", "svc", "tensorflow", "mpi", "pytorch", "hcclrank", "ray")
# mutate_job.go patchDefaultPlugins: these depend on svc, which the webhook adds when it is missing.
NEED_SVC = ("tensorflow", "mpi", "pytorch", "ray")

# plugins/distributed-framework/pytorch/pytorch.go
PYTORCH = "pytorch"
DEFAULT_PORT = 23456
DEFAULT_MASTER = "master"
DEFAULT_WORKER = "worker"
PORT_NAME = "pytorchjob-port"
WAIT_MASTER = "wait-for-master"
DEFAULT_WAIT_IMAGE = "busybox:1.36.1"
DEFAULT_WAIT_TIMEOUT = 300

# plugins/distributed-framework/mpi/mpi.go addFlags: DefaultMaster.
MPI = "mpi"
MPI_DEFAULT_MASTER = "master"

# plugins/env/const.go, plugins/svc/const.go
ENV = "env"
SVC = "svc"
VK_TASK_INDEX = "VK_TASK_INDEX"
VC_TASK_INDEX = "VC_TASK_INDEX"


def plugins(spec: dict[str, Any]) -> dict[str, list[str]]:
    """`spec.plugins` after the mutating webhook (patchDefaultPlugins): `svc` added where a framework plugin needs
    it."""
    raw = mapping(spec.get("plugins"))
    out = {str(k): [str(a) for a in listing(v)] for k, v in raw.items()}
    if any(p in out for p in NEED_SVC) and SVC not in out:
        out[SVC] = []
    return out


def go_flags(args: list[str], spec: dict[str, type]) -> dict[str, Any]:
    """Go's flag.FlagSet.Parse (ContinueOnError) over a plugin's arguments: `-x=v`, `--x=v`, `--x v`, a bool
    `--x`; parsing stops at the first argument that is not a flag, and at an error (what was parsed is kept)."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            break
        name, _, value = arg.lstrip("-").partition("=")
        kind = spec.get(name)
        if kind is None:
            break  # "flag provided but not defined": Parse returns the error, the plugin logs it
        has_value = "=" in arg
        if kind is bool:
            if not has_value:
                out[name] = True
            elif value.lower() in ("1", "t", "true"):
                out[name] = True
            elif value.lower() in ("0", "f", "false"):
                out[name] = False
            else:
                break
        else:
            if not has_value:
                if i + 1 >= len(args):
                    break
                i += 1
                value = args[i]
            if kind is int:
                try:
                    out[name] = int(value, 0)
                except ValueError:
                    break
            else:
                out[name] = value
        i += 1
    return out


def pytorch_settings(args: list[str]) -> dict[str, Any]:
    """pytorch.go addFlags: `--master`, `--worker`, `--port` and the wait-for-master flags, with their defaults."""
    got = go_flags(args, {"master": str, "worker": str, "port": int, "wait-master-enabled": bool,
                          "wait-master-timeout": int, "wait-master-image": str})
    return {"master": got.get("master", DEFAULT_MASTER), "worker": got.get("worker", DEFAULT_WORKER),
            "port": got.get("port", DEFAULT_PORT), "wait": got.get("wait-master-enabled", False),
            "timeout": got.get("wait-master-timeout", DEFAULT_WAIT_TIMEOUT),
            "image": got.get("wait-master-image", DEFAULT_WAIT_IMAGE)}


def svc_settings(args: list[str]) -> dict[str, Any]:
    """svc.go addFlags: `--publish-not-ready-addresses` and `--disable-network-policy`, both false by default."""
    got = go_flags(args, {"publish-not-ready-addresses": bool, "disable-network-policy": bool})
    return {"publish": got.get("publish-not-ready-addresses", False),
            "no_netpol": got.get("disable-network-policy", False)}


def tasks(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The tasks after the mutating webhook (mutateSpec): an unnamed task is `default<index>`."""
    out = []
    for i, t in enumerate(listing(spec.get("tasks"))):
        t = dict(mapping(t))
        if not t.get("name"):
            t["name"] = f"{DEFAULT_TASK}{i}"
        out.append(t)
    return out


def domain(job: str, task: dict[str, Any], index: int) -> str:
    """helpers.MakeDomainName / pytorch.go generateMasterAddr / svc.go GenerateHosts: the template's hostname,
    else `<job>-<task>-<index>`, dot the template's subdomain, else the job's name."""
    pspec = mapping(dig(task, "template", "spec"))
    host = pspec.get("hostname") or f"{job}-{task.get('name')}-{index}"
    sub = pspec.get("subdomain") or job
    return f"{host}.{sub}"


def hosts(job: str, ts: list[dict[str, Any]]) -> dict[str, str]:
    """svc.go GenerateHosts: the `<job>-svc` ConfigMap's VC_<TASK>_HOSTS (comma-separated) and VC_<TASK>_NUM per
    task, task names upper-cased with '-' as '_'; a template with a fixed hostname gives one host."""
    out: dict[str, str] = {}
    if sum(max(as_int(t.get("replicas"), 0) or 0, 0) for t in ts) > MAX_GROUP_PODS:
        raise Unreadable(f"has more than {MAX_GROUP_PODS:,} task pods, which the model does not work out")
    for t in ts:
        names = []
        fixed = bool(mapping(dig(t, "template", "spec")).get("hostname"))
        for i in range(as_int(t.get("replicas"), 0) or 0):
            names.append(domain(job, t, i))
            if fixed:
                break
        key = str(t.get("name")).replace("-", "_").upper()
        out[f"VC_{key}_HOSTS"] = ",".join(names)
        out[f"VC_{key}_NUM"] = str(len(names))
    return out


def wait_script(addr: str, port: int, timeout: int) -> str:
    """pytorch.go generateWaitForMasterScript."""
    return (f'echo "Waiting for master node {addr}:{port} to be ready..."\nTIMEOUT={timeout}\nELAPSED=0\n'
            f'until {{ nc -z {addr} {port} || echo > /dev/tcp/{addr}/{port}; }} 2>/dev/null; do\n'
            '  if [ $ELAPSED -ge $TIMEOUT ]; then\n'
            '    echo "Timeout waiting for master after ${TIMEOUT} seconds"\n    exit 1\n  fi\n'
            '  echo "Master not ready yet, retrying in 2 seconds... (elapsed: ${ELAPSED}s)"\n  sleep 2\n'
            '  ELAPSED=$((ELAPSED + 2))\ndone\necho "Master node is ready!"')


def _ports(port: int) -> Callable[[str], list[dict[str, Any]]]:
    """The pytorch plugin's port on every container of its tasks."""
    return lambda c: [{"name": PORT_NAME, "containerPort": port}]


def _qualified(name: str) -> str | None:
    """validation.IsQualifiedName for a name without a prefix: at most 63 characters of [-A-Za-z0-9_.],
    alphanumeric at both ends."""
    if len(name) > 63:
        return f"'{name}' is {len(name)} characters, more than 63"
    if not QUALIFIED_NAME.match(name):
        return f"'{name}' is not a qualified name"
    return None


@dataclass
class VolcanoWorkload(Workload):
    """A Volcano Job's pods, and the job plugins that shape them."""

    plugins: dict[str, list[str]] = field(default_factory=dict)
    # The pytorch plugin's settings (None without the plugin), and whether it acts (its master task exists).
    pytorch: dict[str, Any] | None = None
    pytorch_on: bool = False
    tasks: list[str] = field(default_factory=list)


class VolcanoJobLauncher(Launcher[VolcanoWorkload]):
    id = "volcano-job"
    order = 70
    upstream = "volcano-sh/volcano v1.15.1"
    title = "Volcano Job (pytorch, svc, env plugins)"
    kinds = ((GROUP, KIND),)
    for_training = False  # a Volcano Job counts when it runs torchrun or reads env:// (the pytorch plugin's env)
    managed_dns = True    # the svc plugin's Service `<job>` (the webhook adds svc with pytorch)
    # admit_job.go validateJobUpdate: only minAvailable, tasks[*].replicas/minAvailable and priorityClassName may
    # change; a changed tasks[*].replicas is applied, but the running pods keep the WORLD_SIZE they were created with.
    immutable = ("spec.tasks", "spec.plugins", "spec.queue", "spec.policies", "spec.volumes")
    ttl_field = ("spec", "ttlSecondsAfterFinished")
    # No base of this repository uses it: `make scale` has no patch layout to follow.
    scale = None

    def build(self, m: Manifest, bundle: Bundle) -> VolcanoWorkload:
        spec = mapping(m.obj.get("spec"))
        name = m.name
        namespace = m.namespace or "default"  # the pod's metadata.namespace once applied (kubectl's default)
        ts = tasks(spec)
        plug = plugins(spec)
        py = pytorch_settings(plug[PYTORCH]) if PYTORCH in plug else None
        names = [str(t.get("name")) for t in ts]
        counts = [as_int(t.get("replicas"), 0) or 0 for t in ts]
        master_i = names.index(py["master"]) if py and py["master"] in names else -1
        pytorch_on = py is not None and master_i >= 0  # OnPodCreate returns without a change when no master task
        pt: dict[str, Any] = py or {}  # read only where pytorch_on (py is set)
        world_size = sum(c for n, c in zip(names, counts) if py and n in (pt["master"], pt["worker"]))
        master_addr = domain(name, ts[master_i], 0) if pytorch_on else None
        host_env = hosts(name, ts) if SVC in plug else {}
        queue = str(spec.get("queue") or DEFAULT_QUEUE)
        job_labels, job_annotations = propagated(m.metadata)

        # The world's order: with the pytorch plugin, RANK's (the master task, then the worker task); otherwise the
        # tasks' order. Other tasks' pods are listed, not ranked.
        if pytorch_on:
            world = [names.index(pt["master"])] + ([names.index(pt["worker"])] if pt["worker"] in names else [])
        else:
            world = list(range(len(ts)))
        offsets: dict[int, int] = {}
        seen = 0
        for ti in world:
            offsets[ti] = seen
            seen += counts[ti]

        groups: list[PodGroup] = []
        for ti, t in enumerate(ts):
            tname = names[ti]
            template = job_priority(mapping(t.get("template")), spec)  # the Job's priorityClassName, where none
            pspec = mapping(template.get("spec"))
            is_master = pytorch_on and tname == pt["master"]
            is_worker = pytorch_on and tname == pt["worker"]
            adds_wait = bool(is_worker and pt["wait"]) and not any(
                mapping(c).get("name") == WAIT_MASTER for c in listing(pspec.get("initContainers")))
            partition = mapping(t.get("partitionPolicy"))

            numa = t.get("topologyPolicy")

            def labels(i: int, tname: str = tname, partition: dict[str, Any] = partition) -> dict[str, str]:
                # createJobPod: "Set pod labels for Service."; the Job's own preemptable and cooldown-time labels.
                out = {TASK_INDEX: str(i), JOB_NAME: name, TASK_SPEC: tname, JOB_NAMESPACE: namespace,
                       QUEUE_NAME: queue, **job_labels}
                if partition:
                    size = as_int(partition.get("partitionSize"), 0) or 0
                    out[PARTITION_ID] = str(i // size if size > 0 else 0)
                return out

            def annotations(i: int, tname: str = tname) -> dict[str, str]:
                # createJobPod; the PodGroup annotation `<job>-<uid>`, job-version and retry count are known only in
                # the cluster.
                out = {TASK_INDEX: str(i), TASK_SPEC: tname, JOB_NAME: name, QUEUE_NAME: queue,
                       TEMPLATE_UID: f"{name}-{tname}", **job_annotations}
                if numa:
                    out[NUMA_POLICY] = str(numa)
                return out

            def inject(i: int, c: str, init: bool, is_master: bool = is_master, is_worker: bool = is_worker,
                       adds_wait: bool = adds_wait) -> list[Injected]:
                if init and adds_wait and c == WAIT_MASTER:
                    # The plugins run in Go map order: whether env and svc see the added init container varies.
                    return []
                out: list[Injected] = []
                if pytorch_on and not init:
                    out += [Injected("MASTER_ADDR", master_addr), Injected("MASTER_PORT", str(pt["port"])),
                            Injected("WORLD_SIZE", str(world_size))]
                    if is_worker:
                        out.append(Injected("RANK", str(i + 1)))
                    elif is_master:
                        out.append(Injected("RANK", "0"))
                if ENV in plug:
                    out += [Injected(VK_TASK_INDEX, str(i)), Injected(VC_TASK_INDEX, str(i))]
                out += [Injected(k, v) for k, v in host_env.items()]
                return out

            def init_containers(i: int, adds_wait: bool = adds_wait) -> list[dict[str, Any]]:
                if not adds_wait:
                    return []
                return [{"name": WAIT_MASTER, "image": pt["image"],
                         "command": ["sh", "-c", wait_script(master_addr or "", pt["port"], pt["timeout"])]}]

            port = pt["port"] if pytorch_on else None
            groups.append(PodGroup(
                role=tname,
                count=counts[ti],
                offset=offsets.get(ti, 0),
                template=template,
                template_field=f"spec.tasks[{ti}].template",
                name=indexed(f"{name}-{tname}"),
                # svc.go OnPodCreate: hostname = pod name and subdomain = job name where the template sets none.
                hostname=indexed(f"{name}-{tname}"),
                subdomain=name if SVC in plug else None,
                labels=labels,
                annotations=annotations,
                inject=inject,
                init_containers=init_containers,
                ports=_ports(port) if port else (lambda c: []),
                aux=ti not in offsets,
            ))
        w = VolcanoWorkload(m, self, groups, m.namespace, plugins=plug, pytorch=py, pytorch_on=pytorch_on,
                            tasks=names)
        if py is not None and not pytorch_on:
            w.notes.append(f"the pytorch plugin finds no task named '{py['master']}': it injects nothing")
        if SVC not in plug:
            w.notes.append("no svc plugin: no hostname, subdomain or Service from Volcano")
        w.needs += queue_needs(queue, DEFAULT_QUEUE, bundle) + priority_needs(spec, ts)
        return w

    def services(self, w: VolcanoWorkload) -> list[dict[str, Any]]:
        """svc.go createServiceIfNotExist: headless Service `<job>` selecting the job's pods by name and namespace,
        publishNotReadyAddresses only with `--publish-not-ready-addresses`."""
        plug = w.plugins
        if SVC not in plug:
            return []
        name = w.manifest.name
        return [{"name": name, "clusterIP": "None",
                 "selector": {JOB_NAME: name, JOB_NAMESPACE: w.manifest.namespace or "default"},
                 "publishNotReadyAddresses": svc_settings(plug[SVC])["publish"]}]

    def pods_field(self, w: Workload) -> str:
        return "spec.tasks"

    def setting_field(self, w: VolcanoWorkload, name: str) -> str | None:
        return {"nnodes": "spec.tasks"}.get(name) if w.pytorch_on else None

    def dns_field(self, w: Workload, pod: Any) -> str:
        return "metadata.name"

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        spec = mapping(m.obj.get("spec"))
        out: list[tuple[str, str, str, bool]] = []
        if SVC in plugins(spec):
            out.append(("metadata.name", m.name, "the svc plugin's headless Service", True))
        for ti, t in enumerate(tasks(spec)):
            last = max((as_int(t.get("replicas"), 0) or 0) - 1, 0)
            out.append((f"spec.tasks[{ti}].replicas", f"{m.name}-{t.get('name')}-{last}",
                        f"the hostname of task {t.get('name')} pod {last}", False))
        return out

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        for ti, t in enumerate(listing(dig(m.obj, "spec", "tasks"))):
            tmpl = mapping(t).get("template")
            if isinstance(tmpl, dict):
                yield f"spec.tasks[{ti}].template", tmpl

    def admission(self, w: VolcanoWorkload, bundle: Bundle, torchrun: bool) -> list[Check]:
        """pkg/webhooks/admission/jobs/validate/admit_job.go validateJobCreate (lines 121-242) at v1.15.1, after the
        mutating webhook (unnamed tasks named, svc added), in its order: at least one task (130-133); the mpi
        plugin's master task (135-142); the job's networkTopology (144); per task (146-176) minAvailable within
        replicas, a unique name (the loop stops at a repeat), its policies, the pod name, the pod template (core
        validation) and topologyPolicy's whole CPUs, the partitionPolicy; the job name (178), minAvailable within the
        replicas (180-182), the job's policies (183-186), known plugins (189-195), the volumes (197-199) and a
        dependsOn DAG (230-235); and a pytorch plugin that finds no master task. The queue (201-228) as far as the
        manifests decide it (queue_checks; whether it exists and is Open needs the cluster's Queues); not checked:
        what the CRD schema refuses first (negative replicas and minAvailable, an empty mountPath, an event outside
        the CRD's enum), which the SCHEMA rules report."""
        out: list[Check] = []
        m = w.manifest
        spec = mapping(m.obj.get("spec"))
        ts = tasks(spec)
        if not ts:
            return [Check("spec.tasks", f"No task specified in job spec: {REFUSED}", "add a task")]
        raw_plugins = mapping(spec.get("plugins"))
        if MPI in raw_plugins:
            mpi_master = go_flags([str(a) for a in listing(raw_plugins[MPI])],
                                  {"master": str, "worker": str, "port": int}).get("master", MPI_DEFAULT_MASTER)
            if mpi_master not in [str(t.get("name")) for t in ts]:
                # The webhook answers with this message alone.
                return [Check("spec.plugins.mpi", f"The specified mpi master task was not found: {REFUSED}",
                              f"name a task {mpi_master}, or pass --master=<task> to the mpi plugin")]
        out += topology_checks(spec.get("networkTopology"), "spec.networkTopology")
        seen: set[str] = set()
        total = 0
        reached = len(ts)
        for ti, t in enumerate(ts):
            tname = str(t.get("name"))
            replicas = as_int(t.get("replicas"), 0) or 0
            min_av = as_int(t.get("minAvailable"))
            if min_av is not None and min_av > replicas:
                out.append(Check(f"spec.tasks[{ti}].minAvailable", f"'minAvailable' is greater than 'replicas' in "
                                 f"task: {tname}, job: {m.name}: {REFUSED}",
                                 "set minAvailable to at most replicas"))
            total += replicas
            if tname in seen:
                out.append(Check(f"spec.tasks[{ti}].name", f"duplicated task name {tname}: {REFUSED}",
                                 "give every task its own name"))
                reached = ti + 1
                break
            seen.add(tname)
            out += policy_checks(t.get("policies"), f"spec.tasks[{ti}].policies", "spec.tasks.policies")
            why = _qualified(f"{m.name}-{tname}-{ti}")
            if why:
                out.append(Check(f"spec.tasks[{ti}].name", f"create pod with name {why}: {REFUSED}",
                                 "shorten the job or task name"))
            # validateTaskTemplate (339-368): ValidatePodTemplate, then (only where it passes) the topologyPolicy.
            template = core_validation.pod_template(t.get("template"), f"spec.tasks[{ti}].template",
                                                    refused=REFUSED)
            out += template or numa_checks(t, ti)
            out += partition_checks(t, ti, m.name)
        why = _qualified(m.name)
        if why:
            out.append(Check("metadata.name", f"create job with name {why}: {REFUSED}", "shorten the job name"))
        min_job = as_int(spec.get("minAvailable"), 0) or 0
        if total < min_job:
            out.append(Check("spec.minAvailable", "job 'minAvailable' should not be greater than total replicas in "
                             f"tasks: {REFUSED}", f"set minAvailable to at most {total}"))
        out += policy_checks(spec.get("policies"), "spec.policies", "spec.policies")
        for p in sorted(raw_plugins):
            if p not in PLUGINS:
                out.append(Check(f"spec.plugins.{p}", f"unable to find job plugin: {p}: {REFUSED}",
                                 f"use one of {', '.join(PLUGINS)}"))
        out += io_checks(spec.get("volumes"))
        out += queue_checks(str(spec.get("queue") or DEFAULT_QUEUE), queues(bundle))
        out += dag_checks(ts, reached)
        py = w.pytorch
        if py is not None and not w.pytorch_on and (torchrun or w.pods > 1):
            out.append(Check("spec.plugins.pytorch", f"the pytorch plugin's master task '{py['master']}' is not "
                             f"among the tasks ({', '.join(w.tasks)}): it injects no "
                             "MASTER_ADDR, MASTER_PORT, WORLD_SIZE or RANK",
                             f"name the tasks {py['master']} and {py['worker']}, or pass --master=<task> "
                             "--worker=<task> to the plugin"))
        return out

    def gang_scheduler(self, w: Workload) -> str | None:
        # mutate_job.go patchDefaultMinAvailable: minAvailable defaults to the sum of the tasks' replicas, and the
        # Volcano scheduler admits the PodGroup only when that many pods can run.
        return "Volcano PodGroup (minAvailable)"

    def publishes_not_ready(self, w: VolcanoWorkload) -> Check | None:
        plug = w.plugins
        if SVC in plug and not svc_settings(plug[SVC])["publish"]:
            return Check("spec.plugins.svc", "the svc plugin's Service publishes only Ready pods (no "
                         "--publish-not-ready-addresses): peers cannot resolve pod 0 until it is Ready",
                         "set plugins: {svc: [\"--publish-not-ready-addresses=true\"]}")
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        spec = mapping(w.manifest.obj.get("spec"))
        why = []
        actions = [mapping(p).get("action") for p in listing(spec.get("policies"))]
        for t in listing(spec.get("tasks")):
            actions += [mapping(p).get("action") for p in listing(mapping(t).get("policies"))]
        restarting = sorted({str(a) for a in actions if a in ("RestartJob", "RestartTask", "RestartPod",
                                                              "RestartPartition")})
        if restarting:
            why.append(f"policies {', '.join(restarting)}")
        for t in listing(spec.get("tasks")):
            policy = dig(t, "template", "spec", "restartPolicy")
            if policy in (None, "Always", "OnFailure"):
                why.append(f"restartPolicy {policy or 'Always'}")
                break
        return why

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        spec = mapping(m.obj.get("spec"))
        ts = listing(spec.get("tasks"))
        py = pytorch_settings(plugins(spec).get(PYTORCH, [])) if PYTORCH in plugins(spec) else None
        changed = []
        for t in ts:
            t = mapping(t)
            if py and t.get("name") == py["master"]:
                t["replicas"] = 1
            elif py and t.get("name") == py["worker"]:
                t["replicas"] = max(nodes - 1, 0)
            elif not py:
                t["replicas"] = nodes
            else:
                continue
            changed.append(f"{t.get('name')} replicas -> {t['replicas']}")
            if t.get("minAvailable") is not None:
                t["minAvailable"] = t["replicas"]
        spec.pop("minAvailable", None)
        return [f"{m.ref}: " + ", ".join(changed)]


LAUNCHER = VolcanoJobLauncher()
