"""The rendezvous endpoint (MASTER_ADDR or --rdzv-endpoint) is pod 0's DNS name.

The same holds for the address other launchers are given: `accelerate launch --main_process_ip`, `deepspeed
--master_addr`, a script's `--dist-url tcp://HOST:PORT` (the PyTorch ImageNet example's, rank 0 hosting the store).

With static rendezvous, node rank 0 hosts the store at MASTER_ADDR:MASTER_PORT; with c10d the endpoint's host runs
it. Either way every pod must reach one fixed pod: pod 0, named `<hostname>.<subdomain>` (optionally followed by
`.<namespace>`, `.svc`, `.svc.<cluster domain>`: the environment's `clusterDomain`, cluster.local where it declares
none). A headless Service's own name resolves to all pods in turn, a `namePrefix` renames the workload but not a
literal MASTER_ADDR, `localhost` only reaches the pod itself, and a name under `.svc.cluster.local` does not resolve
where the environment declares another cluster domain: each ends in `Name or service not known` or a rendezvous
timeout. With static rendezvous pod 0 hosts the store and may name itself by its own short hostname
(`--master-addr=$(hostname)`, resolved through its /etc/hosts): then the other pods' endpoint is the one that must
name pod 0.

A script started without a launcher that gets WORLD_SIZE but no MASTER_ADDR in its env is a warning: it fails at
`init_process_group` (env://) unless it sets MASTER_ADDR itself, which the manifests do not show (a wrapper script in
the image may take it from LWS_LEADER_ADDRESS). A MASTER_ADDR of `localhost` on several pods stays an error.

Fails: MASTER_ADDR `train-rdzv` (the Service, not a pod); MASTER_ADDR `ddp-train-0.ddp-train` after a
`namePrefix: team-` renamed the Job to `team-ddp-train`; MASTER_ADDR `ddp-train-0.ddp-train.default.svc.cluster.local`
where the environment declares `clusterDomain: corp.example`.
Passes: Job `ddp-train`, subdomain `ddp-train`, MASTER_ADDR `ddp-train-0.ddp-train`; a PyTorchJob, whose
operator points MASTER_ADDR at its own `<job>-master-0` Service; MASTER_ADDR naming a Service of the manifests that
selects pod 0 alone (`batch.kubernetes.io/job-completion-index: "0"`), which forwards to it.

A host that may name a Service the manifests do not hold (one word, or one followed by the namespace, `.svc` ...;
not a pod's name under its subdomain) is a warning phrased as that Service selecting pod 0 alone, an error where the
environment declares its manifests self-contained.

With an etcd rendezvous (`etcd`, `etcd-v2`) the endpoint is the etcd server instead: where its Service is in the
manifests it must declare the endpoint's port; a Service that is not in them is applied elsewhere (REF001 lists it,
an error only in an environment that declares itself self-contained).
"""
from __future__ import annotations

import functools
import re
from typing import Iterator

from .kit import Context, problem
from ..command.torchrun import split_endpoint
from ..kube.objects import ERROR, WARNING, Problem
from ..kube.values import mapping, selects
from ..model.topology import Topology

ID = "TOPO003"
NAME = "endpoint-is-pod-0"
_LOCAL = {"", "localhost", "127.0.0.1", "::1", "0.0.0.0"}
DEFAULT_DOMAIN = "cluster.local"


@functools.lru_cache(maxsize=256)
def pod0_pattern(base: str, namespace: str, domain: str | None = None) -> re.Pattern[str]:
    """Pod 0's name `base`, optionally followed by `.<namespace>` (any label where the pod's namespace is not
    written), `.svc`, `.svc.<domain>` (cluster.local where the environment declares none), and a final dot. Made
    once per name, namespace and domain (a pattern is not changed once compiled)."""
    ns = re.escape(namespace) if namespace else r"[a-z0-9-]+"
    return re.compile(rf"^{re.escape(base)}(\.{ns}(\.svc(\.{re.escape(domain or DEFAULT_DOMAIN)})?)?)?\.?$")


def _other_domain(host: str, domain: str | None) -> str:
    """Why a host that names pod 0 under cluster.local does not resolve where the environment declares another
    domain ('' where that is not the case)."""
    if domain and domain != DEFAULT_DOMAIN and host.rstrip(".").endswith(f".svc.{DEFAULT_DOMAIN}"):
        return f" (the environment's cluster domain is {domain}: names under {DEFAULT_DOMAIN} do not resolve there)"
    return ""


def check(ctx: Context) -> Iterator[Problem]:
    domain = ctx.env.cluster_domain if ctx.env else None
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
            yield from _etcd(ctx, t, host, where, domain)
            continue
        pod = t.first.pod
        expected = t.workload.launcher.address(t.workload, pod)
        if host == pod.hostname and t.backend == "static":
            # Node rank 0 hosts the store and may name itself by its own short hostname (`$(hostname)`, which
            # resolves through the pod's /etc/hosts); only the other pods need a name that reaches it.
            yield from _others(t, expected, domain)
            continue
        if not host and t.first.inv is None:
            # env:// with no MASTER_ADDR: the script the container starts may set it before it initialises (from
            # LWS_LEADER_ADDRESS, a hostfile...), which the manifests do not show. One from a ConfigMap or Secret
            # applied elsewhere is not known here (REF001 lists it): nothing to say.
            if "MASTER_ADDR" in t.first.pod.env:
                continue
            yield problem(ID, t, where, f"MASTER_ADDR is not in the env of this {t.pods}-pod job, which gets "
                          "WORLD_SIZE: if the script initialises torch.distributed from env:// without setting it "
                          "itself, init fails (MASTER_ADDR expected, but not set)",
                          f"set MASTER_ADDR to pod 0: {expected}", severity=WARNING)
        elif host in _LOCAL:
            yield problem(ID, t, where, f"rendezvous endpoint is '{host or 'unset'}' on a {t.pods}-pod job; "
                          f"the other pods cannot reach it", f"point it at pod 0: {expected}")
        elif not pod0_pattern(expected, pod.namespace, domain).match(host):
            service = _service_of(ctx, t, host, domain)
            if service == "pod 0":
                continue  # a Service in the manifests that selects pod 0 alone forwards to it
            if service:  # a Service name the manifests do not hold
                own = ctx.env is not None and ctx.env.self_contained
                yield problem(ID, t, where, f"rendezvous endpoint host is '{host}', not pod 0 '{expected}'" +
                              (f", and no Service '{service}' is in these manifests, which {ctx.env.name} declares "
                               "self-contained: the other pods cannot reach the store" if own and ctx.env else
                               f": unless a Service '{service}' applied elsewhere selects pod 0 alone, the other pods "
                               "cannot reach the store"), f"set it to {expected}", severity=ERROR if own else WARNING)
                continue
            svc = t.first.pod.subdomain
            why = (" (a headless Service name resolves to every pod, not to pod 0)" if host == svc else
                   _other_domain(host, domain))
            yield problem(ID, t, where, f"rendezvous endpoint host is '{host}', expected pod 0 '{expected}'{why}",
                          f"set it to {expected}")


def _service_of(ctx: Context, t: Topology, host: str, domain: str | None) -> str:
    """What a host that is not pod 0's name may be: "pod 0" where it names a Service of the manifests that selects
    pod 0 and none of the others (the pods read here: one per template, and the last), the Service's name where it
    may name one the manifests do not hold, "" where it names pods (under their subdomain) or another Service."""
    name, _, rest = host.rstrip(".").partition(".")
    ns, sub = t.first.pod.namespace, t.first.pod.subdomain
    if not name or (rest and (rest.split(".")[0] == sub or not pod0_pattern("x", ns, domain).match("x." + rest))):
        return ""
    svc = ctx.bundle.services.get((ns, name))
    if svc is None:
        return "" if name == sub or any(name == v.pod.hostname for v in t.views) else name
    selector = {"matchLabels": mapping(mapping(svc.obj.get("spec")).get("selector"))}
    if selector["matchLabels"] and selects(selector, t.first.pod.labels) and \
            not any(selects(selector, v.pod.labels) for v in t.views[1:]):
        return "pod 0"
    return ""


def _others(t: Topology, expected: str, domain: str | None) -> Iterator[Problem]:
    """The pods other than pod 0 (one per template, and the last) where pod 0 names itself by its short hostname."""
    for v in t.views[1:]:
        value = v.endpoint.value or ""
        if not value or "$" in value:
            continue  # unset or not resolved here (TOPO012)
        host, _ = split_endpoint(value)
        if not pod0_pattern(expected, v.pod.namespace, domain).match(host):
            where = v.endpoint.field or (v.inv.field if v.inv else v.pod.container_field)
            own = " (its own hostname)" if host == v.pod.hostname else _other_domain(host, domain)
            yield problem(ID, t, where, f"pod {v.pod.name}'s rendezvous endpoint host is '{host}'{own}, expected "
                          f"pod 0 '{expected}' (pod 0 may name itself by its hostname; the others need its DNS name)",
                          f"set it to {expected}")


def _etcd(ctx: Context, t: Topology, host: str, where: str, domain: str | None) -> Iterator[Problem]:
    ns = t.first.pod.namespace
    name = host.split(".")[0]
    rest = host[len(name):].lstrip(".")
    svc = ctx.bundle.services.get((ns, name))
    if svc is not None and _other_domain(host, domain) and rest.split(".")[0] == (ns or rest.split(".")[0]):
        yield problem(ID, t, where, f"etcd endpoint host is '{host}'{_other_domain(host, domain)}",
                      f"set it to {name}.{rest.split('.')[0]}.svc.{domain}, or {name}")
        return
    allowed = {"", ns, f"{ns}.svc", f"{ns}.svc.{domain or DEFAULT_DOMAIN}"} if ns else None
    if svc is None or (allowed is not None and rest not in allowed):
        return  # applied elsewhere: REF001
    ports = {str(p.get(k)) for p in (svc.obj.get("spec") or {}).get("ports") or [] for k in ("port", "targetPort")}
    if t.endpoint_port and t.endpoint_port not in ports:
        yield problem(ID, t, where, f"etcd Service '{name}' declares ports {sorted(ports)}, the endpoint uses "
                      f"{t.endpoint_port}", f"use one of the Service's ports, e.g. {name}:2379")
