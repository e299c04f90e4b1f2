"""Kubeflow Training Operator v1 PyTorchJob (kubeflow.org/v1, kubeflow/trainer tag v1.9.4, the training-operator
repository under its new name): pods `<job>-<replica type>-<index>`, one Service each, and the env it injects
(pkg/controller.v1/pytorch/envvar.go, elastic.go, master.go; pkg/apis/kubeflow.org/v1/pytorch_defaults.go)."""
from __future__ import annotations

from typing import Any, Iterator

from ..model import Manifest
from .base import Bundle, Check, Injected, Launcher, PodGroup, ScaleSpec, Workload, as_int, dig, listing, mapping

KIND = "PyTorchJob"
MASTER, WORKER = "Master", "Worker"
CONTAINER = "pytorch"
PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
LABEL_PREFIX = "training.kubeflow.org/"
OPERATOR_NAME = "pytorchjob-controller"
INIT_CONTAINER = "init-pytorch"


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
    """`spec.nprocPerNode`, else the deprecated `elasticPolicy.nProcPerNode`, else the default `auto`."""
    if spec.get("nprocPerNode") is not None:
        return str(spec["nprocPerNode"])
    legacy = mapping(spec.get("elasticPolicy")).get("nProcPerNode")
    return str(legacy) if legacy is not None else "auto"


class PyTorchJobLauncher(Launcher):
    id = "pytorchjob"
    title = "Kubeflow PyTorchJob"
    kinds = (("kubeflow.org", KIND),)
    for_training = True
    managed_dns = True
    immutable = ("spec",)
    ttl_field = ("spec", "runPolicy", "ttlSecondsAfterFinished")
    scale = ScaleSpec(pods=[(("spec", "pytorchReplicaSpecs", WORKER, "replicas"), -1)],
                      nproc=[("spec", "nprocPerNode")],
                      resources=[("spec", "pytorchReplicaSpecs", "*", "template", "spec", "containers", 0,
                                  "resources")])

    def build(self, m: Manifest, bundle: Bundle) -> Workload:
        spec = mapping(m.obj.get("spec"))
        name = m.name
        specs = replica_specs(spec)
        order = replica_order(specs)
        counts = {t: as_int(specs[t].get("replicas"), 1) or 0 for t in order}
        total = sum(counts.values())
        nproc = nproc_per_node(spec)
        elastic = spec.get("elasticPolicy") if isinstance(spec.get("elasticPolicy"), dict) else None
        has_master = MASTER in specs
        master_port = container_port(specs[MASTER]) if has_master else DEFAULT_PORT
        nproc_int = as_int(nproc)
        world = total * nproc_int if nproc_int is not None else total
        mn, mx = elastic_range(spec, specs) if elastic is not None else (None, None)

        def env(i: int, rtype: str, offset: int) -> list[Injected]:
            out = [Injected("PYTHONUNBUFFERED", "1")]
            if has_master:
                rank = i + offset
                out += [Injected("MASTER_PORT", str(master_port)), Injected("PET_MASTER_PORT", str(master_port)),
                        Injected("MASTER_ADDR", f"{name}-master-0"), Injected("PET_MASTER_ADDR", f"{name}-master-0"),
                        Injected("WORLD_SIZE", str(world)), Injected("RANK", str(rank)),
                        Injected("PET_NODE_RANK", str(rank))]
            out.append(Injected("PET_NPROC_PER_NODE", nproc))
            if elastic is None:
                out.append(Injected("PET_NNODES", str(total)))
            else:
                host = elastic.get("rdzvHost") or f"{name}-worker-0"
                port = elastic.get("rdzvPort") or container_port(specs.get(WORKER, {}))
                out += [Injected("PET_RDZV_ENDPOINT", f"{host}:{port}"),
                        Injected("PET_RDZV_BACKEND", str(elastic.get("rdzvBackend") or "c10d")),
                        Injected("PET_NNODES", f"{mn}:{mx}")]
                if elastic.get("maxRestarts") is not None:
                    out.append(Injected("PET_MAX_RESTARTS", str(elastic["maxRestarts"])))
                if elastic.get("rdzvId"):
                    out.append(Injected("PET_RDZV_ID", str(elastic["rdzvId"])))
                conf = [f"{mapping(c).get('key')}={mapping(c).get('value')}" for c in listing(elastic.get("rdzvConf"))]
                if conf:
                    out.append(Injected("PET_RDZV_CONF", ",".join(conf)))
            return out

        groups: list[PodGroup] = []
        offset = 0
        for rtype in order:
            rt = rtype.lower()
            rank_offset = offset if (rtype != WORKER or has_master) else 0

            def labels(i: int, rt: str = rt) -> dict[str, str]:
                out = {LABEL_PREFIX + "job-name": name, LABEL_PREFIX + "operator-name": OPERATOR_NAME,
                       LABEL_PREFIX + "replica-type": rt, LABEL_PREFIX + "replica-index": str(i)}
                if rt == "master":
                    out[LABEL_PREFIX + "job-role"] = "master"
                return out

            groups.append(PodGroup(
                role=rtype,
                count=counts[rtype],
                offset=offset,
                template=mapping(specs[rtype].get("template")),
                template_field=f"spec.pytorchReplicaSpecs.{rtype}.template",
                name=lambda i, rt=rt: f"{name}-{rt}-{i}",
                hostname=lambda i, rt=rt: f"{name}-{rt}-{i}",
                labels=labels,
                inject=lambda i, c, init, rtype=rtype, o=rank_offset: [] if init else env(i, rtype, o),
                init_containers=(lambda i: [{"name": INIT_CONTAINER, "command": [
                    "sh", "-c", f"until nslookup {name}-master-0; do echo waiting for master; sleep 2; done"]}])
                if (rtype == WORKER and has_master) else (lambda i: []),
                container_name=CONTAINER,
            ))
            offset += counts[rtype]
        w = Workload(m, self, groups, m.namespace)
        w.facts.update(nproc_per_node=nproc, elastic=elastic, master_port=master_port, replica_counts=counts,
                       elastic_range=(mn, mx))
        return w

    def pods_field(self, w: Workload) -> str:
        return "spec.pytorchReplicaSpecs"

    def setting_field(self, w: Workload, name: str) -> str | None:
        return {"nproc": "spec.nprocPerNode", "nnodes": "spec.pytorchReplicaSpecs",
                "rdzv_id": "spec.elasticPolicy.rdzvId"}.get(name)

    def address(self, w: Workload, pod: Any) -> str:
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

    def admission(self, w: Workload, bundle: Bundle, torchrun: bool) -> list[Check]:
        out: list[Check] = []
        counts = w.facts.get("replica_counts") or {}
        if MASTER in counts and counts[MASTER] != 1:
            out.append(Check(f"spec.pytorchReplicaSpecs.{MASTER}.replicas", f"Master replicas is {counts[MASTER]}, "
                             "expected 1", "use 1 Master and N-1 Workers"))
        for g in w.groups:
            names = [mapping(c).get("name") for c in listing(dig(g.template, "spec", "containers"))]
            if CONTAINER not in names:
                out.append(Check(f"{g.template_field}.spec.containers", f"no container named '{CONTAINER}' in "
                                 f"{g.role} (found {names})", f"name the training container {CONTAINER}"))
        nproc = w.facts.get("nproc_per_node")
        if not torchrun and str(nproc).isdigit() and int(nproc) > 1:
            # envvar.go: WORLD_SIZE counts replicas x nprocPerNode while each pod starts one process.
            out.append(Check("spec.nprocPerNode", f"nprocPerNode is {nproc} but the container does not start "
                             f"torchrun: WORLD_SIZE counts {nproc} processes per pod, one starts",
                             "start the script with torchrun, or set nprocPerNode to 1"))
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

    def describe(self, w: Workload) -> str:
        return "controller"

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        spec = m.obj.setdefault("spec", {})
        specs = spec.get("pytorchReplicaSpecs") or {}
        workers = nodes - (1 if MASTER in specs else 0)
        if WORKER in specs:
            specs[WORKER]["replicas"] = workers
        spec["nprocPerNode"] = "1"
        return [f"{m.ref}: Worker replicas -> {workers}, nprocPerNode -> 1"]


LAUNCHER = PyTorchJobLauncher()
