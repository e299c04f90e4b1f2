"""What every rule reads and writes: the Context of one validation unit (its objects, topologies, workloads, the
environment's declaration, Argo CD's resolved targets) and the helpers that turn a finding into a Problem.
Resolved before any rule runs, so rules stay pure functions of it."""
from __future__ import annotations

import hashlib
import marshal
import re
from dataclasses import dataclass, field as dc_field
from typing import Any, Iterator

from ..argocd.apps import Delivery, Synced
from ..launchers import Bundle, Check, Launcher, Pod, Workload, of
from ..launchers.kueue_config import KueueConfig, configuration_of, in_force
from ..launchers.pods import ContainerEnv, env_from_configmap
from ..argocd.identity import image_repository, trainer_images
from ..kube.objects import INFO, WARNING, Manifest, Problem
from ..render.paths import repo_root
from ..kube.pod_security_admission import Config as PodSecurityConfig
from ..launchers.podspecs import ContainerSite, PodSite, container_sites, pod_sites
from ..model.topology import Topology, Undetermined, UnreadConfig, UnreadScript, Unstated
from ..model.trainer_contract import contract

# A problem made without a severity takes its rule's default (the module's SEVERITY), filled in by the engine.
RULE_DEFAULT = ""


@dataclass
class Environment:
    """What an environment declares about its cluster (policies/rules/environment.py reads it from a policy.yaml): the
    values the rules that need them read, and its severity per rule id."""

    name: str
    source: str
    gpus_per_node: int | None = None
    gpu_capacity: int | None = None
    large_job_pods: int | None = None
    require_image_digest: bool = False
    allowed_capabilities: list[str] = dc_field(default_factory=list)
    allowed_host_access: list[str] | None = None  # None: the environment does not say
    # Cluster-scoped and RBAC kinds the manifests may hold, as `group/Kind` (`/Namespace` for the core group);
    # None: the environment does not say (SEC009).
    allowed_cluster_kinds: list[str] | None = None
    # The operator's policy that narrowed these allowances (the Argo CD plugin, environment.tightened), if any.
    operator: str | None = None
    # Every object the manifests reference is in them (REF001 errors on one that is not).
    self_contained: bool = False
    pod_losses: int | None = None  # pod losses every training workload survives (RESTART007)
    severity: dict[str, str] = dc_field(default_factory=dict)
    real: bool = False  # a cluster the user deploys to, not one of the template's examples
    # The cluster's DNS domain (the kubelet's clusterDomain; TOPO003, TOPO011); None: not declared (cluster.local is
    # then assumed where only a warning depends on it).
    cluster_domain: str | None = None
    # The Kueue integrations on in the cluster (its Configuration's integrations.frameworks); None: the environment
    # declares no Kueue.
    kueue_frameworks: list[str] | None = None
    # Each controller's feature gates as the cluster runs it (launcher id -> gate -> on), unlisted gates at their
    # defaults; a controller missing here: not declared.
    feature_gates: dict[str, dict[str, bool]] = dc_field(default_factory=dict)
    # The cluster's Pod Security admission configuration (defaults and exemptions, SEC010); None: not declared
    # (upstream's defaults: privileged, nothing exempt).
    pod_security: PodSecurityConfig | None = None


def inputs_digest(manifests: list[Manifest], kueue: list[str] | None) -> bytes:
    """What an input's workloads and topologies follow from, as a digest: every object as the model reads it, in
    order, and the environment's Kueue integrations. Two inputs with the same digest get the same model, and what
    the model works out from it alone (a world's pod-loss replay, policies/model/recovery.py) is worked out once.
    marshal (version 2: no references, which would follow the objects' identity) writes the values with their types
    (1, 1.0, '1' and True apart) and reads back equal; a value it does not write (a YAML timestamp), repr. SHA-256
    (its first 16 bytes: an in-memory cache key, never stored), which the CPU's SHA extensions make about four
    times as fast as BLAKE2b here, where hashing every object of every input is a part of the policy stage."""
    values = ([m.obj for m in manifests], kueue)
    try:
        data, how = marshal.dumps(values, 2), b"marshal\0"
    except ValueError:
        data, how = repr(values).encode(), b"repr\0"
    digest = hashlib.sha256(how)
    digest.update(data)
    return digest.digest()[:16]


@dataclass
class Context:
    """What every rule reads: the overlay's objects, the training workloads' topologies, where they came from, and
    the environment's declaration (None for manifests validated without one)."""

    bundle: Bundle
    topologies: list[Topology]
    unresolved: list[Workload]
    source: str
    env: Environment | None = None
    # Workloads of a training launcher that show neither a launcher nor env:// initialisation.
    undetermined: list[Undetermined] = dc_field(default_factory=list)
    # Workloads whose world's shape is in an accelerate config file not in the manifests.
    unread: list[UnreadConfig] = dc_field(default_factory=list)
    # Workloads whose container runs a shell script that could not be read.
    scripts: list[UnreadScript] = dc_field(default_factory=list)
    # Workloads whose launcher is not given a setting the world's shape depends on (its default unknown here).
    unstated: list[Unstated] = dc_field(default_factory=list)
    # Workloads another controller manages (managedBy): none of their pods are created here.
    elsewhere: list[Workload] = dc_field(default_factory=list)
    # What the webhook of a controller that makes objects for others (Katib's) refuses about the objects written.
    refused: list[Check] = dc_field(default_factory=list)
    # The objects (refs) the schema stage refuses: the API server decodes and checks the schema before it validates.
    schema_refused: frozenset[str | None] = frozenset()
    # Argo CD's Applications and what their sources render to (resolved by the engine before the rules run).
    argo: Delivery = dc_field(default_factory=Delivery)
    # An overlay validated without its repository's Argo CD folder: the Applications that sync it (ARGO008).
    synced: Synced | None = None
    # Every workload of a modelled controller, training or not (admission checks read them all).
    workloads: list[Workload] = dc_field(default_factory=list)
    _sites: list[PodSite] | None = dc_field(default=None, repr=False)
    _containers: list[ContainerSite] | None = dc_field(default=None, repr=False)
    _kinds: dict[str, list[Manifest]] | None = dc_field(default=None, repr=False)
    _launched: list[tuple[Manifest, Launcher[Any]]] | None = dc_field(default=None, repr=False)
    _pods: dict[int, list[Pod]] = dc_field(default_factory=dict, repr=False)
    # Values several rules derive from the same objects, worked out once per overlay (images, ...).
    memo: dict[str, Any] = dc_field(default_factory=dict, repr=False)
    # What the topologies follow from (inputs_digest, given by the engine, which resolves them): inputs with the same
    # digest have the same topologies, in the same order; None: not known.
    inputs: bytes | None = None

    @property
    def sites(self) -> list[PodSite]:
        """Every pod template in the manifests (any kind that makes pods), computed once."""
        if self._sites is None:
            self._sites = pod_sites(self.bundle.manifests)
        return self._sites

    @property
    def containers(self) -> list[ContainerSite]:
        """Every container and init container of those pod templates, with their security contexts."""
        if self._containers is None:
            self._containers = container_sites(self.sites)
        return self._containers

    def workload_of(self, m: Manifest) -> Workload | None:
        """The workload an object of the manifests makes (the first, where a kind makes several), or None."""
        index: dict[int, Workload] | None = self.memo.get("workload_of")
        if index is None:
            index = self.memo["workload_of"] = {}
            for w in self.workloads:
                index.setdefault(id(w.manifest), w)
        return index.get(id(m))

    @property
    def kueue(self) -> KueueConfig | None:
        """Kueue's Configuration, where the manifests hold its ConfigMap and Kueue loads it (launchers/
        kueue_config.py), worked out once."""
        return configuration_of(self.bundle)[0]

    def kueue_frameworks(self) -> list[str] | None:
        """The Kueue integrations on: the Configuration's the manifests hold (`kueue`), else the environment's
        kueueFrameworks; None where neither says Kueue runs (what the engine gave the workloads)."""
        return in_force(self.bundle, self.env.kueue_frameworks if self.env is not None else None)

    def of_kind(self, kind: str) -> list[Manifest]:
        """The objects of one kind, in the order of the manifests (indexed once; not to be changed)."""
        if self._kinds is None:
            self._kinds = {}
            for m in self.bundle.manifests:
                self._kinds.setdefault(m.kind, []).append(m)
        return self._kinds.get(kind, [])

    @property
    def launched(self) -> list[tuple[Manifest, Launcher[Any]]]:
        """(object, its launcher module) for every object of a modelled kind, in the order of the manifests."""
        if self._launched is None:
            self._launched = [(m, launcher) for m in self.bundle.manifests if (launcher := of(m)) is not None]
        return self._launched

    def distinct_pods(self, topo: Topology) -> list[Pod]:
        """One pod per pod template (PyTorchJob Master and Worker, not two Workers), worked out once per topology."""
        pods = self._pods.get(id(topo))
        if pods is None:
            pods = self._pods[id(topo)] = topo.distinct_pods()
        return pods


def resource_blocks(ctx: Context) -> Iterator[tuple[Manifest, str, Any]]:
    """(object, field, value) of every container's `resources` in a pod template and of every container setting a
    launcher takes resources from (a TrainJob's `resourcesPerNode`); the value as written, maybe not a mapping."""
    for cs in ctx.containers:
        yield cs.manifest, f"{cs.field}.resources", cs.container.get("resources")
    for m, launcher in ctx.launched:
        for field, resources in launcher.container_settings(m, "resources"):
            yield m, field, resources


def obj_problem(rule: str, m: Manifest, field: str | None, message: str, hint: str,
                severity: str = RULE_DEFAULT) -> Problem:
    return Problem(rule=rule, message=message, source=m.source, obj=m.ref, field=field, hint=hint, severity=severity)


def not_run(rule: str, ctx: Context, needs: str) -> Problem:
    """This rule needs a value only an environment declaration gives: say it could not run (the engine folds these
    into one `ENV` line per unit) rather than pass in silence."""
    return Problem(rule=rule, message=f"needs {needs}", source=ctx.source, severity=INFO,
                   extra={"not_run": needs})


def problem(rule: str, topo: Topology, field: str | None, message: str, hint: str, severity: str = RULE_DEFAULT) -> Problem:
    m = topo.manifest
    return Problem(rule=rule, message=message, source=m.source, obj=m.ref, field=field, hint=hint, severity=severity)


def service_problem(rule: str, topo: Topology, field: str, message: str, hint: str) -> Problem:
    """A problem about the Service behind a workload, pointed at the Service's own file and object."""
    assert topo.service is not None, "service_problem is for a workload with a Service"
    p = problem(rule, topo, field, message, hint)
    p.source, p.obj = topo.service.source, topo.service.ref
    return p


def pods_field(topo: Topology) -> str:
    return topo.workload.launcher.pods_field(topo.workload)


def located(workload: Workload, field: str | None) -> tuple[Manifest, str | None]:
    """The object and field a problem about `field` of a workload's pods belongs to: a TrainJob's pod template
    lives in its runtime, so `(runtime) spec...` points at the runtime object where it is in the manifests."""
    if field and field.startswith("(runtime) "):
        runtime = workload.runtime
        if runtime is not None:
            return runtime, field[len("(runtime) "):]
    return workload.manifest, field


def at(ctx: Context, topo: Topology, field: str | None) -> tuple[Manifest, str | None]:
    """`located` for a topology's workload."""
    return located(topo.workload, field)


def problem_at(rule: str, ctx: Context, topo: Topology, field: str | None, message: str, hint: str,
               severity: str = RULE_DEFAULT) -> Problem:
    m, f = at(ctx, topo, field)
    return obj_problem(rule, m, f, message, hint, severity)


def find_object(ctx: Context, kind: str, name: str) -> Manifest | None:
    for m in ctx.bundle.manifests:
        if m.kind == kind and m.name == name:
            return m
    return None


def env_problem(rule: str, ctx: Context, topo: Topology, pod: Any, name: str, message: str, hint: str,
                severity: str = RULE_DEFAULT) -> Problem:
    """A problem about env variable `name`: at the ConfigMap key when it came through envFrom (where the user
    edits it), else at the container's env entry."""
    field = pod.env_fields.get(name)
    m = re.search(r"\.envFrom\[(\d+)\]$", field or "")
    if m:
        sources = pod.container.get("envFrom") or []
        i = int(m.group(1))
        ref = (sources[i].get("configMapRef") or {}) if i < len(sources) else {}
        cm = find_object(ctx, "ConfigMap", str(ref.get("name"))) if ref else None
        if cm is not None:
            return obj_problem(rule, cm, f"data.{name}", message, hint, severity)
    return problem_at(rule, ctx, topo, field or pod.container_field, message, hint, severity)


def training_uses_nccl(topo: Topology) -> bool:
    """The job may use NCCL: it has GPUs, or states the nccl backend (see nccl_stated for what a message may claim)."""
    return bool(topo.gpus) or nccl_stated(topo)


def nccl_stated(topo: Topology) -> bool:
    """The manifest itself says the process group is nccl (env, args): only then may a message claim what NCCL does,
    at the rule's severity; otherwise the backend lives in the training code, and a message says "if the job uses
    NCCL", at warning severity."""
    return bool(topo.pg_backend and topo.pg_backend[0].lower() == "nccl")


# ---------------------------------------------------------------- the containers that start the trainer


def trainer_containers(ctx: Context) -> list[tuple[Any, Any, Any, list[str], list[str], int, str | None]]:
    """(workload, pod, container, argv, fields, index where the trainer's own arguments start, condition) for every
    container that starts the trainer (`/app/trainer/train.py`, `-m trainer.train`), one pod per pod template (worked
    out once per overlay). The condition is None where the container's image is one known to hold this repository's
    trainer (gitops.yaml's identity.image, the template's example image); else the words a finding starts with, as
    another image may hold another program at that path or module (TRAINER001-003 are then warnings)."""
    found: list[tuple[Any, Any, Any, list[str], list[str], int, str | None]] | None = ctx.memo.get("trainer_containers")
    if found is None:
        found = []
        known: frozenset[str] | None = None
        for w in ctx.workloads:
            if w.odd_group is not None:  # no pods to read (the model said it skipped them)
                continue
            seen: set[str] = set()
            for g in w.world_groups:
                if not g.count or g.template_field in seen:
                    continue
                seen.add(g.template_field)
                pod = w.pod(g.offset)
                for c in pod.containers:
                    argv, fields = pod.argv(c)
                    start = contract.starts_trainer(argv)
                    if start is None:
                        continue
                    if known is None:
                        known = trainer_images(repo_root(ctx.source if ctx.source not in ("<stdin>", "") else "."))
                    found.append((w, pod, c, argv, fields, start, trainer_condition(c.container.get("image"), known)))
        ctx.memo["trainer_containers"] = found
    return found


def trainer_condition(image: Any, known: frozenset[str]) -> str | None:
    """None where `image` is in a repository known to hold the trainer; else the condition a finding depends on."""
    if isinstance(image, str) and image.strip() and image_repository(image.strip()) in known:
        return None
    declared = " or ".join(sorted(known))
    shown = f"image {image.strip()}" if isinstance(image, str) and image.strip() else "a container without an image"
    return f"if {shown} holds this repository's trainer (gitops.yaml's identity.image: {declared})"


def trainer_problem(rule: str, condition: str | None, m: Manifest, field: str | None, message: str,
                    hint: str) -> Problem:
    """A TRAINER finding: the rule's severity where the image is known to hold the trainer, else a warning that
    says the condition it depends on."""
    if condition is None:
        return obj_problem(rule, m, field, message, hint)
    return obj_problem(rule, m, field, f"{condition}, {message}", hint, WARNING)


def where(ctx: Context, w: Workload, c: ContainerEnv, name: str) -> tuple[Any, str | None]:
    """The object and field where the container's variable `name` is written: the ConfigMap key for `envFrom`, else
    the container's env entry."""
    field = c.env_fields.get(name) or f"{c.field}.env"
    configmap = env_from_configmap(c.container, field)
    cm = find_object(ctx, "ConfigMap", configmap) if configmap else None
    if cm is not None:
        return cm, f"data.{name}"
    return located(w, field)
