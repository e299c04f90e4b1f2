"""The headless Service declares the rendezvous port.

DNS does not need ports, but a Service whose ports differ from the rendezvous port is a sign the two were edited
apart, and NetworkPolicies and readers rely on the declared port. A Service that declares other ports but not the
rendezvous port is an error; one that declares no ports at all is a warning (DNS still works: GKE's Indexed Job
tutorial runs so).

Fails: rendezvous on 29500, Service ports `[29400]`.
Passes: rendezvous on 29500, Service port 29500 (or targetPort 29500).
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from ..model.topology import Topology
from .kit import Context, service_problem

ID = "TOPO006"
NAME = "service-exposes-port"
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if t.service is None or not t.endpoint_port or "$" in t.endpoint_port or t.backend.startswith("etcd"):
            continue  # an etcd rendezvous does not go through pod 0's Service (TOPO003 checks the etcd Service)
        ports = (t.service.obj.get("spec") or {}).get("ports") or []
        declared = {str(p.get(k)) for p in ports for k in ("port", "targetPort") if p.get(k) is not None}
        if not ports:
            yield _warn(t)
        elif t.endpoint_port not in declared:
            yield service_problem(ID, t, "spec.ports", f"Service '{t.service.name}' declares ports "
                                      f"{sorted(declared)}, rendezvous uses {t.endpoint_port}",
                                      f"declare port {t.endpoint_port}, or move the rendezvous to one of them")


def _warn(t: Topology) -> Problem:
    assert t.service is not None, "check() warns only of a topology whose Service it found"
    p = service_problem(ID, t, "spec.ports", f"Service '{t.service.name}' declares no ports; rendezvous uses "
                            f"{t.endpoint_port}", f"declare port {t.endpoint_port}")
    p.severity = WARNING
    return p
