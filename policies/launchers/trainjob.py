"""Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1, kubeflow/trainer tag v2.3.0) with the
(Cluster)TrainingRuntime it names: the Trainer builds a JobSet from the runtime's template, sets the trainer step's
pod count and container from `spec.trainer`, and injects torchrun's `PET_*` env
(pkg/runtime/core/trainingruntime.go, pkg/runtime/framework/plugins/torch/torch.go, plugins/jobset/builder.go)."""
from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, Iterator

import yaml

from ..model import Manifest
from . import jobset
from .base import (Bundle, Check, Injected, Launcher, ScaleSpec, Workload, as_int, dig, listing, mapping)

KIND = "TrainJob"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_STEP = "trainer"
NODE = "node"  # the trainer container's (and replicated Job's) name the Trainer looks for
MASTER_PORT = 29500  # constants.ContainerTrainerPort
# constants.JobCompletionIndexFieldPath: PET_NODE_RANK reads the Job controller's annotation.
NODE_RANK_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
# Upstream's default runtime, used (and said to be used) when a TrainJob names it without shipping it.
UPSTREAM_RUNTIME_FILE = Path(__file__).resolve().parent.parent / "upstream" / "torch_distributed.yaml"
UPSTREAM_RUNTIME = "torch-distributed"


def load_upstream_runtime() -> dict[str, Any]:
    return yaml.safe_load(UPSTREAM_RUNTIME_FILE.read_text())


def _cpu_value(q: Any) -> int | None:
    """resource.Quantity.Value() of a CPU quantity: rounded up to a whole number."""
    if q is None:
        return None
    text = str(q)
    try:
        value = float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        return None
    return math.ceil(value)


def _gpus(resources: dict[str, Any]) -> int:
    """runtime.GetNumGPUPerNode: requests of the first resource whose name contains "gpu", else its limits."""
    def count(section: Any) -> int:
        for name, q in mapping(section).items():
            if "gpu" in str(name).lower():
                return as_int(q, 0) or 0
        return 0
    return count(resources.get("requests")) or count(resources.get("limits"))


def resolve_nproc(trainer: dict[str, Any], runtime_resources: dict[str, Any]) -> str:
    """torch.go EnforceMLPolicy: `numProcPerNode` when set; else `auto`, which without a GPU becomes
    max(1, CPU request, else CPU limit, rounded up) of the TrainJob's resourcesPerNode (the runtime's node container
    resources where the TrainJob sets none); with a GPU it stays `auto` for torchrun to count the devices."""
    if trainer.get("numProcPerNode") is not None:
        return str(trainer["numProcPerNode"])
    res = mapping(trainer.get("resourcesPerNode")) if trainer.get("resourcesPerNode") is not None else runtime_resources
    if _gpus(res):
        return "auto"
    cpu = _cpu_value(mapping(res.get("requests")).get("cpu"))
    if not cpu:
        cpu = _cpu_value(mapping(res.get("limits")).get("cpu"))
    return str(max(1, cpu or 0))


def merge_resources(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """trainingruntimeutil.MergeResourceRequirements: limits and requests merged key by key, the TrainJob's win."""
    out: dict[str, Any] = {}
    for section in ("limits", "requests", "claims"):
        merged = {**mapping(base.get(section)), **mapping(override.get(section))} if section != "claims" else \
            (override.get(section) or base.get(section))
        if merged:
            out[section] = merged
    return out


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


def is_trainer_step(rjob: dict[str, Any]) -> bool:
    return mapping(dig(rjob, "template", "metadata", "labels")).get(ANCESTOR_LABEL) == TRAINER_STEP


class TrainJobLauncher(Launcher):
    id = "trainjob"
    title = "Kubeflow Trainer v2 TrainJob"
    kinds = (("trainer.kubeflow.org", KIND),)
    for_training = True
    managed_dns = True
    immutable = ("spec.trainer", "spec.runtimeRef")
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

    def build(self, m: Manifest, bundle: Bundle) -> Workload:
        spec = mapping(m.obj.get("spec"))
        name = m.name
        trainer_set = isinstance(spec.get("trainer"), dict)
        trainer = mapping(spec.get("trainer"))
        runtime_obj, runtime, kind, rname = self.runtime(m, bundle)
        w = Workload(m, self, [], m.namespace)
        w.facts.update(runtime_kind=kind, runtime_name=rname, runtime_found=runtime_obj is not None,
                       runtime_source=runtime.source if runtime else None, runtime=runtime)
        if runtime_obj is None:
            w.facts["unresolved"] = Check("spec.runtimeRef", f"runtime {kind} '{rname}' is not in these manifests: "
                                          "the topology cannot be worked out",
                                          "commit the runtime beside the TrainJob so everything it depends on lives "
                                          "in git")
            return w
        if runtime is None:
            w.notes.append(f"runtime {UPSTREAM_RUNTIME} is not in these manifests: assumed upstream's "
                           "(kubeflow/trainer v2.3.0)")
        rspec = mapping(runtime_obj.get("spec"))
        ml = rspec.get("mlPolicy") if isinstance(rspec.get("mlPolicy"), dict) else None
        torch_policy = mapping(ml).get("torch") if ml is not None else None
        nodes = as_int(trainer.get("numNodes"), as_int(mapping(ml).get("numNodes"), 1)) or 0
        template = copy.deepcopy(mapping(dig(rspec, "template", "spec")))

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
        w.facts.update(torch_policy=torch_policy is not None, num_nodes=nodes, nproc_per_node=nproc,
                       trainer_set=trainer_set)

        # The trainer step's `node` container after the jobset plugin's builder and the runtime's resource merge.
        fields: dict[int, str] = {}
        for rjob in listing(template.get("replicatedJobs")):
            if not is_trainer_step(mapping(rjob)):
                continue
            rjob["replicas"] = 1  # builder.go Trainer: the trainer step is one Job
            pod_spec = mapping(dig(rjob, "template", "spec", "template", "spec"))
            containers = listing(pod_spec.get("containers"))
            for k, c in enumerate(containers):
                c = dict(mapping(c))
                if c.get("name") != NODE or not trainer_set:
                    continue
                for key in ("image", "command", "args"):
                    if trainer.get(key) is not None:
                        c[key] = trainer[key]
                if trainer.get("env"):
                    c["env"] = upsert_env(listing(c.get("env")), listing(trainer.get("env")))
                if isinstance(trainer.get("resourcesPerNode"), dict):
                    c["resources"] = merge_resources(mapping(c.get("resources")), trainer["resourcesPerNode"])
                containers[k] = c
                fields[k] = "spec.trainer"
            if ml is not None:
                js = rjob.setdefault("template", {}).setdefault("spec", {})
                js["parallelism"] = js["completions"] = nodes

        def inject(rjob: str, j: int, i: int, container: str, init: bool) -> list[Injected]:
            if torch_policy is None or not trainer_set or init or container != NODE:
                return []
            return [Injected("PET_NNODES", str(nodes)), Injected("PET_NPROC_PER_NODE", nproc),
                    Injected("PET_NODE_RANK", field_ref=NODE_RANK_FIELD),
                    Injected("PET_MASTER_ADDR", f"{name}-{NODE}-0-0.{name}"),
                    Injected("PET_MASTER_PORT", str(MASTER_PORT))]

        groups = jobset.child_groups(template, name, "(runtime) spec.template.spec",
                                     select=is_trainer_step, inject=inject)
        for g in groups:
            g.container_name = NODE
            g.containers = listing(dig(g.template, "spec", "containers"))
            g.container_fields = dict(fields)
            if torch_policy is not None and trainer_set:
                g.ports = lambda c: [{"containerPort": MASTER_PORT}] if c == NODE else []
        w.groups = groups
        return w

    def pods_field(self, w: Workload) -> str:
        return "spec.trainer.numNodes"

    def setting_field(self, w: Workload, name: str) -> str | None:
        return {"nproc": "spec.trainer.numProcPerNode", "nnodes": "spec.trainer.numNodes"}.get(name)

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        return [("metadata.name", m.name, "the headless Service the controller creates", True)]

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(())  # the pods' templates live in the runtime (see runtime_templates)

    def container_settings(self, m: Manifest, key: str) -> list[tuple[str, Any]]:
        name = {"image": "image", "resources": "resourcesPerNode"}.get(key)
        value = dig(m.obj, "spec", "trainer", name) if name else None
        return [(f"spec.trainer.{name}", value)] if value else []

    def training_env(self, m: Manifest) -> Iterator[tuple[str, list[Any]]]:
        env = dig(m.obj, "spec", "trainer", "env")
        if isinstance(env, list):
            yield "spec.trainer.env", env

    def depends_on(self, m: Manifest) -> list[tuple[str, str, str]]:
        ref = mapping(dig(m.obj, "spec", "runtimeRef"))
        return [(str(ref.get("kind") or "ClusterTrainingRuntime"), str(ref.get("name") or ""), "spec.runtimeRef")]

    def admission(self, w: Workload, bundle: Bundle, torchrun: bool) -> list[Check]:
        out: list[Check] = []
        f = w.facts
        if not f.get("torch_policy"):
            out.append(Check("spec.runtimeRef", f"runtime '{f.get('runtime_name')}' has no mlPolicy.torch: the "
                             "Trainer injects no PET_* env", "use a torch runtime"))
        for i, var in enumerate(listing(dig(w.manifest.obj, "spec", "trainer", "env"))):
            if str(mapping(var).get("name", "")) in RESERVED_ENV:
                out.append(Check(f"spec.trainer.env[{i}]", f"{var.get('name')} is set by hand; the Trainer sets it "
                                 "itself and its webhook rejects this",
                                 "use spec.trainer.numNodes / numProcPerNode instead"))
        return out

    def jobs(self, w: Workload) -> tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None:
        runtime = w.facts.get("runtime")
        if runtime is None:
            return None
        return runtime, list(runtime_job_specs(runtime, trainer_only=True)), "OnFailure"

    def gang_scheduler(self, w: Workload) -> str | None:
        runtime = w.facts.get("runtime")
        if runtime is not None and mapping(runtime.obj.get("spec")).get("podGroupPolicy"):
            return "podGroupPolicy"
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        runtime = w.facts.get("runtime")
        if runtime is None:
            return []
        return jobset.job_restarts(runtime_job_specs(runtime, trainer_only=True),
                                   mapping(dig(runtime.obj, "spec", "template", "spec")))

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        from .base import GPU_RESOURCES

        tr = m.obj.setdefault("spec", {}).setdefault("trainer", {})
        tr["numNodes"], tr["numProcPerNode"] = nodes, 1
        for key in ("limits", "requests"):
            for g in GPU_RESOURCES:
                mapping(mapping(tr.get("resourcesPerNode")).get(key)).pop(g, None)
        for v in listing(tr.get("env")):
            if mapping(v).get("name") == "DIST_BACKEND":
                v["value"] = "gloo"
        return [f"{m.ref}: numNodes -> {nodes}, numProcPerNode -> 1, GPUs removed"]


def runtime_job_specs(m: Manifest, trainer_only: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    """(field path, Job spec) of a (Cluster)TrainingRuntime's replicated Jobs (only the trainer step's with
    `trainer_only`)."""
    for i, rj in enumerate(listing(dig(m.obj, "spec", "template", "spec", "replicatedJobs"))):
        if trainer_only and not is_trainer_step(mapping(rj)):
            continue
        js = dig(rj, "template", "spec")
        if isinstance(js, dict):
            yield f"spec.template.spec.replicatedJobs[{i}].template.spec", js


class RuntimeKind(Launcher):
    """A (Cluster)TrainingRuntime starts no pods itself; its templates are the TrainJob's."""

    id = "trainingruntime"
    title = "Kubeflow Trainer v2 (Cluster)TrainingRuntime"
    kinds = tuple(("trainer.kubeflow.org", k) for k in RUNTIME_KINDS)
    starts_pods = False
    cluster_scoped = (("trainer.kubeflow.org", "ClusterTrainingRuntime"),)

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        for field_path, js in runtime_job_specs(m):
            if isinstance(js.get("template"), dict):
                yield f"{field_path}.template", js["template"]

    def job_specs(self, m: Manifest, trainer_only: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        return runtime_job_specs(m, trainer_only)


LAUNCHER = TrainJobLauncher()
RUNTIME = RuntimeKind()
