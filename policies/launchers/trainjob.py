"""Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1, kubeflow/trainer tag v2.3.0) with the
(Cluster)TrainingRuntime it names (trainingruntime.py): the Trainer builds a JobSet from the runtime's template, sets
the trainer step's pod count and container from `spec.trainer`, and injects torchrun's `PET_*` env
(pkg/runtime/core/trainingruntime.go, pkg/runtime/framework/plugins/torch/torch.go, plugins/jobset/builder.go);
torchtune's command is checked in torchtune.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from ..kube.values import as_int, dig, domain_prefixed_path_problems, listing, mapping, quantity_value
from ..kube.objects import INFO, WARNING, Manifest
from . import jobset
from .base import Bundle, Check, Launcher, MpiWorld, Names, Need, ScaleSpec, Workload
from .lifecycle import Decision, PodExit, RestartCount
from .pods import Injected, drop_gpus, trainer_gpus_per_node
from .torchtune import TORCHTUNE_ENTRYPOINT, torchtune_checks
from .trainjob_frameworks import (MODELLED_POLICIES, MPI_LAUNCHER, framework_checks, mpi_env, mpi_hosts, mpi_node_count,
                                  mpi_node_job_trainer, mpi_note, mpi_slots, mpi_unmodelled, mpi_world, no_torch_notice,
                                  plugin_env, policy_kind)
from .trainingruntime import (ANCESTORS, RESOURCES_PER_NODE, UPSTREAM_RUNTIME, ancestor, apply_runtime_patches,
                              merge_resources, is_trainer_step, load_upstream_runtime, owned, owned_template,
                              runtime_job_specs)

KIND = "TrainJob"
# The initializer steps, their container's name, and the TrainJob field that configures them.
INITIALIZERS = {"dataset-initializer": "dataset", "model-initializer": "model"}
# constants.go LabelSupport / SupportDeprecated / RuntimeDeprecationPolicyURL.
SUPPORT_LABEL = "trainer.kubeflow.org/support"
SUPPORT_DEPRECATED = "deprecated"
DEPRECATION_POLICY_URL = ("https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html"
                          "#runtime-deprecation-policy")
INITIALIZER_VOLUME = "initializer"  # jobsetplgconsts.VolumeNameInitializer
NODE = "node"  # the trainer container's (and replicated Job's) name the Trainer looks for
MASTER_PORT = 29500  # constants.ContainerTrainerPort
# constants.JobCompletionIndexFieldPath: PET_NODE_RANK reads the Job controller's annotation.
NODE_RANK_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
# podGroupPolicy sources and what their plugin's EnforcePodGroupPolicy puts on every pod of the JobSet (the value is
# the TrainJob's name): coscheduling.go 81-91 a label, volcano.go 130-139 an annotation (kubeflow/trainer v2.3.0).
POD_GROUP_LABEL = ("coscheduling", "scheduling.x-k8s.io/pod-group")
POD_GROUP_ANNOTATION = ("volcano", "scheduling.k8s.io/group-name")


def resolve_nproc(trainer: dict[str, Any], runtime_resources: dict[str, Any]) -> str:
    """torch.go EnforceMLPolicy: `numProcPerNode` when set; else `auto`, which without a GPU becomes
    max(1, CPU request, else CPU limit, rounded up) of the TrainJob's resourcesPerNode (the runtime's node container
    resources where the TrainJob sets none); with a GPU it stays `auto` for torchrun to count the devices."""
    if trainer.get("numProcPerNode") is not None:
        return str(trainer["numProcPerNode"])
    res = mapping(trainer.get("resourcesPerNode")) if trainer.get("resourcesPerNode") is not None else runtime_resources
    if trainer_gpus_per_node(res):
        return "auto"
    cpu = quantity_value(mapping(res.get("requests")).get("cpu"))
    if not cpu:
        cpu = quantity_value(mapping(res.get("limits")).get("cpu"))
    return str(max(1, cpu or 0))


def upsert_env(env: list[Any], updates: list[Any]) -> list[Any]:
    """apply.UpsertEnvVars: a variable of the same name is replaced in place, a new one appended."""
    out = [dict(mapping(v)) for v in env]
    for u in updates:
        u = mapping(u)
        for i, v in enumerate(out):
            if v.get("name") == u.get("name"):
                out[i] = dict(u)
                break
        else:
            out.append(dict(u))
    return out


@dataclass
class TrainJobWorkload(Workload):
    """A TrainJob's pods, made from its runtime's template (Workload.runtime, where that runtime is in the
    manifests), and what the Trainer's webhook reads of the runtime."""

    runtime_kind: str = ""
    runtime_name: str = ""
    # The runtime as read: the object in the manifests, or upstream's for its default runtime; None where neither.
    runtime_obj: dict[str, Any] | None = None
    # The runtime has mlPolicy.torch; the TrainJob sets spec.trainer.
    torch_policy: bool = False
    trainer_set: bool = False
    # The runtime's JobSet template after the TrainJob's runtime patches, and its `node` container's resources.
    template: dict[str, Any] = field(default_factory=dict)
    runtime_resources: dict[str, Any] = field(default_factory=dict)
    # The runtime's mlPolicy source (policy_kind); for MPI the hostfile's hosts and slots per host.
    policy: str = ""
    mpi_hosts: Names = field(default_factory=lambda: Names([]))
    mpi_slots: int = 0


class TrainJobLauncher(Launcher[TrainJobWorkload]):
    id = "trainjob"
    order = 20
    upstream = "kubeflow/trainer v2.3.0"
    title = "Kubeflow Trainer v2 TrainJob"
    managed_by_field = ("spec", "managedBy")
    controller_name = "trainer.kubeflow.org/trainjob-controller"  # pkg/util/trainjob/trainjob.go:29
    managed_by_source = "kubeflow/trainer v2.3.0 pkg/controller/trainjob_controller.go:89, pkg/util/trainjob/trainjob.go:39"
    suspend_field = ("spec", "suspend")
    # the JobSet it builds is suspended with it (pkg/runtime/framework/plugins/jobset/builder.go:176 Suspend)
    suspend_source = "kubeflow/trainer v2.3.0 pkg/controller/trainjob_controller.go:216, plugins/jobset/builder.go:176"
    kinds = (("trainer.kubeflow.org", KIND),)
    # Kueue's integration for it (FrameworkName, kubernetes-sigs/kueue v0.19.2
    # pkg/controller/jobs/trainjob/trainjob_controller.go:54)
    kueue_framework = "trainer.kubeflow.org/trainjob"
    for_training = True
    managed_dns = True
    # What cannot change in place (spec.trainer, spec.runtimeRef, ...) is the CRD's own transition rules
    # (`self == oldSelf`), which make diff evaluates from the schema (policies/schema/cel.py): no list here.
    scale = ScaleSpec(pods=[(("spec", "trainer", "numNodes"), 0)], nproc=[("spec", "trainer", "numProcPerNode")],
                      resources=[("spec", "trainer", "resourcesPerNode")])

    def runtime(self, m: Manifest, bundle: Bundle) -> tuple[dict[str, Any] | None, Manifest | None, str, str]:
        ref = mapping(dig(m.obj, "spec", "runtimeRef"))
        kind = str(ref.get("kind") or "ClusterTrainingRuntime")
        name = str(ref.get("name") or "")
        found = bundle.find(kind, name)
        if found is not None:
            return found.obj, found, kind, name
        if kind == "ClusterTrainingRuntime" and name == UPSTREAM_RUNTIME:
            return load_upstream_runtime(), None, kind, name
        return None, None, kind, name

    def build(self, m: Manifest, bundle: Bundle) -> TrainJobWorkload:
        spec = mapping(m.obj.get("spec"))
        name = m.name
        trainer_set = isinstance(spec.get("trainer"), dict)
        trainer = mapping(spec.get("trainer"))
        runtime_obj, runtime, kind, rname = self.runtime(m, bundle)
        w = TrainJobWorkload(m, self, [], m.namespace, runtime=runtime, runtime_kind=kind, runtime_name=rname,
                             runtime_obj=runtime_obj)
        if runtime_obj is None and rname:  # (upstream's torch-distributed comes with the Trainer's install)
            # clustertrainingruntime.go 99-108, trainingruntime.go 304-314 (v2.3.0): the TrainJob webhook refuses
            # "specified <runtime> must be created before the TrainJob is created".
            w.needs.append(Need(kind, "" if kind == "ClusterTrainingRuntime" else m.namespace, rname,
                                "spec.runtimeRef", "the Trainer's webhook refuses the TrainJob until it exists"))
        if runtime_obj is None:
            # Applied from elsewhere (the Trainer's own Flux example applies its runtime from another file): not an
            # error by itself. REF001 lists it among the references it could not check, an error only where the
            # environment declares its manifests self-contained.
            w.unresolved = Check("spec.runtimeRef", f"runtime {kind} '{rname}' is not in these manifests: the "
                                 "pods and the topology could not be worked out", "validate the TrainJob with its "
                                 "runtime (a folder of both: --bundle), or commit the runtime beside it",
                                 severity=INFO)
            return w
        if runtime is None:
            w.notes.append(f"runtime {UPSTREAM_RUNTIME} is not in these manifests: assumed upstream's "
                           "(kubeflow/trainer v2.3.0)")
        rspec = mapping(runtime_obj.get("spec"))
        ml = rspec.get("mlPolicy") if isinstance(rspec.get("mlPolicy"), dict) else None
        torch_policy = mapping(ml).get("torch") if ml is not None else None
        policy = policy_kind(ml)
        mpi = mapping(mapping(ml).get("mpi"))
        # mpi.go: runLauncherAsNode (CRD default false).
        launcher_as_node = policy == "mpi" and mpi.get("runLauncherAsNode") is True
        template = apply_runtime_patches(owned_template(mapping(dig(rspec, "template", "spec"))),
                                         listing(spec.get("runtimePatches")))
        initializer = mapping(spec.get("initializer"))
        for rjob in listing(template.get("replicatedJobs")):
            step = ancestor(mapping(rjob))
            source = mapping(initializer.get(INITIALIZERS[step])) if step is not None and step in INITIALIZERS else {}
            if not source:
                continue
            # builder.go Initializer: the initializer container of that step gets STORAGE_URI, the TrainJob's env
            # (upserted) and its Secret as envFrom.
            containers = listing(dig(rjob, "template", "spec", "template", "spec", "containers"))
            for k, c in enumerate(containers):
                if mapping(c).get("name") != step:
                    continue
                c = containers[k] = dict(mapping(c))
                updates = ([{"name": "STORAGE_URI", "value": source["storageUri"]}] if source.get("storageUri")
                           else []) + listing(source.get("env"))
                c["env"] = upsert_env(listing(c.get("env")), updates)
                if mapping(source.get("secretRef")).get("name"):
                    c["envFrom"] = listing(c.get("envFrom")) + [{"secretRef": {"name": source["secretRef"]["name"]}}]

        # Each replicated Job's pod count (trainingruntime.go 188-198, kubeflow/trainer v2.3.0): its parallelism
        # (default 1), or for the trainer step of a runtime with an mlPolicy, mlPolicy.numNodes (default 1); at
        # least 1 (runtime.go 147); then spec.trainer.numNodes for the trainer step whatever the policy (torch.go
        # 117-118, plainml.go 56-60). The jobset plugin's SyncParallelCount (jobset.go 302-323) writes it to the
        # Job's parallelism and completions.
        nodes: int | None = None
        for rjob in listing(template.get("replicatedJobs")):
            js = owned(rjob, "template", "spec")
            if js is None:
                continue
            trainer_step = is_trainer_step(rjob)
            count = as_int(js.get("parallelism"), 1)
            if trainer_step and ml is not None:
                count = as_int(mapping(ml).get("numNodes"), 1)
            count = max(count or 0, 1)
            if trainer_step and policy != "mpi":
                count = as_int(trainer.get("numNodes"), count) or 0
            if policy == "mpi" and rjob.get("name") == NODE and trainer.get("numNodes") is not None:
                count = mpi_node_count(trainer, launcher_as_node)
            if trainer_step:
                nodes = count if nodes is None else nodes
            js["parallelism"] = js["completions"] = count
        # jobset.go 419-424 (Build: PodLabels, PodAnnotations): the podGroupPolicy plugin's label or annotation goes
        # on the pod template of every replicated Job, over what the runtime and its patches set.
        group = mapping(rspec.get("podGroupPolicy"))
        for (plugin, key), section in ((POD_GROUP_LABEL, "labels"), (POD_GROUP_ANNOTATION, "annotations")):
            if not isinstance(group.get(plugin), dict):
                continue
            for rjob in listing(template.get("replicatedJobs")):
                pod = owned(rjob, "template", "spec", "template")
                if pod is None:
                    continue
                meta = pod["metadata"] = dict(mapping(pod.get("metadata")))
                meta[section] = {**mapping(meta.get(section)), key: name}
        if nodes is None:
            nodes = as_int(trainer.get("numNodes"), as_int(mapping(ml).get("numNodes"), 1)) or 0
        runtime_resources: dict[str, Any] = {}
        for rjob in listing(template.get("replicatedJobs")):
            rjob = mapping(rjob)
            if not (rjob.get("name") == NODE or is_trainer_step(rjob)):
                continue
            for c in listing(dig(rjob, "template", "spec", "template", "spec", "containers")):
                if mapping(c).get("name") == NODE and isinstance(mapping(c).get("resources"), dict):
                    runtime_resources = {k: mapping(v) for k, v in c["resources"].items()}
                    break
            if runtime_resources:
                break
        nproc = resolve_nproc(trainer, runtime_resources)
        w.torch_policy, w.trainer_set = torch_policy is not None, trainer_set
        w.template, w.runtime_resources = template, runtime_resources

        # The trainer step's `node` container after the jobset plugin's builder and the runtime's resource merge.
        fields: dict[int, str] = {}
        key_fields: dict[int, dict[str, str]] = {}
        for j, rjob in enumerate(listing(template.get("replicatedJobs"))):
            if not is_trainer_step(mapping(rjob)):
                if launcher_as_node and mapping(rjob).get("name") == NODE and trainer_set:
                    mpi_node_job_trainer(rjob, trainer, upsert_env, merge_resources)
                continue
            pod_spec = mapping(dig(rjob, "template", "spec", "template", "spec"))
            containers = listing(pod_spec.get("containers"))
            for k, c in enumerate(containers):
                c = dict(mapping(c))
                if c.get("name") != NODE or not trainer_set:
                    continue
                for key in ("image", "command", "args"):
                    if trainer.get(key) is not None:
                        c[key] = trainer[key]
                    elif key != "image" and c.get(key) is not None:  # the runtime's, where the TrainJob sets none
                        key_fields.setdefault(k, {})[key] = \
                            f"(runtime) spec.template.spec.replicatedJobs[{j}].template.spec.template.spec.containers[{k}]"
                if trainer.get("env"):
                    c["env"] = upsert_env(listing(c.get("env")), listing(trainer.get("env")))
                # trainingruntime.go 199-203: resourcesPerNode is merged only when the runtime has an mlPolicy (and
                # the builder leaves resources to that merge, builder.go Trainer).
                if isinstance(trainer.get("resourcesPerNode"), dict) and ml is not None:
                    c["resources"] = merge_resources(mapping(c.get("resources")), trainer["resourcesPerNode"])
                containers[k] = c
                fields[k] = "spec.trainer"

        torchtune = listing(trainer.get("command")) == TORCHTUNE_ENTRYPOINT
        pet = [Injected("PET_NNODES", str(nodes)), Injected("PET_NPROC_PER_NODE", nproc),
               Injected("PET_NODE_RANK", field_ref=NODE_RANK_FIELD)]
        master = [Injected("PET_MASTER_ADDR", f"{name}-{NODE}-0-0.{name}"),
                  Injected("PET_MASTER_PORT", str(MASTER_PORT))]
        targets = {(str(mapping(t).get("jobName")), str(c)) for t in listing(mapping(
            mapping(torch_policy).get("envInjection")).get("targets")) for c in listing(mapping(t).get("containerNames"))}

        trainer_count = next((as_int(dig(r, "template", "spec", "parallelism"), 1) or 0  # FindPodSetByAncestor
                              for r in listing(template.get("replicatedJobs")) if is_trainer_step(mapping(r))), 1)
        slots = mpi_slots(mpi, trainer, runtime_resources) if policy == "mpi" else 0
        framework_env = plugin_env(policy, f"{name}-{NODE}-0-0.{name}", MASTER_PORT, NODE_RANK_FIELD, trainer_count,
                                   trainer, runtime_resources)
        ompi_env = mpi_env(slots)

        def inject(rjob: str, j: int, i: int, container: str, init: bool) -> list[Injected]:
            """torch.go EnforceMLPolicy: PET_* (and, unless the command is torchtune's, the master address) into the
            trainer step's `node` container when spec.trainer is set; PET_* and the master into every envInjection
            target container, init containers included. mpi.go 189-224: the Open MPI env into the `launcher` Job's
            `node` container (spec.trainer set or not); jax.go, xgboost.go: their env into the trainer step's `node`
            container when spec.trainer is set."""
            if policy == "mpi":
                return list(ompi_env) if rjob == MPI_LAUNCHER and container == NODE and not init else []
            if framework_env:
                return list(framework_env) if trainer_set and not init and container == NODE and \
                    rjob == first_trainer_job else []
            if torch_policy is None:
                return []
            out: list[Injected] = []
            if trainer_set and not init and container == NODE and rjob in trainer_jobs:
                out += pet + ([] if torchtune else master)
            if (rjob, container) in targets:
                out += pet + master
            return out

        trainer_jobs = {str(mapping(r).get("name")) for r in listing(template.get("replicatedJobs"))
                        if is_trainer_step(mapping(r))}
        first_trainer_job = next((str(mapping(r).get("name")) for r in listing(template.get("replicatedJobs"))
                                  if is_trainer_step(mapping(r))), None)
        mpi_jobs = (NODE, MPI_LAUNCHER) if policy == "mpi" else ()  # one world (mpirun reaches the nodes by ssh)
        groups = jobset.child_groups(template, name, m.namespace, "(runtime) spec.template.spec",
                                     aux=lambda rjob: not is_trainer_step(rjob) and rjob.get("name") not in mpi_jobs,
                                     inject=inject,
                                     replicas=lambda rjob: 1 if ancestor(rjob) in ANCESTORS else
                                     (as_int(rjob.get("replicas"), 1) or 0),
                                     priorities=jobset.priority_classes(bundle))
        for g in groups:
            if g.aux:
                continue
            g.container_name = NODE
            g.containers = listing(dig(g.template, "spec", "containers"))
            g.container_fields = dict(fields)
            g.container_key_fields = {k: dict(v) for k, v in key_fields.items()}
            if (torch_policy is not None or framework_env) and trainer_set and \
                    (torch_policy is not None or g.role == first_trainer_job):
                g.ports = lambda c: [{"containerPort": MASTER_PORT}] if c == NODE else []
        w.groups = groups
        w.policy = policy
        if policy == "mpi":
            w.mpi_hosts, w.mpi_slots = mpi_hosts(template, name, launcher_as_node), slots
            w.notes.append(mpi_note(name, w.mpi_hosts, slots, mpi, launcher_as_node))
        elif policy and policy not in MODELLED_POLICIES:
            w.notes.append(f"runtime '{rname}' has mlPolicy.{policy}: what the Trainer's {policy} plugin injects is "
                           "not modelled here")
        if torchtune:
            w.notes.append("the command is torchtune's `tune run`: the Trainer adds the rendezvous endpoint and the "
                           "recipe to it (not modelled here) instead of PET_MASTER_ADDR/PORT")
        return w

    def services(self, w: TrainJobWorkload) -> list[dict[str, Any]]:
        spec = mapping(dig(w.runtime_obj or {}, "spec", "template", "spec"))
        return jobset.service(w.manifest.name, spec) if w.runtime_obj else []

    def pods_field(self, w: Workload) -> str:
        return "spec.trainer.numNodes"

    def setting_field(self, w: Workload, name: str) -> str | None:
        return {"nproc": "spec.trainer.numProcPerNode", "nnodes": "spec.trainer.numNodes",
                "resources": RESOURCES_PER_NODE}.get(name)

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        return [("metadata.name", m.name, "the headless Service the controller creates", True)]

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(())  # the pods' templates live in the runtime (see runtime_templates)

    def container_settings(self, m: Manifest, key: str) -> list[tuple[str, Any]]:
        name = {"image": "image", "command": "command", "resources": "resourcesPerNode"}.get(key)
        value = dig(m.obj, "spec", "trainer", name) if name else None
        return [(f"spec.trainer.{name}", value)] if value else []

    def training_env(self, m: Manifest) -> Iterator[tuple[str, list[Any]]]:
        env = dig(m.obj, "spec", "trainer", "env")
        if isinstance(env, list):
            yield "spec.trainer.env", env

    def admission(self, w: TrainJobWorkload, bundle: Bundle, torchrun: bool) -> list[Check]:
        out: list[Check] = []
        if w.runtime_obj is None:  # applied from elsewhere: nothing of it can be checked here (REF001 says so)
            return out
        if not w.torch_policy:
            out.append(no_torch_notice(w.runtime_name, w.policy, torchrun))
        out += framework_checks(w, w.policy, w.runtime_obj, w.template, w.mpi_hosts, w.mpi_slots)
        runtime_obj = w.runtime_obj or {}
        template = mapping(dig(runtime_obj, "spec", "template", "spec"))
        # clustertrainingruntime.go 110-116 (v2.3.0): a ClusterTrainingRuntime labelled support=deprecated is
        # admitted with a warning (a namespaced TrainingRuntime is not checked).
        if w.runtime_kind == "ClusterTrainingRuntime" and \
                mapping(dig(runtime_obj, "metadata", "labels")).get(SUPPORT_LABEL) == SUPPORT_DEPRECATED:
            out.append(Check("spec.runtimeRef", f"ClusterTrainingRuntime '{w.runtime_name}' is labelled "
                             f"{SUPPORT_LABEL}={SUPPORT_DEPRECATED}: the Trainer's webhook warns it will be removed "
                             f"in a future release ({DEPRECATION_POLICY_URL})", "move to a supported runtime",
                             severity=WARNING))
        containers = {(str(mapping(r).get("name")), str(mapping(c).get("name")))
                      for r in listing(template.get("replicatedJobs"))
                      for key in ("containers", "initContainers")
                      for c in listing(dig(r, "template", "spec", "template", "spec", key))}
        policy = mapping(dig(runtime_obj, "spec", "mlPolicy", "torch", "envInjection"))
        for t in listing(policy.get("targets")):
            for c in listing(mapping(t).get("containerNames")):
                if (str(mapping(t).get("jobName")), str(c)) not in containers:
                    out.append(Check("spec.runtimeRef", f"the runtime's envInjection names container '{c}' of "
                                     f"'{mapping(t).get('jobName')}', which its template does not have: the Trainer "
                                     "refuses the TrainJob", "fix mlPolicy.torch.envInjection.targets in the runtime"))
        jobs = {str(mapping(r).get("name")) for r in listing(template.get("replicatedJobs"))}
        # jobset.go 112-170 (Validate, kubeflow/trainer v2.3.0): an initializer the TrainJob configures needs the
        # runtime's replicated Job of that name, a container of that name in it, and that container mounting the
        # volume `initializer`; all read in the template after the TrainJob's runtime patches (trainingruntime.go
        # ValidateObjects 315 builds the info the plugin reads with them).
        patched_template = mapping(w.template)
        patched_jobs = {str(mapping(r).get("name")) for r in listing(patched_template.get("replicatedJobs"))}
        patched = {(str(mapping(r).get("name")), str(mapping(c).get("name")))
                   for r in listing(patched_template.get("replicatedJobs"))
                   for key in ("containers", "initContainers")
                   for c in listing(dig(r, "template", "spec", "template", "spec", key))}
        initializer = mapping(dig(w.manifest.obj, "spec", "initializer"))
        for step, key in INITIALIZERS.items():
            if initializer.get(key) is None:
                continue
            field, ref = f"spec.initializer.{key}", "spec.runtimeRef"
            if step not in patched_jobs:
                out.append(Check(ref, f"{field} is set but the runtime has no replicated Job '{step}': the Trainer "
                                 "refuses the TrainJob", f"use a runtime with a '{step}' Job, or drop {field}"))
            elif (step, step) not in patched:
                out.append(Check(ref, f"{field} is set but the runtime's '{step}' Job has no container named "
                                 f"'{step}': the Trainer refuses the TrainJob", f"name the container '{step}'"))
            elif not any(mapping(vm).get("name") == INITIALIZER_VOLUME
                         for r in listing(patched_template.get("replicatedJobs")) if mapping(r).get("name") == step
                         for c in listing(dig(r, "template", "spec", "template", "spec", "containers"))
                         if mapping(c).get("name") == step for vm in listing(mapping(c).get("volumeMounts"))):
                out.append(Check(ref, f"{field} is set but the runtime's '{step}' container does not mount the "
                                 f"volume '{INITIALIZER_VOLUME}': the Trainer refuses the TrainJob",
                                 f"mount a volume named '{INITIALIZER_VOLUME}' in the '{step}' container"))
        # jobset.go 175-207: a runtime patch may only reach replicated Jobs and containers the runtime has, and may
        # not set env on the node or initializer containers.
        for pi, patch in enumerate(listing(dig(w.manifest.obj, "spec", "runtimePatches"))):
            where = f"spec.runtimePatches[{pi}]"
            manager = mapping(patch).get("manager")
            if isinstance(manager, str) and manager and domain_prefixed_path_problems(manager):
                # jobset.go 176: validation.IsDomainPrefixedPath (k8s.io/apimachinery util/validation).
                out.append(Check(f"{where}.manager", f"manager '{manager}' is not a domain-prefixed path (such as "
                                 "acme.io/foo): the Trainer's webhook refuses it", "name the manager <domain>/<name>, "
                                 "as Kueue's kueue.x-k8s.io/manager"))
            for rjob in listing(dig(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")):
                rname = str(mapping(rjob).get("name"))
                if rname not in jobs:
                    out.append(Check(where, f"a runtime patch names replicated Job '{rname}', which the runtime does "
                                     "not have: the Trainer refuses it", "patch only the runtime's replicated Jobs"))
                    continue
                for key in ("containers", "initContainers"):
                    for c in listing(dig(rjob, "template", "spec", "template", "spec", key)):
                        cname = str(mapping(c).get("name"))
                        if (rname, cname) not in containers:
                            out.append(Check(where, f"a runtime patch names container '{cname}' of '{rname}', which "
                                             "the runtime does not have: the Trainer refuses it",
                                             "patch only the runtime's containers"))
                        elif key == "containers" and cname in (NODE, *INITIALIZERS) and mapping(c).get("env"):
                            out.append(Check(where, f"a runtime patch sets env on the '{cname}' container: the "
                                             "Trainer refuses it", "set the trainer's env in spec.trainer.env"))
        trainer = dig(w.manifest.obj, "spec", "trainer")
        if w.torch_policy and isinstance(trainer, dict) and listing(trainer.get("command")) == \
                TORCHTUNE_ENTRYPOINT:
            out += torchtune_checks(trainer, str(mapping(dig(w.manifest.obj, "spec", "runtimeRef")).get("name", "")),
                                    w.runtime_resources)
        for i, var in enumerate(listing(dig(w.manifest.obj, "spec", "trainer", "env"))):
            # torch.go Validate 58-77 (v2.3.0): only a torch runtime's TrainJob is checked for PET_* names.
            if w.torch_policy and str(mapping(var).get("name", "")) in RESERVED_ENV:
                out.append(Check(f"spec.trainer.env[{i}]", f"{var.get('name')} is set by hand; the Trainer sets it "
                                 "itself and its webhook rejects this",
                                 "use spec.trainer.numNodes / numProcPerNode instead"))
        return out

    def mpi_world(self, w: TrainJobWorkload) -> MpiWorld | None:
        return mpi_world(w, w.policy, w.runtime_obj, w.mpi_hosts, w.mpi_slots)

    def unmodelled_world(self, w: TrainJobWorkload) -> str | None:
        return mpi_unmodelled(w, w.policy, w.runtime_obj)

    def unlinked(self, w: TrainJobWorkload) -> Check | None:
        """torch.go EnforceMLPolicy (v2.3.0) gives the trainer's `node` container PET_NNODES, PET_NPROC_PER_NODE,
        PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT, and nothing else: torchrun reads them (as its flags'
        defaults), torch.distributed's env:// initialisation reads WORLD_SIZE, RANK, MASTER_ADDR and MASTER_PORT,
        which no one sets here. So several nodes whose command is not torchrun form no world together."""
        nodes = w.pods
        if not w.torch_policy or not w.trainer_set or nodes < 2:
            return None
        if listing(dig(w.manifest.obj, "spec", "trainer", "command")) == TORCHTUNE_ENTRYPOINT:
            # torch.go 175-200 (v2.3.0): for torchtune's `tune run` (torchrun's wrapper, which reads PET_*) the
            # Trainer appends --rdzv_endpoint=<trainjob>-node-0-0.<trainjob>:29500 and the recipe to the command.
            return None
        written = "spec.trainer.command" if dig(w.manifest.obj, "spec", "trainer", "command") else \
            w.pod(0).container_field  # the runtime's node container
        return Check(written,
                     f"numNodes is {nodes} on runtime '{w.runtime_name}' (mlPolicy.torch) but the command starts "
                     "no torchrun and no WORLD_SIZE, RANK or MASTER_ADDR is set: the Trainer's PET_* env is read by "
                     f"torchrun alone, so the {nodes} nodes form no world together (each trains alone, or an env:// "
                     "init_process_group fails for want of WORLD_SIZE)",
                     "start the script with torchrun (it reads PET_*), or set numNodes: 1 if the nodes are not "
                     "meant to train together")

    def jobs(self, w: Workload) -> tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None:
        runtime = w.runtime
        if runtime is None:
            return None
        return runtime, list(runtime_job_specs(runtime, trainer_only=True)), "OnFailure"

    def gang_scheduler(self, w: Workload) -> str | None:
        runtime = w.runtime
        if runtime is not None and mapping(runtime.obj.get("spec")).get("podGroupPolicy"):
            return "podGroupPolicy"
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        runtime = w.runtime
        if runtime is None:
            return []
        return jobset.job_restarts(runtime_job_specs(runtime, trainer_only=True),
                                   mapping(dig(runtime.obj, "spec", "template", "spec")))

    def restart_limit(self, w: Workload, losses: int) -> tuple[str, str]:
        return "spec.runtimeRef", (f"give the runtime's JobSet template failurePolicy.maxRestarts {losses} or more "
                                   "(spec.template.spec.failurePolicy): every Job is recreated after a lost pod")

    def after_exit(self, w: Workload, bundle: Bundle, ended: PodExit, count: RestartCount) -> Decision:
        """The TrainJob's pods run in the JobSet the Trainer builds from the runtime's template: the JobSet and Job
        controllers decide (jobset.jobset_after_exit with the runtime's failurePolicy)."""
        runtime = w.runtime
        return jobset.jobset_after_exit(w, self.jobs(w), mapping(dig(runtime.obj, "spec", "template", "spec"))
                                        if runtime is not None else {}, ended, count)

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        tr = m.obj.setdefault("spec", {}).setdefault("trainer", {})
        tr["numNodes"], tr["numProcPerNode"] = nodes, 1
        drop_gpus(tr.get("resourcesPerNode"))
        for v in listing(tr.get("env")):
            if mapping(v).get("name") == "DIST_BACKEND":
                v["value"] = "gloo"
        return [f"{m.ref}: numNodes -> {nodes}, numProcPerNode -> 1, GPUs removed"]


LAUNCHER = TrainJobLauncher()
