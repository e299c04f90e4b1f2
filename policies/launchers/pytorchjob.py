"""Kubeflow Training Operator v1 PyTorchJob (kubeflow.org/v1, kubeflow/trainer tag v1.9.4, the training-operator
repository under its new name): pods `<job>-<replica type>-<index>`, one Service each, and the env it injects
(pkg/controller.v1/pytorch/envvar.go, elastic.go, master.go; pkg/apis/kubeflow.org/v1/pytorch_defaults.go)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..kube.values import DNS1035, as_int, dig, listing, mapping
from ..kube.objects import WARNING, Manifest
from ..model.trainer_contract import contract
from .base import Bundle, Check, Launcher, ScaleSpec, Workload
from .lifecycle import FAIL, RECREATE_POD, Decision, PodExit, RestartCount, completed, kubelet_restarts
from .pods import Injected, Pod, PodGroup, indexed

KIND = "PyTorchJob"
MASTER, WORKER = "Master", "Worker"
CONTAINER = "pytorch"
PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
LABEL_PREFIX = "training.kubeflow.org/"
OPERATOR_NAME = "pytorchjob-controller"
INIT_CONTAINER = "init-pytorch"
# common_types.go: the managedBy values the webhook accepts (ValidateRunPolicy).
MANAGED_BY = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


def replica_specs(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(k): mapping(v) for k, v in mapping(spec.get("pytorchReplicaSpecs")).items()}


def replica_order(specs: dict[str, Any]) -> list[str]:
    """Master first, then Workers, then any other type: the order ranks are given in."""
    return [t for t in (MASTER, WORKER) if t in specs] + sorted(t for t in specs if t not in (MASTER, WORKER))


def container_port(rspec: dict[str, Any]) -> int:
    """The `pytorchjob-port` of a replica's `pytorch` container (the defaulter adds 23456 where it is missing)."""
    for c in listing(dig(rspec, "template", "spec", "containers")):
        c = mapping(c)
        if c.get("name") == CONTAINER:
            for p in listing(c.get("ports")):
                p = mapping(p)
                if p.get("name") == PORT_NAME:
                    return as_int(p.get("containerPort"), DEFAULT_PORT) or DEFAULT_PORT
    return DEFAULT_PORT


def default_port(rspec: dict[str, Any]) -> Any:
    """pytorch_defaults.go setPyTorchDefaultPort: `pytorchjob-port` 23456 on the `pytorch` container (container 0
    where none is named so) when it has no port of that name."""
    containers = [mapping(c) for c in listing(dig(rspec, "template", "spec", "containers"))]
    names = [c.get("name") for c in containers]
    target = CONTAINER if CONTAINER in names else (names[0] if names else None)
    have = any(mapping(p).get("name") == PORT_NAME for c in containers if c.get("name") == target
               for p in listing(c.get("ports")))
    port = {"name": PORT_NAME, "containerPort": DEFAULT_PORT, "protocol": "TCP"}
    return lambda c: [port] if (c == target and not have) else []


def elastic_range(spec: dict[str, Any], specs: dict[str, dict[str, Any]]) -> tuple[int | None, int | None]:
    """`elasticPolicy` min and max replicas after the defaulter (pytorch_defaults.go setElasticPolicy): a missing one
    is set from the other, both missing from the Worker replicas."""
    policy = mapping(spec.get("elasticPolicy"))
    mn, mx = as_int(policy.get("minReplicas")), as_int(policy.get("maxReplicas"))
    if mn is None and mx is None:
        workers = as_int(specs.get(WORKER, {}).get("replicas"), 1) if WORKER in specs else None
        return workers, workers
    return (mn if mn is not None else mx), (mx if mx is not None else mn)


def nproc_per_node(spec: dict[str, Any]) -> str:
    """The processes per node torchrun is told (PET_NPROC_PER_NODE): the deprecated `elasticPolicy.nProcPerNode`
    where set (elastic.go appends it after `spec.nprocPerNode`'s, so it wins), else `spec.nprocPerNode`, which the
    defaulter sets to `auto` (pytorch_defaults.go setDefaultNprocPerNode)."""
    legacy = mapping(spec.get("elasticPolicy")).get("nProcPerNode")
    if legacy is not None:
        return str(legacy)
    return str(spec["nprocPerNode"]) if spec.get("nprocPerNode") is not None else "auto"


def init_container(job: str) -> dict[str, Any]:
    """initcontainer.go's template at v1.9.4 (image and tries from config.go's defaults)."""
    master = f"{job}-master-0"
    return {"name": INIT_CONTAINER, "image": "alpine:3.10", "imagePullPolicy": "IfNotPresent",
            "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
            "command": ["sh", "-c", f"err=1;for i in $(seq 100); do if nslookup {master}; then err=0 && break; fi;"
                        "echo waiting for master; sleep 2; done; exit $err"]}


@dataclass
class PyTorchJobWorkload(Workload):
    """A PyTorchJob's pods, and the nprocPerNode the operator counts in WORLD_SIZE."""

    nproc_per_node: Any = None


class PyTorchJobLauncher(Launcher[PyTorchJobWorkload]):
    id = "pytorchjob"
    order = 10
    upstream = "kubeflow/trainer v1.9.4 (the training-operator line)"
    title = "Kubeflow PyTorchJob"
    managed_by_field = ("spec", "runPolicy", "managedBy")
    controller_name = "kubeflow.org/training-operator"  # pkg/apis/kubeflow.org/v1/common_types.go:40
    managed_by_source = ("kubeflow/trainer v1.9.4 pkg/controller.v1/pytorch/pytorchjob_controller.go:135, "
                         "common/job.go:459")
    suspend_field = ("spec", "runPolicy", "suspend")
    suspend_source = "kubeflow/trainer v1.9.4 pkg/controller.v1/common/job.go:146 (deletes the pods, creates none)"
    kinds = (("kubeflow.org", KIND),)
    # pytorch-operator's first API (v0.3.0 pkg/apis/pytorch/v1alpha1/types.go 47-70): a list spec.replicaSpecs of
    # replicaType MASTER/WORKER, no pytorchReplicaSpecs map; not read as a v1 PyTorchJob.
    unread_versions = ("v1alpha1",)
    # Kueue's integration for it (FrameworkName, kubernetes-sigs/kueue v0.19.2
    # pkg/controller/jobs/kubeflow/jobs/pytorchjob/pytorchjob_controller.go:37)
    kueue_framework = "kubeflow.org/pytorchjob"
    for_training = True
    managed_dns = True
    immutable = ("spec",)
    ttl_field = ("spec", "runPolicy", "ttlSecondsAfterFinished")
    restart_budget_path = "/spec/runPolicy/backoffLimit"
    scale = ScaleSpec(pods=[(("spec", "pytorchReplicaSpecs", WORKER, "replicas"), -1)],
                      nproc=[("spec", "nprocPerNode")],
                      resources=[("spec", "pytorchReplicaSpecs", "*", "template", "spec", "containers", 0,
                                  "resources")])

    def build(self, m: Manifest, bundle: Bundle) -> PyTorchJobWorkload:
        spec = mapping(m.obj.get("spec"))
        name = m.name
        specs = replica_specs(spec)
        order = replica_order(specs)
        counts = {t: as_int(specs[t].get("replicas"), 1) or 0 for t in order}
        total = sum(counts.values())
        elastic = spec.get("elasticPolicy") if isinstance(spec.get("elasticPolicy"), dict) else None
        legacy_nproc = mapping(elastic).get("nProcPerNode")
        # setDefaultNprocPerNode: spec.nprocPerNode becomes "auto" unless the deprecated elastic field is set.
        spec_nproc = spec.get("nprocPerNode")
        if spec_nproc is None and legacy_nproc is None:
            spec_nproc = "auto"
        nproc = nproc_per_node(spec)
        has_master = MASTER in specs
        master_port = container_port(specs[MASTER]) if has_master else DEFAULT_PORT
        # envvar.go getNprocPerNodeInt: WORLD_SIZE reads spec.nprocPerNode only, a non-integer counting as 1.
        world = total * (as_int(spec_nproc, 1) or 1) if spec_nproc is not None else total
        mn, mx = elastic_range(spec, specs) if elastic is not None else (None, None)

        def env(rank: int) -> list[Injected]:
            """envvar.go setPodEnv at v1.9.4, in its order, appended to every container."""
            out = [Injected("PYTHONUNBUFFERED", "1")]
            if has_master:
                out += [Injected("MASTER_PORT", str(master_port)), Injected("PET_MASTER_PORT", str(master_port)),
                        Injected("MASTER_ADDR", f"{name}-master-0"), Injected("PET_MASTER_ADDR", f"{name}-master-0"),
                        Injected("WORLD_SIZE", str(world)), Injected("RANK", str(rank)),
                        Injected("PET_NODE_RANK", str(rank))]
            if spec_nproc is not None:
                out.append(Injected("PET_NPROC_PER_NODE", str(spec_nproc)))
            if elastic is None:
                out.append(Injected("PET_NNODES", str(total)))
                return out
            # elastic.go Generate
            host = elastic.get("rdzvHost") or f"{name}-worker-0"
            port = elastic.get("rdzvPort") or container_port(specs.get(WORKER, {}))
            out += [Injected("PET_RDZV_ENDPOINT", f"{host}:{port}"),
                    Injected("PET_RDZV_BACKEND", str(elastic.get("rdzvBackend") or "c10d")),
                    Injected("PET_NNODES", f"{mn}:{mx}")]
            if elastic.get("maxRestarts") is not None:
                out.append(Injected("PET_MAX_RESTARTS", str(elastic["maxRestarts"])))
            if legacy_nproc is not None:
                out.append(Injected("PET_NPROC_PER_NODE", str(legacy_nproc)))
            if elastic.get("rdzvId") is not None:
                out.append(Injected("PET_RDZV_ID", str(elastic["rdzvId"])))
            if isinstance(elastic.get("rdzvConf"), list):
                conf = [f"{mapping(c).get('key')}={mapping(c).get('value')}" for c in elastic["rdzvConf"]]
                if conf:
                    out.append(Injected("PET_RDZV_CONF", ",".join(conf)))
            if elastic.get("standalone") is True:
                out.append(Injected("PET_STANDALONE", ""))
            return out

        groups: list[PodGroup] = []
        offset = 0
        def ranked(offset: int) -> Callable[[int, str, bool], list[Injected]]:
            """A replica type's env: pod i is rank i + offset (no env in init containers)."""
            return lambda i, c, init: [] if init else env(i + offset)

        for rtype in order:
            rt = rtype.lower()
            # RANK counts the Master first: a Worker's rank is its index + 1 (only set when a Master exists).
            rank_offset = 1 if (rtype == WORKER and has_master) else 0

            def labels(i: int, rtype: str = rtype, rt: str = rt) -> dict[str, str]:
                out = {LABEL_PREFIX + "job-name": name, LABEL_PREFIX + "operator-name": OPERATOR_NAME,
                       LABEL_PREFIX + "replica-type": rt, LABEL_PREFIX + "replica-index": str(i)}
                # IsMasterRole: the Master, or Worker 0 of a job without one.
                if rtype == MASTER or (not has_master and rtype == WORKER and i == 0):
                    out[LABEL_PREFIX + "job-role"] = "master"
                return out

            groups.append(PodGroup(
                role=rtype,
                count=counts[rtype],
                offset=offset,
                template=mapping(specs[rtype].get("template")),
                template_field=f"spec.pytorchReplicaSpecs.{rtype}.template",
                name=indexed(f"{name}-{rt}"),
                hostname=indexed(f"{name}-{rt}"),
                labels=labels,
                inject=ranked(rank_offset),
                init_containers=(lambda i: [init_container(name)]) if (rtype == WORKER and has_master)
                else (lambda i: []),
                container_name=CONTAINER,
                ports=default_port(specs[rtype]),
            ))
            offset += counts[rtype]
        return PyTorchJobWorkload(m, self, groups, m.namespace,
                                  elastic_range=(mn, mx) if elastic is not None else None, nproc_per_node=nproc)

    def services(self, w: Workload) -> list[dict[str, Any]]:
        """common/service.go: one headless Service per replica, named like its pod, selecting it by job name,
        replica type and index."""
        out = []
        for g in w.groups:
            for i in range(min(g.count, 1024)):
                labels = g.labels(i)
                out.append({"name": g.name(i), "clusterIP": "None",
                            "selector": {k: labels[k] for k in (LABEL_PREFIX + "job-name",
                                                                LABEL_PREFIX + "operator-name",
                                                                LABEL_PREFIX + "replica-type",
                                                                LABEL_PREFIX + "replica-index")}})
        return out

    def pods_field(self, w: Workload) -> str:
        return "spec.pytorchReplicaSpecs"

    def setting_field(self, w: Workload, name: str) -> str | None:
        return {"nproc": "spec.nprocPerNode", "nnodes": "spec.pytorchReplicaSpecs",
                "rdzv_id": "spec.elasticPolicy.rdzvId", "max_restarts": "spec.elasticPolicy.maxRestarts"}.get(name)

    def address(self, w: Workload, pod: Pod) -> str:
        return pod.name  # the operator's per-replica Service `<job>-<type>-<index>`

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        out = []
        for rtype, rspec in replica_specs(mapping(m.obj.get("spec"))).items():
            last = max((as_int(rspec.get("replicas"), 1) or 1) - 1, 0)
            out.append((f"spec.pytorchReplicaSpecs.{rtype}.replicas", f"{m.name}-{rtype.lower()}-{last}",
                        f"the operator's Service for {rtype} {last}", True))
        return out

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        for rtype, rspec in replica_specs(mapping(m.obj.get("spec"))).items():
            if isinstance(rspec.get("template"), dict):
                yield f"spec.pytorchReplicaSpecs.{rtype}.template", rspec["template"]

    def admission(self, w: PyTorchJobWorkload, bundle: Bundle, torchrun: bool) -> list[Check]:
        """pkg/webhooks/pytorch/pytorchjob_webhook.go validatePyTorchJob at v1.9.4 (it runs before the defaulter:
        an omitted Master `replicas` is refused), and what breaks a world the webhook lets through."""
        out: list[Check] = []
        m = w.manifest
        spec = mapping(m.obj.get("spec"))
        if m.name and (not DNS1035.match(m.name) or len(m.name) > 63):
            out.append(Check("metadata.name", f"name '{m.name}' is not a DNS-1035 label: the webhook refuses it",
                             "use lowercase letters, digits and '-', starting with a letter"))
        managed_by = mapping(spec.get("runPolicy")).get("managedBy")
        if managed_by is not None and managed_by not in MANAGED_BY:
            out.append(Check("spec.runPolicy.managedBy", f"managedBy '{managed_by}' is not one the webhook accepts "
                             f"({', '.join(MANAGED_BY)})", "remove it, or use one of those"))
        elastic = spec.get("elasticPolicy")
        specs = replica_specs(spec)
        if isinstance(elastic, dict):
            if WORKER not in specs:
                out.append(Check("spec.pytorchReplicaSpecs", "an elasticPolicy without a Worker replica spec: the "
                                 "webhook refuses it", "add a Worker replica spec"))
            if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
                out.append(Check("spec.elasticPolicy.nProcPerNode", "elasticPolicy.nProcPerNode (deprecated) and "
                                 "spec.nprocPerNode are both set: the webhook refuses it",
                                 "keep spec.nprocPerNode only"))
        for rtype, rspec in specs.items():
            where = f"spec.pytorchReplicaSpecs.{rtype}"
            if rtype not in (MASTER, WORKER):
                out.append(Check(where, f"replica type '{rtype}' is not Master or Worker: the webhook refuses it",
                                 "name the replica types Master and Worker"))
            containers = [mapping(c) for c in listing(dig(rspec, "template", "spec", "containers"))]
            for i, c in enumerate(containers):
                if not c.get("image"):
                    out.append(Check(f"{where}.template.spec.containers[{i}].image", f"container {i} of {rtype} has "
                                     "no image: the webhook refuses it", "set the image"))
            names = [c.get("name") for c in containers]
            if CONTAINER not in names:
                out.append(Check(f"{where}.template.spec.containers", f"no container named '{CONTAINER}' in "
                                 f"{rtype} (found {names})", f"name the training container {CONTAINER}"))
            replicas = as_int(rspec.get("replicas"))
            if rtype == MASTER and replicas != 1:
                out.append(Check(f"{where}.replicas", f"Master replicas is {rspec.get('replicas', 'unset')}, expected "
                                 "1 (the webhook refuses anything else, unset included)", "use 1 Master and N-1 Workers"))
            elif rtype != MASTER and replicas is not None and replicas < 1:
                out.append(Check(f"{where}.replicas", f"{rtype} replicas is {replicas}: the webhook requires at least "
                                 "1", "set replicas to 1 or more, or remove the replica type"))
        nproc = w.nproc_per_node
        if not torchrun and str(nproc).isdigit() and int(nproc) > 1:
            # envvar.go: WORLD_SIZE counts replicas x nprocPerNode while each pod starts one process.
            # The repository's trainer starts one process; another script may start nprocPerNode itself
            # (torch.multiprocessing.spawn), which the manifests do not show.
            own = w.pods > 0 and contract.starts_trainer([str(a) for a in w.pod(0).argv()[0]]) is not None
            out.append(Check("spec.nprocPerNode", f"nprocPerNode is {nproc} but the container does not start "
                             f"torchrun: WORLD_SIZE counts {nproc} processes per pod, "
                             + (f"one starts ({contract.SCRIPT})" if own else f"so unless the script starts {nproc} "
                                "processes itself, the world waits for ranks that never come"),
                             "start the script with torchrun, or set nprocPerNode to 1",
                             severity=None if own else WARNING))
        return out

    def gang_scheduler(self, w: Workload) -> str | None:
        return "schedulingPolicy" if mapping(dig(w.manifest.obj, "spec", "runPolicy")).get("schedulingPolicy") else None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        spec = mapping(w.manifest.obj.get("spec"))
        why = []
        if spec.get("elasticPolicy"):
            why.append("elasticPolicy")
        backoff = mapping(spec.get("runPolicy")).get("backoffLimit")
        policies = {rs.get("restartPolicy") or "OnFailure" for rs in replica_specs(spec).values()}
        restarting = sorted(policies - {"Never"})
        if restarting and backoff != 0:
            why.append(f"restartPolicy {restarting[0]}")
        return why

    def restart_limit(self, w: Workload, losses: int) -> tuple[str, str]:
        return "spec.runPolicy.backoffLimit", (
            f"set runPolicy.backoffLimit above {losses} x the container restarts one lost pod costs (every pod of a "
            f"static world: {losses * w.pods + 1} for {w.pods} pods), or restart workers in torchrun on a dynamic "
            "rendezvous")

    def after_exit(self, w: Workload, bundle: Bundle, ended: PodExit, count: RestartCount) -> Decision:
        """training-operator v1.9.4: a replica's restartPolicy becomes the pod's (pkg/core/pod.go SetRestartPolicy;
        ExitCode -> Never), OnFailure by default (pytorch_types.go PyTorchJobDefaultRestartPolicy). OnFailure/Always:
        the kubelet restarts the container and the operator fails the job once the sum of the restartCounts of its
        running pods reaches runPolicy.backoffLimit (pkg/core/job.go PastBackoffLimit, lines 95-133, the same in
        v1.9.0 to v1.9.4: line 115 skips pods not Running, lines 118-125 add every container's restartCount, line
        130 fails at any restart when the limit is 0, line 132 at `result >= backoffLimit`; called from
        pkg/controller.v1/common/job.go line 200, the job failed at line 206). The sum is per pod: when one lost pod
        ends every pod's torchrun (a static world), every pod's container restarts and each counts, so a world of
        4 pods with backoffLimit 3 fails at its first lost pod. ExitCode: a failed pod with a retryable exit code
        (>= 128, pkg/util/train/train_util.go IsRetryableExitCode) is deleted and created again, any other fails the
        job (pkg/controller.v1/common/pod.go ReconcilePods, lines 352 and 367); under torchrun a pre-empted or
        evicted pod exits 1, not 143 (torchrun ends with its workers' failure), as do the peers that lost it, so
        ExitCode retries none of them. Never: a failed replica fails the job (pytorchjob_controller.go
        UpdateJobStatus, line 441). A deleted pod is created again under the same name (ReconcilePods creates the
        missing indexes, pod.go line 316); a pod on a lost node stays in its index's slice until the Node object is
        deleted or the pod force-deleted (GetPodSlices, pod.go line 312), so only then."""
        who, src = "PyTorchJob operator", "training-operator v1.9.4 "
        spec = mapping(w.manifest.obj.get("spec"))
        group, _ = w.group_at(ended.index)
        replica = mapping(replica_specs(spec).get(group.role))
        policy = replica.get("restartPolicy") or "OnFailure"
        backoff = as_int(mapping(spec.get("runPolicy")).get("backoffLimit"))
        pod_policy = "Never" if policy == "ExitCode" else policy
        # completed and kubelet_restarts read the pod spec's restartPolicy only: the pod itself need not be made.
        pod_spec = {"restartPolicy": pod_policy}

        def head() -> str:  # worded only when a message is read
            return f"{group.role} restartPolicy {policy}, backoffLimit {backoff if backoff is not None else 'unset'}"
        done = completed(pod_spec, ended)
        if done is not None:  # UpdateJobStatus (pytorchjob_controller.go): a Master's success ends the job (383-401);
            # without a Master, all Workers' do, or any one's where elasticPolicy is set (404-417, the test at 409)
            place = f"({src}pkg/controller.v1/pytorch/pytorchjob_controller.go:"
            if group.role == MASTER:
                done.ends_job = f"the Master succeeded -> PyTorchJob succeeded {place}390)"
            elif MASTER not in replica_specs(spec) and isinstance(spec.get("elasticPolicy"), dict):
                done.ends_job = f"a Worker succeeded and elasticPolicy is set -> PyTorchJob succeeded {place}409)"
            return done
        in_place = kubelet_restarts(pod_spec, ended, count)
        if in_place is not None:
            restarts = count.total_restarts() + 1
            if backoff is not None and (restarts > 0 if backoff == 0 else restarts >= backoff):
                return Decision(FAIL, who, f"{head()}: {restarts} container restart{'s' if restarts != 1 else ''} "
                                f"reach the limit -> PyTorchJob failed", src + "pkg/core/job.go:132 PastBackoffLimit")
            in_place.head = lambda: f"{head()} ({restarts} restarts counted)"
            return in_place
        if ended.node_lost:
            return Decision(RECREATE_POD, who, f"{head()}, pod on a lost node -> created again, same name, only once "
                            "the Node object is deleted or the pod force-deleted",
                            src + "pkg/controller.v1/common/pod.go:312", awaits_node=True)
        if ended.deleted:
            return Decision(RECREATE_POD, who, f"{head()}, pod deleted -> created again, same name",
                            src + "pkg/controller.v1/common/pod.go ReconcilePods")
        if policy == "ExitCode":
            if ended.exit_code >= 128:
                failures = count.total_failed() + 1
                if backoff is not None and failures > backoff:
                    return Decision(FAIL, who, f"{head()}: {failures} failed pods > {backoff} -> PyTorchJob failed",
                                    src + "pkg/controller.v1/common/job.go ReconcileJobs exceedsBackoffLimit")
                return Decision(RECREATE_POD, who, f"{head()}: exit code {ended.exit_code} is retryable (>= 128) -> "
                                "pod deleted and created again, same name", src + "pkg/controller.v1/common/pod.go:352")
            torchrun = " (torchrun exits 1 when its workers fail, a pre-emption's SIGTERM included)" \
                if ended.exit_code == 1 else ""
            return Decision(FAIL, who, f"{head()}: exit code {ended.exit_code} is not retryable{torchrun} -> "
                            "PyTorchJob failed", src + "pkg/controller.v1/common/pod.go:367")
        return Decision(FAIL, who, f"{head()}: a {group.role} replica failed -> PyTorchJob failed",
                        src + "pkg/controller.v1/pytorch/pytorchjob_controller.go:441")

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        spec = m.obj.setdefault("spec", {})
        specs = spec.get("pytorchReplicaSpecs") or {}
        workers = nodes - (1 if MASTER in specs else 0)
        if WORKER in specs:
            specs[WORKER]["replicas"] = workers
        spec["nprocPerNode"] = "1"
        return [f"{m.ref}: Worker replicas -> {workers}, nprocPerNode -> 1"]


LAUNCHER = PyTorchJobLauncher()
