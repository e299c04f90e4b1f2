"""Pod 0's name resolves: the pods have a subdomain naming a headless Service in the same namespace.

A pod gets the DNS name `<hostname>.<subdomain>` only when `spec.subdomain` (a Job) or `spec.serviceName`
(a StatefulSet) names a Service with `clusterIP: None` in the pod's namespace. Without it MASTER_ADDR never
resolves. Launchers that create their own Services (PyTorchJob, TrainJob, JobSet) are exempt.

A Service that is not in the manifests may be applied from another file or repository: a warning phrased as that
condition, an error where the environment declares its manifests self-contained (`selfContained: true`, as this
repository's environments do; REF001).

Fails: an Indexed Job with no `subdomain`; `subdomain: ddp-train` with no Service `ddp-train` in the manifests (a
warning for a file validated alone), or one with a cluster IP.
Passes: `subdomain: ddp-train` and a Service `ddp-train` with `clusterIP: None`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, WARNING, Problem
from .kit import Context, problem, service_problem

ID = "TOPO004"
NAME = "headless-service"


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if t.workload.managed_dns or (t.pods <= 1 and (t.nnodes_max or 1) <= 1):
            continue
        pod = t.first.pod
        field = t.workload.launcher.dns_field(t.workload, pod)
        if not pod.subdomain:
            yield problem(ID, t, field, "pods have no subdomain, so no pod has a DNS name its peers can resolve",
                          "set it to the name of a headless Service that selects the pods")
            continue
        if t.service is None:
            where = f"no Service '{pod.subdomain}' in namespace '{pod.namespace or '(default)'}' among these manifests"
            hint = f"add a headless Service named {pod.subdomain} that selects the pods"
            if ctx.env is not None and ctx.env.self_contained:
                yield problem(ID, t, field, f"{where}, which {ctx.env.name} declares self-contained: pod 0's name "
                              "never resolves", hint, severity=ERROR)
            else:  # it may be applied from another file or repository: what the input does not show
                yield problem(ID, t, field, f"{where}: unless a headless Service of that name that selects the pods "
                              "is applied from elsewhere, pod 0's name never resolves", hint + " (or validate the "
                              "files together: --bundle)", severity=WARNING)
            continue
        cluster_ip = (t.service.obj.get("spec") or {}).get("clusterIP")
        if cluster_ip != "None":
            yield service_problem(ID, t, "spec.clusterIP", f"Service '{t.service.name}' has clusterIP "
                                      f"'{cluster_ip or '(allocated)'}', expected None (headless)",
                                      "set spec.clusterIP: None")

