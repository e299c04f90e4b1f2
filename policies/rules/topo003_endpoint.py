"""The rendezvous endpoint (MASTER_ADDR or --rdzv-endpoint) is pod 0's DNS name.

With static rendezvous, node rank 0 hosts the store at MASTER_ADDR:MASTER_PORT; with c10d the endpoint's host runs
it. Either way every pod must reach one fixed pod: pod 0, named `<hostname>.<subdomain>` (optionally followed by
`.<namespace>`, `.svc`, `.svc.cluster.local`). A headless Service's own name resolves to all pods in turn, a
`namePrefix` renames the workload but not a literal MASTER_ADDR, and `localhost` only reaches the pod itself: each
ends in `Name or service not known` or a rendezvous timeout. With static rendezvous pod 0 hosts the store and may
name itself by its own short hostname (`--master-addr=$(hostname)`, resolved through its /etc/hosts): then the
other pods' endpoint is the one that must name pod 0.

Fails: MASTER_ADDR `train-rdzv` (the Service, not a pod); MASTER_ADDR `ddp-train-0.ddp-train` after a
`namePrefix: team-` renamed the Job to `team-ddp-train`.
Passes: Job `ddp-train`, subdomain `ddp-train`, MASTER_ADDR `ddp-train-0.ddp-train`; a PyTorchJob, whose
operator points MASTER_ADDR at its own `<job>-master-0` Service.

With an etcd rendezvous (`etcd`, `etcd-v2`) the endpoint is the etcd server instead: where its Service is in the
manifests it must declare the endpoint's port; a Service that is not in them is applied elsewhere (REF001 lists it,
an error only in an environment that declares itself self-contained).
"""
from __future__ import annotations

import re

from ..rulekit import problem
from ..torchrun import split_endpoint

ID = "TOPO003"
NAME = "endpoint-is-pod-0"
_LOCAL = {"", "localhost", "127.0.0.1", "::1", "0.0.0.0"}


def pod0_pattern(base: str, namespace: str) -> re.Pattern[str]:
    """Pod 0's name `base`, optionally followed by `.<namespace>` (any label where the pod's namespace is not
    written), `.svc`, `.svc.cluster.local`, and a final dot."""
    ns = re.escape(namespace) if namespace else r"[a-z0-9-]+"
    return re.compile(rf"^{re.escape(base)}(\.{ns}(\.svc(\.cluster\.local)?)?)?\.?$")


def check(ctx):
    for t in ctx.topologies:
        if t.pods <= 1 and (t.nnodes_max or 1) <= 1:
            continue
        if t.first.backend.value.startswith("c10d (standalone)"):
            continue  # TOPO001 reports a standalone world on several pods
        host = t.endpoint_host or ""
        if "$" in host:
            continue  # TOPO012
        v = t.first.endpoint
        where = v.field or (t.first.inv.field if t.first.inv else t.first.pod.container_field)
        if t.backend.startswith("etcd"):
            yield from _etcd(ctx, t, host, where)
            continue
        pod = t.first.pod
        expected = t.workload.launcher.address(t.workload, pod)
        if host == pod.hostname and t.backend == "static":
            # Node rank 0 hosts the store and may name itself by its own short hostname (`$(hostname)`, which
            # resolves through the pod's /etc/hosts); only the other pods need a name that reaches it.
            yield from _others(t, expected)
            continue
        if host in _LOCAL:
            yield problem(ID, t, where, f"rendezvous endpoint is '{host or 'unset'}' on a {t.pods}-pod job; "
                          f"the other pods cannot reach it", f"point it at pod 0: {expected}")
        elif not pod0_pattern(expected, pod.namespace).match(host):
            svc = t.first.pod.subdomain
            why = (" (a headless Service name resolves to every pod, not to pod 0)" if host == svc else "")
            yield problem(ID, t, where, f"rendezvous endpoint host is '{host}', expected pod 0 '{expected}'{why}",
                          f"set it to {expected}")


def _others(t, expected: str):
    """The pods other than pod 0 (one per template, and the last) where pod 0 names itself by its short hostname."""
    for v in t.views[1:]:
        value = v.endpoint.value or ""
        if not value or "$" in value:
            continue  # unset or not resolved here (TOPO012)
        host, _ = split_endpoint(value)
        if not pod0_pattern(expected, v.pod.namespace).match(host):
            where = v.endpoint.field or (v.inv.field if v.inv else v.pod.container_field)
            own = " (its own hostname)" if host == v.pod.hostname else ""
            yield problem(ID, t, where, f"pod {v.pod.name}'s rendezvous endpoint host is '{host}'{own}, expected "
                          f"pod 0 '{expected}' (pod 0 may name itself by its hostname; the others need its DNS name)",
                          f"set it to {expected}")


def _etcd(ctx, t, host, where):
    ns = t.first.pod.namespace
    name = host.split(".")[0]
    rest = host[len(name):].lstrip(".")
    svc = ctx.bundle.services.get((ns, name))
    allowed = {"", ns, f"{ns}.svc", f"{ns}.svc.cluster.local"} if ns else None
    if svc is None or (allowed is not None and rest not in allowed):
        return  # applied elsewhere: REF001
    ports = {str(p.get(k)) for p in (svc.obj.get("spec") or {}).get("ports") or [] for k in ("port", "targetPort")}
    if t.endpoint_port and t.endpoint_port not in ports:
        yield problem(ID, t, where, f"etcd Service '{name}' declares ports {sorted(ports)}, the endpoint uses "
                      f"{t.endpoint_port}", f"use one of the Service's ports, e.g. {name}:2379")
