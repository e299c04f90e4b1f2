"""A PodMonitor selects the training pods, on a port the training container declares, where the trainer listens.

prometheus-operator turns a PodMonitor into scrape targets: one per pod its `selector` matches (in its own
namespace unless `namespaceSelector` says otherwise) and per `podMetricsEndpoints[].port` that names a declared
container port (`portNumber` matches the number). A PodMonitor that matches no training pod, or only ports the
training container does not declare, scrapes nothing, silently; a container port that is not the trainer's
`METRICS_PORT` (local rank 0 listens there, local rank r on METRICS_PORT + r), or no METRICS_PORT at all, is a
target that is always down. With more than one process per pod (`nproc`), local rank r serves its own step time
on METRICS_PORT + r: a port of a local rank that is not declared, or that no endpoint names, is a rank (perhaps
the straggler) nobody sees. None of it stops training: warnings.

Fails: a PodMonitor selecting `app.kubernetes.io/component: exporter`; an endpoint `port: prom` on a container
that declares `metrics`; `metrics: 9400` declared while the ddp-env ConfigMap sets METRICS_PORT=9500 or sets none;
2 processes per pod with only `metrics: 9400` declared (local rank 1's 9401 missing).
Passes: components/monitoring with an environment that sets METRICS_PORT=9400 and declares one port per local rank
(overlays/64x8-h100/*: metrics, metrics-1 ... metrics-7 = 9400-9407).
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

from ..kube.values import selects
from ..kube.objects import WARNING, Manifest, Problem
from ..model.topology import Topology
from .kit import Context, obj_problem

ID = "MON001"
NAME = "podmonitor-scrapes-trainer"
SEVERITY = WARNING
KINDS = ("PodMonitor",)
METRICS_PORT = "METRICS_PORT"


def _in_namespaces(spec: dict[str, Any], monitor_ns: str, pod_ns: str) -> bool:
    sel = spec.get("namespaceSelector") or {}
    if sel.get("any") is True:
        return True
    names = sel.get("matchNames")
    return pod_ns in names if names else pod_ns == monitor_ns


def check(ctx: Context) -> Iterator[Problem]:
    for m in ctx.of_kind("PodMonitor"):
        spec: Any = m.obj.get("spec") if isinstance(m.obj.get("spec"), dict) else {}
        selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
        endpoints = [e for e in spec.get("podMetricsEndpoints") or [] if isinstance(e, dict)]
        selected = [(t, pod) for t in ctx.topologies for pod in ctx.distinct_pods(t)
                    if _in_namespaces(spec, m.namespace, t.workload.namespace) and selects(selector, pod.labels)]
        if not selected:
            if ctx.topologies:
                yield obj_problem(ID, m, "spec.selector", f"selects none of the training pods ("
                                  f"{', '.join(sorted({t.manifest.ref for t in ctx.topologies}))}): nothing is scraped",
                                  "match a label of the training pods' template, e.g. "
                                  "app.kubernetes.io/component: trainer", severity=WARNING)
            continue
        for t, pod in selected:
            by_name, numbers = {}, set()
            for p in pod.container.get("ports") or []:
                if isinstance(p, dict):
                    number = p.get("containerPort")
                    numbers.add(number)
                    if p.get("name"):
                        by_name[str(p.get("name"))] = number
            hit = []  # (index, endpoint, the declared port number it scrapes)
            for i, e in enumerate(endpoints):
                port = e.get("port")
                n = by_name.get(str(port)) if port is not None else e.get("portNumber")
                if n is not None and (port is not None or n in numbers):
                    hit.append((i, e, n))
            where = f"{t.manifest.ref} container '{pod.container.get('name')}'"
            if not hit:
                asked = ", ".join(str(e.get("port", e.get("portNumber"))) for e in endpoints) or "no endpoint"
                yield obj_problem(ID, m, "spec.podMetricsEndpoints", f"scrapes port(s) {asked}; {where} declares "
                                  f"{', '.join(sorted(by_name)) or 'no named port'}: nothing is scraped",
                                  "declare containerPort 9400 named metrics on the training container, or name "
                                  "that port here", severity=WARNING)
                continue
            raw = pod.env.get(METRICS_PORT)
            first = min(n for _, _, n in hit if isinstance(n, int)) if any(isinstance(n, int) for _, _, n in hit) \
                else None
            if not raw:
                yield obj_problem(ID, m, f"spec.podMetricsEndpoints[{hit[0][0]}]", f"{where} has no METRICS_PORT: "
                                  "the trainer serves no metrics and every target is down",
                                  f"set METRICS_PORT={first or 9400} in the pods' env (the environment's ddp-env)",
                                  severity=WARNING)
            elif first is not None and str(raw).strip() != str(first):
                yield obj_problem(ID, m, f"spec.podMetricsEndpoints[{hit[0][0]}]", f"scrapes {where} on port "
                                  f"{first}, the trainer listens on METRICS_PORT={raw}: the target is down",
                                  f"set METRICS_PORT={first}, or declare the port the trainer uses",
                                  severity=WARNING)
            elif first is not None and (t.nproc or 1) > 1:
                yield from _every_rank(m, t, where, first, {n for _, _, n in hit}, numbers)


def _every_rank(m: Manifest, t: Topology, where: str, first: int, scraped: set[Any],
                declared: set[Any]) -> Iterator[Problem]:
    """Local rank r serves on METRICS_PORT + r: with P processes per pod, ports first+1 .. first+P-1 must be
    declared on the container and named by an endpoint, or those ranks' step times (a straggler) never show."""
    assert t.nproc is not None, "check() calls this only with more than one process per pod"
    wanted = [first + r for r in range(1, t.nproc)]
    undeclared = [n for n in wanted if n not in declared]
    unscraped = [n for n in wanted if n in declared and n not in scraped]
    if undeclared:
        yield obj_problem(ID, m, "spec.podMetricsEndpoints", f"{where} runs {t.nproc} processes per pod (local rank r "
                          f"serves METRICS_PORT+r) but declares no containerPort {_ports(undeclared)}: those ranks "
                          "are not scraped", f"declare containerPorts {_ports(undeclared)} named metrics-1, "
                          "metrics-2, ... on the training container (components/64x8-h100/patches/metrics-ports.yaml "
                          "shows how)", severity=WARNING)
    if unscraped:
        yield obj_problem(ID, m, "spec.podMetricsEndpoints", f"{where} runs {t.nproc} processes per pod but no "
                          f"endpoint names port(s) {_ports(unscraped)}: those ranks are not scraped",
                          "add an endpoint per local rank's port (port: metrics-1, ...)", severity=WARNING)


def _ports(numbers: Iterable[int]) -> str:
    numbers = sorted(numbers)
    if len(numbers) > 2 and numbers[-1] - numbers[0] == len(numbers) - 1:
        return f"{numbers[0]}-{numbers[-1]}"
    return ", ".join(map(str, numbers))
