"""JobSet (jobset.x-k8s.io/v1alpha2, kubernetes-sigs/jobset v0.12.0): child Jobs `<jobset>-<replicatedJob>-<index>`,
each run by the Job controller, labelled and annotated by the JobSet controller and published under one headless
Service (pkg/controllers/jobset_controller.go, pkg/webhooks/jobset_webhook.go)."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from ..model import Manifest
from . import indexed_job
from .base import (Bundle, Check, Injected, Launcher, PodGroup, ScaleSpec, Workload, as_int, dig, listing,
                   mapping)

KIND = "JobSet"
PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = PREFIX + "jobset-name"
REPLICATED_JOB_NAME = PREFIX + "replicatedjob-name"
REPLICATED_JOB_REPLICAS = PREFIX + "replicatedjob-replicas"
JOB_INDEX = PREFIX + "job-index"
JOB_GLOBAL_INDEX = PREFIX + "job-global-index"
RESTART_ATTEMPT = PREFIX + "restart-attempt"
COORDINATOR = PREFIX + "coordinator"


def subdomain_of(name: str, spec: dict[str, Any]) -> str | None:
    """The subdomain the pods get: `network.subdomain`, else the JobSet's name; None with DNS hostnames off."""
    network = mapping(spec.get("network"))
    if network.get("enableDNSHostnames") is False:
        return None
    return str(network.get("subdomain") or name)


def coordinator_endpoint(name: str, spec: dict[str, Any]) -> str | None:
    """`<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>` of `spec.coordinator` (jobset_controller.go
    coordinatorEndpoint), None when no coordinator is set."""
    coord = spec.get("coordinator")
    if not isinstance(coord, dict):
        return None
    sub = str(mapping(spec.get("network")).get("subdomain") or name)
    return (f"{name}-{coord.get('replicatedJob')}-{as_int(coord.get('jobIndex'), 0)}-"
            f"{as_int(coord.get('podIndex'), 0)}.{sub}")


def child_groups(spec: dict[str, Any], name: str, field_prefix: str,
                 select: Callable[[dict[str, Any]], bool] = lambda rjob: True,
                 inject: Callable[[str, int, int, str, bool], list[Injected]] | None = None,
                 replicas: Callable[[dict[str, Any]], int] | None = None,
                 job_spec: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> list[PodGroup]:
    """The pods of every child Job of a JobSet spec, in replicated-Job order. The JobSet controller labels and
    annotates each Job and its pod template with the JobSet, replicated Job, Job index and global Job index, and
    forces the pod template's subdomain to the JobSet's; the webhook defaults completionMode to Indexed only where it
    is unset. `inject(rjob, job_index, pod_index, container, init)` adds a caller's env (the Trainer's)."""
    subdomain = subdomain_of(name, spec)
    coordinator = coordinator_endpoint(name, spec)
    groups: list[PodGroup] = []
    offset = 0
    global_index = 0
    for ri, rjob in enumerate(listing(spec.get("replicatedJobs"))):
        rjob = mapping(rjob)
        rname = str(rjob.get("name"))
        count = replicas(rjob) if replicas else (as_int(rjob.get("replicas"), 1) or 0)
        js = dict(job_spec(rjob) if job_spec else mapping(dig(rjob, "template", "spec")))
        js.setdefault("completionMode", indexed_job.INDEXED)
        chosen = select(rjob)
        for j in range(count):
            meta = {JOBSET_NAME: name, REPLICATED_JOB_NAME: rname, REPLICATED_JOB_REPLICAS: str(count),
                    JOB_INDEX: str(j), JOB_GLOBAL_INDEX: str(global_index + j), RESTART_ATTEMPT: "0"}
            if coordinator:
                meta[COORDINATOR] = coordinator
            if not chosen:
                continue
            child = f"{name}-{rname}-{j}"
            g = indexed_job.job_group(js, child, f"{field_prefix}.replicatedJobs[{ri}].template.spec.template", rname,
                                      offset, labels=lambda i, meta=meta: meta, annotations=lambda i, meta=meta: meta)
            g.subdomain, g.subdomain_forced = subdomain, True
            if inject is not None:
                base = g.inject
                g.inject = (lambda i, c, init, base=base, rname=rname, j=j:
                            base(i, c, init) + inject(rname, j, i, c, init))
            groups.append(g)
            offset += g.count
        global_index += count
    return groups


class JobSetLauncher(Launcher):
    id = "jobset"
    title = "JobSet"
    kinds = (("jobset.x-k8s.io", KIND),)
    managed_dns = True
    immutable = ("spec.replicatedJobs",)
    ttl_field = ("spec", "ttlSecondsAfterFinished")
    scale = ScaleSpec(
        pods=[(("spec", "replicatedJobs", 0, "template", "spec", "completions"), 0),
              (("spec", "replicatedJobs", 0, "template", "spec", "parallelism"), 0)],
        env_container=("spec", "replicatedJobs", 0, "template", "spec", "template", "spec", "containers", 0),
        resources=[("spec", "replicatedJobs", 0, "template", "spec", "template", "spec", "containers", 0,
                    "resources")])

    def build(self, m: Manifest, bundle: Bundle) -> Workload:
        spec = mapping(m.obj.get("spec"))
        w = Workload(m, self, child_groups(spec, m.name, "spec"), m.namespace)
        w.facts.update(subdomain=subdomain_of(m.name, spec))
        return w

    def pods_field(self, w: Workload) -> str:
        return "spec.replicatedJobs"

    def dns_field(self, w: Workload, pod: Any) -> str:
        return "spec.network.subdomain"

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        spec = mapping(m.obj.get("spec"))
        sub = subdomain_of(m.name, spec)
        field_path = "spec.network.subdomain" if mapping(spec.get("network")).get("subdomain") else "metadata.name"
        return [(field_path, sub, "the headless Service the controller creates", True)] if sub else []

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        for field_path, js in self.job_specs(m):
            if isinstance(js.get("template"), dict):
                yield f"{field_path}.template", js["template"]

    def job_specs(self, m: Manifest, trainer_only: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        for i, rj in enumerate(listing(dig(m.obj, "spec", "replicatedJobs"))):
            js = dig(rj, "template", "spec")
            if isinstance(js, dict):
                yield f"spec.replicatedJobs[{i}].template.spec", js

    def jobs(self, w: Workload) -> tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None:
        return w.manifest, list(self.job_specs(w.manifest)), "OnFailure"

    def publishes_not_ready(self, w: Workload) -> Check | None:
        if mapping(dig(w.manifest.obj, "spec", "network")).get("publishNotReadyAddresses") is False:
            return Check("spec.network.publishNotReadyAddresses", "JobSet publishes only Ready pods: peers cannot "
                         "resolve pod 0 until it is Ready", "remove it, or set it to true")
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        return job_restarts(self.job_specs(w.manifest), mapping(w.manifest.obj.get("spec")))

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        for _, js in self.job_specs(m):
            js["completions"] = js["parallelism"] = nodes
        return [f"{m.ref}: completions, parallelism -> {nodes}"]


def job_restarts(job_specs: Iterator[tuple[str, dict[str, Any]]], jobset_spec: dict[str, Any]) -> list[str]:
    """What restarts a JobSet's world: a Job's backoffLimit and the JobSet's failurePolicy.maxRestarts."""
    why = indexed_job.backoff_restarts(job_specs)
    max_restarts = mapping(jobset_spec.get("failurePolicy")).get("maxRestarts")
    if isinstance(max_restarts, int) and max_restarts > 0:
        why.append(f"failurePolicy.maxRestarts {max_restarts}")
    return why


LAUNCHER = JobSetLauncher()
