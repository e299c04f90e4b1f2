"""One model of the launchers: from the rendered objects of one overlay, the pods each controller would create,
with the hostnames, labels, annotations and env it gives them (see ../shared/DESIGN.md section 1).
The topology policies read it; `make simulate` is meant to start the very same pods."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from .model import Manifest

TRAINJOB_STEP_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
POD_INDEX = "apps.kubernetes.io/pod-index"
PYTORCHJOB_PORT_NAME = "pytorchjob-port"
PYTORCHJOB_DEFAULT_PORT = 23456
TRAINJOB_MASTER_PORT = 29500
# Upstream's default runtime, used (and said to be used) when a TrainJob names it without shipping it.
UPSTREAM_RUNTIME_FILE = Path(__file__).with_name("upstream") / "torch_distributed.yaml"


def as_int(value: Any, default: int | None = None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        return default


@dataclass
class Pod:
    """One pod as the controller would create it, and its training container with the env the kubelet would see."""

    index: int
    name: str
    hostname: str
    subdomain: str | None
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]
    spec_field: str
    container: dict[str, Any]
    container_field: str
    env: dict[str, str | None]
    env_fields: dict[str, str]
    injected: set[str]

    def expand(self, text: str) -> str:
        """Kubernetes `$(VAR)` expansion in command and args, against this container's env; `$$` escapes."""
        return _expand_k8s(text, self.env)

    def argv(self) -> tuple[list[str], list[str]]:
        """The container's command + args after `$(VAR)` expansion, with the field path of each token."""
        out: list[str] = []
        fields: list[str] = []
        env, cf = self.env, self.container_field
        for key in ("command", "args"):
            tokens = self.container.get(key)
            if not tokens:
                continue
            prefix = f"{cf}.{key}["
            for i, tok in enumerate(tokens):
                tok = str(tok)
                out.append(_expand_k8s(tok, env) if "$" in tok else tok)
                fields.append(f"{prefix}{i}]")
        return out, fields


_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def _expand_k8s(text: str, env: dict[str, str | None]) -> str:
    if "$" not in text:
        return text

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        value = env.get(m.group(1))
        return m.group(0) if value is None else value

    return _K8S_VAR.sub(sub, text)


@dataclass
class PodGroup:
    """Pods made from one template: a PyTorchJob replica type, a Job's pods, a JobSet replicated Job."""

    role: str
    count: int
    offset: int
    template: dict[str, Any]
    template_field: str
    hostname: Callable[[int], str]
    subdomain: str | None
    extra_labels: Callable[[int], dict[str, str]]
    extra_annotations: Callable[[int], dict[str, str]] = lambda i: {}
    injected_env: Callable[[int], list[tuple[str, str]]] = lambda i: []
    container_name: str | None = None
    # A runtime's container, merged under the TrainJob's trainer settings.
    container_overrides: dict[str, Any] = field(default_factory=dict)
    container_override_field: str | None = None


@dataclass
class Workload:
    """A training workload: the object, its launcher and the pods it stands for."""

    manifest: Manifest
    launcher: str
    groups: list[PodGroup]
    namespace: str
    # The controller creates the DNS records itself (PyTorchJob per-replica Services, JobSet's headless Service).
    managed_dns: bool = False
    notes: list[str] = field(default_factory=list)
    # Facts the rules need that only one launcher has (completions vs parallelism, podManagementPolicy ...).
    facts: dict[str, Any] = field(default_factory=dict)
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    # Pods already worked out, by index: several rules look at the same few pods.
    _pod_cache: dict[int, "Pod"] = field(default_factory=dict, repr=False)

    @property
    def pods(self) -> int:
        return sum(g.count for g in self.groups)

    def group_of(self, index: int) -> tuple[PodGroup, int]:
        for g in self.groups:
            if g.offset <= index < g.offset + g.count:
                return g, index - g.offset
        raise IndexError(index)

    def pod(self, index: int) -> Pod:
        """The pod with global index `index` (0 = the first pod: Master, completion index 0, ordinal 0)."""
        cached = self._pod_cache.get(index)
        if cached is None:
            cached = self._pod_cache[index] = self._make_pod(index)
        return cached

    def _make_pod(self, index: int) -> Pod:
        group, local = self.group_of(index)
        template = group.template or {}
        meta = template.get("metadata") or {}
        spec = template.get("spec") or {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        labels.update(group.extra_labels(local))
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        annotations.update(group.extra_annotations(local))
        hostname = spec.get("hostname") or group.hostname(local)
        subdomain = spec.get("subdomain") or group.subdomain
        containers = spec.get("containers") or []
        ci = pick_container(containers, group.container_name)
        container = dict(containers[ci]) if containers else {}
        container_field = f"{group.template_field}.spec.containers[{ci}]"
        if group.container_overrides:
            container = merge_trainer(container, group.container_overrides)
            container_field = group.container_override_field or container_field
        pod = Pod(
            index=index,
            name=group.hostname(local),
            hostname=hostname,
            subdomain=subdomain,
            namespace=self.namespace,
            labels=labels,
            annotations=annotations,
            spec=spec,
            spec_field=f"{group.template_field}.spec",
            container=container,
            container_field=container_field,
            env={},
            env_fields={},
            injected=set(),
        )
        self._fill_env(pod, group, local)
        return pod

    def _fill_env(self, pod: Pod, group: PodGroup, local: int) -> None:
        env, fields = pod.env, pod.env_fields
        c, cf = pod.container, pod.container_field
        for i, src in enumerate(c.get("envFrom") or []):
            prefix = str(src.get("prefix") or "")
            ref = src.get("configMapRef") or src.get("secretRef") or {}
            store = self.configmaps if "configMapRef" in src else self.secrets
            where = f"{cf}.envFrom[{i}]"
            for k, v in (store.get(str(ref.get("name"))) or {}).items():
                env[prefix + k] = v
                fields[prefix + k] = where
        for i, var in enumerate(c.get("env") or []):
            name = str(var.get("name"))
            fields[name] = f"{cf}.env[{i}]"
            if "value" in var:
                value = var["value"]
                value = "" if value is None else str(value)
                env[name] = _expand_k8s(value, env) if "$" in value else value
            elif "valueFrom" in var:
                env[name] = self._value_from(var["valueFrom"], pod)
            else:
                env[name] = ""
        for name, value in group.injected_env(local):
            env[name] = value
            fields[name] = f"{self.manifest.kind} controller"
            pod.injected.add(name)

    def _value_from(self, source: dict[str, Any], pod: Pod) -> str | None:
        """Resolve a downward-API, ConfigMap or Secret reference the way the kubelet would, where it can be known."""
        if "fieldRef" in source:
            path = str((source.get("fieldRef") or {}).get("fieldPath") or "")
            return downward(path, pod)
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"] or {}
            return (self.configmaps.get(str(ref.get("name"))) or {}).get(str(ref.get("key")))
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"] or {}
            return (self.secrets.get(str(ref.get("name"))) or {}).get(str(ref.get("key")))
        return None


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def downward(path: str, pod: Pod) -> str | None:
    """The value a downward-API `fieldRef.fieldPath` takes in `pod`; None where only the running cluster knows it."""
    if path == "metadata.name":
        return pod.name
    if path == "metadata.namespace":
        return pod.namespace or "default"
    m = _SUBSCRIPT.match(path)
    if m:
        table = pod.labels if m.group(1) == "labels" else pod.annotations
        return table.get(m.group(2))
    return None  # status.podIP, spec.nodeName, metadata.uid ...


def pick_container(containers: list[dict[str, Any]], preferred: str | None) -> int:
    """The training container: the one named `preferred`, else the first that runs torchrun, else the first."""
    for i, c in enumerate(containers):
        if preferred and c.get("name") == preferred:
            return i
    for i, c in enumerate(containers):
        text = " ".join(str(t) for t in (c.get("command") or []) + (c.get("args") or []))
        if "torchrun" in text or "torch.distributed.run" in text:
            return i
    return 0


def merge_trainer(container: dict[str, Any], trainer: dict[str, Any]) -> dict[str, Any]:
    """Apply a TrainJob's `spec.trainer` over the runtime's `node` container, as the Trainer controller does."""
    out = dict(container)
    for key in ("image", "command", "args"):
        if trainer.get(key) is not None:
            out[key] = trainer[key]
    if trainer.get("env"):
        merged = {str(v.get("name")): v for v in out.get("env") or []}
        for v in trainer["env"]:
            merged[str(v.get("name"))] = v
        out["env"] = list(merged.values())
    rpn = trainer.get("resourcesPerNode")
    if isinstance(rpn, dict) and rpn:
        out["resources"] = rpn  # a ResourceRequirements: limits, requests
    return out


# --- building workloads from one overlay's objects -------------------------------------------------------------


def _job_group(job: dict[str, Any], name: str, template_field: str, role: str, offset: int,
               extra: Callable[[int], dict[str, str]] | None = None) -> PodGroup:
    spec = job.get("spec") or {}
    indexed = spec.get("completionMode") == "Indexed"
    completions = as_int(spec.get("completions"))
    parallelism = as_int(spec.get("parallelism"), 1)
    count = completions if completions is not None else parallelism
    labels_fixed = {"job-name": name, "batch.kubernetes.io/job-name": name}

    def labels(i: int) -> dict[str, str]:
        out = dict(labels_fixed)
        if indexed:
            out[COMPLETION_INDEX] = str(i)
        if extra:
            out.update(extra(i))
        return out

    return PodGroup(
        role=role,
        count=count or 0,
        offset=offset,
        template=spec.get("template") or {},
        template_field=template_field,
        hostname=(lambda i: f"{name}-{i}") if indexed else (lambda i: f"{name}-<random>"),
        subdomain=None,
        extra_labels=labels,
        extra_annotations=(lambda i: {COMPLETION_INDEX: str(i)}) if indexed else (lambda i: {}),
        injected_env=(lambda i: [("JOB_COMPLETION_INDEX", str(i))]) if indexed else (lambda i: []),
    )


def _indexed_job(m: Manifest) -> Workload:
    spec = m.obj.get("spec") or {}
    group = _job_group(m.obj, m.name, "spec.template", "pod", 0)
    w = Workload(m, "indexed-job" if spec.get("completionMode") == "Indexed" else "job", [group], m.namespace)
    w.facts.update(
        completions=as_int(spec.get("completions")),
        parallelism=as_int(spec.get("parallelism"), 1),
        completion_mode=spec.get("completionMode") or "NonIndexed",
    )
    return w


def _statefulset(m: Manifest) -> Workload:
    spec = m.obj.get("spec") or {}
    name = m.name
    group = PodGroup(
        role="pod",
        count=as_int(spec.get("replicas"), 1) or 0,
        offset=0,
        template=spec.get("template") or {},
        template_field="spec.template",
        hostname=lambda i: f"{name}-{i}",
        subdomain=spec.get("serviceName") or None,
        extra_labels=lambda i: {POD_INDEX: str(i), "statefulset.kubernetes.io/pod-name": f"{name}-{i}"},
    )
    w = Workload(m, "statefulset", [group], m.namespace)
    w.facts.update(pod_management_policy=spec.get("podManagementPolicy") or "OrderedReady",
                   service_name=spec.get("serviceName"))
    return w


def _pytorchjob_port(replica_specs: dict[str, Any]) -> int:
    master = replica_specs.get("Master") or {}
    for c in ((master.get("template") or {}).get("spec") or {}).get("containers") or []:
        if c.get("name") == "pytorch":
            for p in c.get("ports") or []:
                if p.get("name") == PYTORCHJOB_PORT_NAME:
                    return as_int(p.get("containerPort"), PYTORCHJOB_DEFAULT_PORT) or PYTORCHJOB_DEFAULT_PORT
    return PYTORCHJOB_DEFAULT_PORT


def _pytorchjob(m: Manifest) -> Workload:
    spec = m.obj.get("spec") or {}
    name = m.name
    replica_specs = spec.get("pytorchReplicaSpecs") or {}
    order = [t for t in ("Master", "Worker") if t in replica_specs] + sorted(
        t for t in replica_specs if t not in ("Master", "Worker"))
    counts = {t: as_int((replica_specs[t] or {}).get("replicas"), 1) or 0 for t in order}
    total = sum(counts.values())
    nproc = str(spec.get("nprocPerNode") if spec.get("nprocPerNode") is not None else "auto")
    elastic = spec.get("elasticPolicy")
    port = _pytorchjob_port(replica_specs)
    has_master = "Master" in replica_specs
    nproc_int = as_int(nproc)
    world = total * nproc_int if nproc_int is not None else total

    groups: list[PodGroup] = []
    offset = 0
    for rtype in order:
        rt = rtype.lower()

        def env(i: int, rtype: str = rtype, offset: int = offset) -> list[tuple[str, str]]:
            out = [("PYTHONUNBUFFERED", "1"), ("PET_NPROC_PER_NODE", nproc)]
            if elastic is None:
                out.append(("PET_NNODES", str(total)))
            else:
                mn = as_int(elastic.get("minReplicas"), total)
                mx = as_int(elastic.get("maxReplicas"), total)
                host = elastic.get("rdzvHost") or f"{name}-worker-0"
                rport = elastic.get("rdzvPort") or port
                out += [("PET_NNODES", f"{mn}:{mx}"), ("PET_RDZV_BACKEND", str(elastic.get("rdzvBackend") or "c10d")),
                        ("PET_RDZV_ENDPOINT", f"{host}:{rport}")]
                if elastic.get("rdzvId"):
                    out.append(("PET_RDZV_ID", str(elastic["rdzvId"])))
                if elastic.get("maxRestarts") is not None:
                    out.append(("PET_MAX_RESTARTS", str(elastic["maxRestarts"])))
                conf = [f"{c.get('key')}={c.get('value')}" for c in elastic.get("rdzvConf") or [] if isinstance(c, dict)]
                if conf:
                    out.append(("PET_RDZV_CONF", ",".join(conf)))
            if has_master:
                rank = i + offset
                out += [("WORLD_SIZE", str(world)), ("MASTER_PORT", str(port)), ("PET_MASTER_PORT", str(port)),
                        ("MASTER_ADDR", f"{name}-master-0"), ("PET_MASTER_ADDR", f"{name}-master-0"),
                        ("RANK", str(rank)), ("PET_NODE_RANK", str(rank))]
            return out

        def labels(i: int, rt: str = rt) -> dict[str, str]:
            out = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name": "pytorchjob-controller",
                   "training.kubeflow.org/replica-type": rt, "training.kubeflow.org/replica-index": str(i)}
            if rt == "master":
                out["training.kubeflow.org/job-role"] = "master"
            return out

        groups.append(PodGroup(
            role=rtype,
            count=counts[rtype],
            offset=offset,
            template=(replica_specs[rtype] or {}).get("template") or {},
            template_field=f"spec.pytorchReplicaSpecs.{rtype}.template",
            hostname=lambda i, rt=rt: f"{name}-{rt}-{i}",
            subdomain=None,
            extra_labels=labels,
            injected_env=env,
            container_name="pytorch",
        ))
        offset += counts[rtype]
    w = Workload(m, "pytorchjob", groups, m.namespace, managed_dns=True)
    w.facts.update(nproc_per_node=nproc, elastic=elastic, master_port=port, replica_counts=counts)
    return w


def _jobset_groups(jobset: dict[str, Any], name: str, field_prefix: str,
                   injected: Callable[[str, int, int], list[tuple[str, str]]] | None = None,
                   only_step: str | None = None) -> tuple[list[PodGroup], str]:
    """A JobSet's pods: replicated Job r, child Job j, pod i is `<name>-<r>-<j>-<i>.<subdomain>`."""
    spec = jobset.get("spec") or {}
    subdomain = str(((spec.get("network") or {}).get("subdomain")) or name)
    groups: list[PodGroup] = []
    offset = 0
    for ri, rjob in enumerate(spec.get("replicatedJobs") or []):
        rname = str(rjob.get("name"))
        tmpl = rjob.get("template") or {}
        if only_step and ((tmpl.get("metadata") or {}).get("labels") or {}).get(TRAINJOB_STEP_LABEL) != only_step:
            continue
        for j in range(as_int(rjob.get("replicas"), 1) or 0):
            child = f"{name}-{rname}-{j}"
            g = _job_group(tmpl, child, f"{field_prefix}.replicatedJobs[{ri}].template.spec.template", rname, offset,
                           extra=lambda i, rname=rname, j=j: {"jobset.sigs.k8s.io/jobset-name": name,
                                                              "jobset.sigs.k8s.io/replicatedjob-name": rname,
                                                              "jobset.sigs.k8s.io/job-index": str(j)})
            # JobSet always runs Indexed Jobs with DNS hostnames on.
            g.hostname = lambda i, child=child: f"{child}-{i}"
            g.extra_annotations = lambda i: {COMPLETION_INDEX: str(i)}
            base_env = lambda i: [("JOB_COMPLETION_INDEX", str(i))]
            if injected:
                g.injected_env = lambda i, rname=rname, j=j, b=base_env: b(i) + injected(rname, j, i)
            else:
                g.injected_env = base_env
            g.subdomain = subdomain
            g.extra_labels = (lambda i, prev=g.extra_labels: {**prev(i), COMPLETION_INDEX: str(i)})
            groups.append(g)
            offset += g.count
    return groups, subdomain


def _jobset(m: Manifest) -> Workload:
    groups, subdomain = _jobset_groups(m.obj, m.name, "spec")
    w = Workload(m, "jobset", groups, m.namespace, managed_dns=True)
    w.facts.update(subdomain=subdomain)
    return w


def load_upstream_runtime() -> dict[str, Any]:
    return yaml.safe_load(UPSTREAM_RUNTIME_FILE.read_text())


def _trainjob(m: Manifest, runtimes: dict[tuple[str, str], Manifest]) -> Workload:
    spec = m.obj.get("spec") or {}
    name = m.name
    ref = spec.get("runtimeRef") or {}
    kind = str(ref.get("kind") or "ClusterTrainingRuntime")
    rname = str(ref.get("name") or "")
    trainer = spec.get("trainer") or {}
    notes: list[str] = []
    runtime = runtimes.get((kind, rname))
    runtime_obj: dict[str, Any] | None = runtime.obj if runtime else None
    if runtime_obj is None and kind == "ClusterTrainingRuntime" and rname == "torch-distributed":
        runtime_obj = load_upstream_runtime()
        notes.append("runtime torch-distributed is not in these manifests: assumed upstream's (kubeflow/trainer v2.3.0)")
    w = Workload(m, "trainjob", [], m.namespace, managed_dns=True, notes=notes)
    w.facts.update(runtime_kind=kind, runtime_name=rname, runtime_found=runtime_obj is not None,
                   runtime_source=runtime.source if runtime else None)
    if runtime_obj is None:
        return w
    rspec = runtime_obj.get("spec") or {}
    ml = rspec.get("mlPolicy") or {}
    torch_policy = ml.get("torch")
    nodes = as_int(trainer.get("numNodes"), as_int(ml.get("numNodes"), 1)) or 0
    nproc_raw = trainer.get("numProcPerNode")
    if nproc_raw is None and isinstance(torch_policy, dict):
        nproc_raw = torch_policy.get("numProcPerNode")
    nproc = str(nproc_raw) if nproc_raw is not None else "auto"
    w.facts.update(torch_policy=torch_policy is not None, num_nodes=nodes, nproc_per_node=nproc)

    def injected(rjob: str, j: int, i: int) -> list[tuple[str, str]]:
        return [("PET_NNODES", str(nodes)), ("PET_NPROC_PER_NODE", nproc), ("PET_NODE_RANK", str(i)),
                ("PET_MASTER_ADDR", f"{name}-{rjob}-0-0.{name}"), ("PET_MASTER_PORT", str(TRAINJOB_MASTER_PORT))]

    template = dict(rspec.get("template") or {})
    groups, _ = _jobset_groups(template, name, "(runtime) spec.template.spec", injected if torch_policy is not None else None,
                               only_step="trainer")
    for g in groups:
        # The TrainJob's numNodes sets the trainer Job's parallelism and completions.
        g.count = nodes
        g.container_name = "node"
        g.container_overrides = trainer
        g.container_override_field = "spec.trainer"
    w.groups = groups
    return w


@dataclass
class Bundle:
    """The rendered objects of one overlay (or one file), indexed the way the launchers look things up."""

    manifests: list[Manifest]
    services: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    runtimes: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, manifests: list[Manifest]) -> "Bundle":
        b = cls(manifests)
        for m in manifests:
            kind = m.kind
            if kind == "Service":
                b.services[(m.namespace, m.name)] = m
            elif kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
                b.runtimes[(kind, m.name)] = m
            elif kind == "ConfigMap":
                b.configmaps[m.name] = {str(k): str(v) for k, v in (m.obj.get("data") or {}).items()}
            elif kind == "Secret":
                b.secrets[m.name] = {str(k): str(v) for k, v in (m.obj.get("stringData") or {}).items()}
        return b


LAUNCHER_KINDS = {
    ("batch", "Job"): "job",
    ("apps", "StatefulSet"): "statefulset",
    ("kubeflow.org", "PyTorchJob"): "pytorchjob",
    ("trainer.kubeflow.org", "TrainJob"): "trainjob",
    ("jobset.x-k8s.io", "JobSet"): "jobset",
}


def workloads(bundle: Bundle) -> list[Workload]:
    """Every object in the bundle that starts pods through one of the modelled launchers."""
    out: list[Workload] = []
    for m in bundle.manifests:
        group = m.api_version.split("/")[0] if "/" in m.api_version else ""
        kind = LAUNCHER_KINDS.get((group, m.kind))
        if kind is None:
            continue
        if kind == "job":
            w = _indexed_job(m)
        elif kind == "statefulset":
            w = _statefulset(m)
        elif kind == "pytorchjob":
            w = _pytorchjob(m)
        elif kind == "trainjob":
            w = _trainjob(m, bundle.runtimes)
        else:
            w = _jobset(m)
        w.configmaps = bundle.configmaps
        w.secrets = bundle.secrets
        out.append(w)
    return out
