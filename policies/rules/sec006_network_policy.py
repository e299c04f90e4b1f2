"""A NetworkPolicy lets the job's own pods reach each other (and DNS) and keeps everyone else out.

torchrun's rendezvous store (a TCPStore) and the gloo/NCCL connections accept anyone who can reach them, with no
authentication. On a shared cluster a NetworkPolicy should select the training pods, admit ingress only from the
job's own pods, and, where it restricts egress, still allow the job's own pods and DNS (port 53). Collectives
connect on ephemeral ports, so the rule for the job's own pods must not restrict ports. No policy, or one that also
admits other sources, is a warning; a policy that blocks the job's own traffic or DNS is an error: the rendezvous
cannot complete. A rule that admits others only to the trainer's metrics ports (a container port named `metrics`
and the 7 above it, where local ranks 1-7 serve; components/monitoring admits Prometheus so) is the scrape, not a
hole.

Fails: no NetworkPolicy selecting the pods (warning); ingress from the job's pods only on port 29500 (error:
collectives blocked); `policyTypes: [Egress]` without a rule for port 53 (error: MASTER_ADDR does not resolve).
Passes: a NetworkPolicy selecting `app.kubernetes.io/name: ddp-train`, ingress `from` that same selector with no
ports, egress to that selector and to port 53.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

from ..kube.values import selects
from ..kube.objects import ERROR, WARNING, Problem
from ..launchers import Pod
from .kit import Context, obj_problem, problem

ID = "SEC006"
NAME = "network-policy"
SEVERITY = WARNING


def selects_all(selector: Any, labels_list: Iterable[dict[str, str]]) -> bool:
    """The selector matches every one of the pods' label sets."""
    for labels in labels_list:
        if not selects(selector, labels):
            return False
    return True


def _types(spec: dict[str, Any]) -> set[str]:
    types = spec.get("policyTypes")
    if types:
        return set(types)
    return {"Ingress"} | ({"Egress"} if "egress" in spec else set())


def _own(peer: Any, labels_list: Iterable[dict[str, str]], namespace: str) -> bool:
    """The peer entry selects exactly the job's own pods: a non-empty podSelector matching all of them, in the
    policy's own namespace."""
    if peer.get("ipBlock"):
        return False
    ns = peer.get("namespaceSelector")
    if ns is not None and (ns.get("matchLabels") or {}) != {"kubernetes.io/metadata.name": namespace} or \
            (ns is not None and not namespace):
        return False
    sel = peer.get("podSelector")
    if not sel or not ((sel.get("matchLabels") or {}) or (sel.get("matchExpressions") or [])):
        return False
    return selects_all(sel, labels_list)


METRICS_PORT_NAME = "metrics"
LOCAL_RANKS = 8  # local rank r serves on the metrics port + r (trainer/telemetry.py)


def metrics_ports(pods: Iterable[Pod]) -> tuple[set[int], set[str]]:
    """The port numbers the trainer's metrics endpoints may use (each `metrics` container port and the 7 above),
    and the names of those container ports."""
    numbers: set[int] = set()
    names: set[str] = set()
    for pod in pods:
        for p in pod.container.get("ports") or []:
            if isinstance(p, dict):
                name = str(p.get("name", ""))
                if name.startswith(METRICS_PORT_NAME):
                    names.add(name)
                    port = p.get("containerPort")
                    if isinstance(port, int):
                        numbers.update(range(port, port + LOCAL_RANKS))
    return numbers, names


def _only_metrics(rule: Any, allowed: set[int], names: set[str]) -> bool:
    ports = rule.get("ports") or []
    if not ports or not allowed:
        return False
    for p in ports:
        port, end = p.get("port"), p.get("endPort")
        if isinstance(port, str):
            if port not in names:
                return False
        elif not isinstance(port, int) or not set(range(port, (end if isinstance(end, int) else port) + 1)) <= allowed:
            return False
    return True


def _ports_text(ports: Any) -> str:
    return ", ".join(str(p.get("port", "?")) for p in ports)


def check(ctx: Context) -> Iterator[Problem]:
    workloads = [t for t in ctx.topologies if t.pods > 1 or (t.nnodes_max or 1) > 1]
    if not workloads:
        return
    policies = []
    for m in ctx.of_kind("NetworkPolicy"):
        spec = m.obj.get("spec") or {}
        policies.append((m, spec, _types(spec)))
    for t in workloads:
        pods = ctx.distinct_pods(t)
        labels_list = [p.labels for p in pods]
        scrape = None  # metrics_ports(pods), worked out for the first rule that admits others on some ports
        ns = t.workload.namespace
        selecting = [(m, spec, types) for m, spec, types in policies if m.namespace == ns and
                     selects_all(spec.get("podSelector") or {}, labels_list)]
        if not selecting:
            yield problem(ID, t, "metadata", f"no NetworkPolicy selects the pods of {t.manifest.ref}: any pod in the "
                          "cluster can reach the rendezvous store and the collectives, which have no authentication",
                          "add a NetworkPolicy: ingress only from the job's own pods, egress to them and to DNS",
                          severity=WARNING)
            continue
        # One pass over the ingress rules: does one admit the job's own pods on every port, which admit others?
        isolated, own_all_ports, own_some_ports, outside = False, False, None, []
        for m, spec, types in selecting:
            if "Ingress" not in types:
                continue
            isolated = True
            for i, r in enumerate(spec.get("ingress") or []):
                peers = r.get("from") or []
                own = not peers
                other = not peers
                for peer in peers:
                    if _own(peer, labels_list, ns):
                        own = True
                    else:
                        other = True
                if own:
                    if r.get("ports"):
                        own_some_ports = own_some_ports or (m, i, r)
                    else:
                        own_all_ports = True
                if other and r.get("ports") and scrape is None:
                    scrape = metrics_ports(pods)
                if other and not (scrape and _only_metrics(r, *scrape)):
                    outside.append((m, i, r))
        if isolated and not own_all_ports:
            if own_some_ports:
                m, i, r = own_some_ports
                yield obj_problem(ID, m, f"spec.ingress[{i}].ports", f"the job's own pods are admitted only on "
                                  f"ports {_ports_text(r['ports'])}: gloo and NCCL connect on ephemeral ports",
                                  "drop the ports from the rule that admits the job's own pods", severity=ERROR)
            else:
                yield obj_problem(ID, selecting[0][0], "spec.ingress", "NetworkPolicy admits no ingress from the "
                                  f"job's own pods: the rendezvous on {t.endpoint_port or 'the rendezvous port'} and "
                                  "the collectives are blocked",
                                  "admit ingress from a podSelector matching the training pods", severity=ERROR)
        for m, i, r in outside:
            yield obj_problem(ID, m, f"spec.ingress[{i}]", "admits ingress from outside the job "
                              f"({'any source' if not r.get('from') else 'other pods, namespaces or addresses'})",
                              "admit only a podSelector matching the job's own pods", severity=WARNING)
        # Egress, where restricted: the job's own pods on every port, and DNS.
        first_egress, own_ok, dns = None, False, False
        for m, spec, types in selecting:
            if "Egress" not in types:
                continue
            first_egress = first_egress or m
            for r in spec.get("egress") or []:
                ports = r.get("ports")
                peers = r.get("to") or []
                if ports:
                    dns = dns or any(str(p.get("port")) in ("53", "dns", "dns-tcp") for p in ports)
                    continue
                if not peers:
                    own_ok = dns = True
                    continue
                for peer in peers:
                    if _own(peer, labels_list, ns):
                        own_ok = True
                    else:
                        dns = True
        if first_egress is not None:
            if not own_ok:
                yield obj_problem(ID, first_egress, "spec.egress", "egress to the job's own pods is blocked (or "
                                  "limited to some ports): the rendezvous and collectives cannot connect",
                                  "allow egress to a podSelector matching the training pods, on all ports",
                                  severity=ERROR)
            if not dns:
                yield obj_problem(ID, first_egress, "spec.egress", "egress to DNS (port 53) is blocked: the "
                                  "rendezvous endpoint's name does not resolve",
                                  "allow egress on port 53 (UDP and TCP) to the cluster DNS", severity=ERROR)
