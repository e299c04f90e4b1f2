"""A dynamic rendezvous (c10d, etcd) has an id of its own for each run.

torchrun's `--rdzv-id` (`PET_RDZV_ID`, PyTorchJob `elasticPolicy.rdzvId`) names the rendezvous. Left at torchrun's
default `none`, every job on a shared etcd joins the same rendezvous, and a re-run finds the finished state of the
last one. The first run works (Kubeflow's own elastic ImageNet example sets no id), so it is a warning phrased as
that condition: with an etcd from elsewhere, if another job or a later run uses it with the default id; with an
etcd that ships in the same manifests (it serves this job alone), a re-run against its state; with c10d (its store
dies with the job) restarts and logs cannot be told apart. A constant written into the command line gives every run of the manifest the same id: a
warning with etcd. Take it from the run id (`$(RUN_ID)`, which also names the trainer's checkpoint folder) or from
the Job's uid label. The static backend ignores the id.

Two workloads of the same manifests (one overlay, one file) that meet at the same rendezvous endpoint with the same
id join one rendezvous: the first to arrive fills it with pods of both, and neither forms its own world. That is an
error whatever the backend. (Workloads synced from different overlays are not compared: each Argo CD Application
deploys one overlay.)

Fails: `--rdzv-backend=etcd-v2` with no `--rdzv-id` (warning); a c10d StatefulSet without an id (warning); two
StatefulSets on one etcd with the same `$(RUN_ID)` (error).
Passes: `--rdzv-backend=c10d --rdzv-id=$(RUN_ID)`; static rendezvous; two workloads on one etcd with their own ids.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, WARNING, Problem
from ..model.topology import Topology
from .kit import Context, problem

ID = "RDZV002"
NAME = "rdzv-id-per-run"
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    yield from unset_or_constant(ctx)
    yield from shared(ctx)


def dynamic(t: Topology) -> bool:
    return bool(t.torchrun and t.backend != "static" and not t.backend.startswith("c10d (standalone)"))


def unset_or_constant(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if not dynamic(t):
            continue
        assert t.first.inv is not None, "dynamic(t) holds only under t.torchrun: pod 0 has an invocation"
        if t.pods <= 1 and (t.nnodes_max or 1) <= 1:
            continue
        s = t.first.rdzv_id
        etcd = t.backend.startswith("etcd")
        where = s.field or t.workload.launcher.setting_field(t.workload, "rdzv_id") or t.first.inv.field
        if s.value in ("", "none"):
            # An etcd that ships in the same manifests serves this job alone (a policy choice: a warning); one
            # from elsewhere is shared, and every job on it with the default id joins one rendezvous.
            host = (t.endpoint_host or "").split(".")[0]
            dedicated = etcd and any(name == host for (_, name) in ctx.bundle.services)
            why = (": if another job or a later run uses this etcd with the default id, it joins the same "
                   "rendezvous (or finds this one's finished state)" if etcd and not dedicated
                   else f": a re-run against the same etcd state (Service '{host}' in these manifests) joins the "
                        "finished rendezvous" if etcd else ": restarts and re-runs cannot be told apart")
            yield problem(ID, t, where, f"rendezvous id is unset (torchrun's default 'none') with the {t.backend} "
                          f"backend{why}", "set --rdzv-id=$(RUN_ID) (an id per run)", severity=WARNING)
        elif etcd and s.origin == "flag" and not s.var and "$" not in s.value:
            yield problem(ID, t, where, f"rendezvous id is the constant '{s.value}': every run of this manifest "
                          "joins the same etcd rendezvous", "take it from the run id, e.g. --rdzv-id=$(RUN_ID)",
                          severity=WARNING)


def shared(ctx: Context) -> Iterator[Problem]:
    """Workloads meeting at one endpoint under one id. A name without `.svc` is looked up in the pod's namespace
    (its DNS search path), so it names the same host only for workloads of one namespace."""
    seen: dict[tuple[str, str, str, str | None, str], Topology] = {}  # key -> the first Topology there
    for t in ctx.topologies:
        if not dynamic(t) or not t.endpoint_host:
            continue
        assert t.first.inv is not None, "dynamic(t) holds only under t.torchrun: pod 0 has an invocation"
        host = t.endpoint_host.rstrip(".")
        scope = "" if ".svc" in host or host.replace(".", "").isdigit() else t.manifest.namespace
        key = (t.backend.split()[0], host, scope, t.endpoint_port, t.first.rdzv_id.value)
        first = seen.setdefault(key, t)
        if first is t:
            continue
        s = t.first.rdzv_id
        where = s.field or t.workload.launcher.setting_field(t.workload, "rdzv_id") or t.first.inv.field
        yield problem(ID, t, where, f"joins the same rendezvous as {first.manifest.ref} ({key[0]} at "
                      f"{t.endpoint_host}:{t.endpoint_port}, id '{s.value}'): the pods of both fill one world",
                      "give each workload its own --rdzv-id (or its own run id)", severity=ERROR)
