"""A PodMonitor selects the training pods, on a port the training container declares, where the trainer listens.

prometheus-operator turns a PodMonitor into scrape targets: one per pod its `selector` matches (in its own
namespace unless `namespaceSelector` says otherwise) and per `podMetricsEndpoints[].port` that names a declared
container port (`portNumber` matches the number). A PodMonitor that matches no training pod, or only ports the
training container does not declare, scrapes nothing, silently; a container port that is not the trainer's
`METRICS_PORT` (local rank 0 listens there, local rank r on METRICS_PORT + r), or no METRICS_PORT at all, is a
target that is always down. None of it stops training: warnings.

Fails: a PodMonitor selecting `app.kubernetes.io/component: exporter`; an endpoint `port: prom` on a container
that declares `metrics`; `metrics: 9400` declared while the ddp-env ConfigMap sets METRICS_PORT=9500 or sets none.
Passes: components/monitoring with an environment that sets METRICS_PORT=9400 (overlays/64x8-h100/*).
"""
from __future__ import annotations

from ..model import WARNING
from ..rulekit import distinct_pods, obj_problem
from .sec006_network_policy import selects

ID = "MON001"
NAME = "podmonitor-scrapes-trainer"
SEVERITY = WARNING
KINDS = ("PodMonitor",)
METRICS_PORT = "METRICS_PORT"


def _in_namespaces(spec, monitor_ns, pod_ns) -> bool:
    sel = spec.get("namespaceSelector") or {}
    if sel.get("any") is True:
        return True
    names = sel.get("matchNames")
    return pod_ns in names if names else pod_ns == monitor_ns


def check(ctx):
    monitors = [m for m in ctx.bundle.manifests if m.kind == "PodMonitor"]
    for m in monitors:
        spec = m.obj.get("spec") if isinstance(m.obj.get("spec"), dict) else {}
        selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
        endpoints = [e for e in spec.get("podMetricsEndpoints") or [] if isinstance(e, dict)]
        selected = [(t, pod) for t in ctx.topologies for pod in distinct_pods(t)
                    if _in_namespaces(spec, m.namespace, t.workload.namespace) and selects(selector, pod.labels)]
        if not selected:
            if ctx.topologies:
                yield obj_problem(ID, m, "spec.selector", f"selects none of the training pods ("
                                  f"{', '.join(sorted({t.manifest.ref for t in ctx.topologies}))}): nothing is scraped",
                                  "match a label of the training pods' template, e.g. "
                                  "app.kubernetes.io/component: trainer", severity=WARNING)
            continue
        for t, pod in selected:
            ports = [p for p in pod.container.get("ports") or [] if isinstance(p, dict)]
            by_name = {str(p.get("name")): p.get("containerPort") for p in ports if p.get("name")}
            numbers = {p.get("containerPort") for p in ports}
            hit = [(i, e, by_name.get(str(e.get("port"))) if e.get("port") is not None else e.get("portNumber"))
                   for i, e in enumerate(endpoints)]
            hit = [(i, e, n) for i, e, n in hit if n is not None and (e.get("port") is not None or n in numbers)]
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
