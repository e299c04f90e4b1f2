"""`make plan`: what each overlay's controllers will create, from the launcher modules. A table of topologies (text),
every pod with its hostname, labels and the env each container sees (`PODS=1`), or one JSON document (`FORMAT=json`):
the view a user reads to answer "what will pod 3 get?", and what the conformance fixtures assert on."""
from __future__ import annotations

import json
from typing import Any, Callable

from .engine import Unit
from ..launchers import ContainerEnv, Pod, Workload
from ..kube.objects import ERROR, Problem
from .report import problem_json, recovery_json
from ..render.files import rel
from ..model.topology import Topology
from ..rules.kit import located
from ..command.torchrun import Setting

# At most this many pods of one workload are listed (a 100,000-pod Job is described, not enumerated).
MAX_PODS = 1024

PLAN_COLUMNS = ("workload", "launcher", "pods", "nnodes", "proc/pod", "world", "GPU/pod", "GPUs", "rank source",
                "rendezvous", "DNS")


def _nnodes(t: Topology) -> str:
    if not t.torchrun:
        return "-"
    if t.nnodes_min is not None:
        return f"{t.nnodes_min}" if t.nnodes_min == t.nnodes_max else f"{t.nnodes_min}:{t.nnodes_max}"
    nnodes: Setting = t.first.nnodes
    return nnodes.value


def _dns(t: Topology) -> str:
    return f"Service {t.service.name}" if t.service else ("controller" if t.workload.managed_dns else "none")


def plan_rows(unit: Unit) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for t in unit.topologies:
        nproc = str(t.nproc) if t.nproc is not None else t.first.nproc.value
        world = str(t.world_size) if t.world_size is not None else "?"
        total = str(t.gpus * t.pods) if t.gpus else "0"
        rdzv = f"{t.backend} {t.endpoint_host}:{t.endpoint_port}" if t.endpoint_host else t.backend
        rows.append((f"{t.manifest.kind}/{t.manifest.shown_name}", t.launcher_id, str(t.pods), _nnodes(t), nproc, world,
                     str(t.gpus), total, t.rank_source, rdzv, _dns(t)))
    return rows


def table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt: Callable[[tuple[str, ...]], str] = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([fmt(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(fmt, rows)])


def _container(c: ContainerEnv) -> dict[str, Any]:
    out: dict[str, Any] = {"name": c.name, "env": dict(c.env)}
    if c.added:
        out["added_by_controller"] = True
    if c.container.get("resources"):
        out["resources"] = c.container["resources"]
    if c.container.get("ports"):
        out["ports"] = c.container["ports"]
    return out


def pod_doc(p: Pod) -> dict[str, Any]:
    return {"name": p.name, "hostname": p.hostname, "subdomain": p.subdomain, "labels": dict(p.labels),
            "annotations": dict(p.annotations), "initContainers": [_container(c) for c in p.init_containers],
            "containers": [_container(c) for c in p.containers]}


def topology_doc(t: Topology) -> dict[str, Any]:
    inv = t.first_view.inv
    return {"pods": t.pods, "torchrun": t.torchrun,
            # The program that starts the world (torchrun, accelerate launch, deepspeed, a --dist-url script) and
            # whether torch's elastic agent runs the workers (torchrun, accelerate): `torchrun` says a launcher was
            # found.
            "launch": inv.launcher if inv is not None else None, "elastic_agent": t.agent,
            "nnodes": _nnodes(t) if t.torchrun else t.first.nnodes.value,
            "nproc_per_node": str(t.nproc) if t.nproc is not None else t.first.nproc.value,
            "world_size": t.world_size, "gpus_per_pod": t.gpus, "rank_source": t.rank_source,
            "rendezvous": {"backend": t.backend,
                           "endpoint": f"{t.endpoint_host}:{t.endpoint_port}" if t.endpoint_host else None},
            "dns": _dns(t)}


def refusals(u: Unit) -> dict[str, list[Problem]]:
    """The pod templates the API server refuses as the input shows them (SEC010, not suppressed), by the object
    they are on: the controller tries, and none of those pods is created; or the workload (or its runtime) itself
    refused (ADM001: `object_refused`), or never admitted by Kueue (RES010: `never_admitted`), so no pod of it is, or
    not while its queue is held (RES010: `held`)."""
    out: dict[str, list[Problem]] = {}
    for p in u.problems:
        if p.extra.get("pods_refused") and p.suppressed is None and p.obj:
            out.setdefault(p.obj, []).append(p)
    return out


def _refused(w: Workload, found: dict[str, list[Problem]]) -> list[Problem]:
    return [p for m in (w.manifest, w.runtime) if m is not None for p in found.get(m.ref, [])]


def _admitted(w: Workload, refused: list[Problem]) -> int:
    """The pods of `w` whose template the API server does not refuse (each group is one template)."""
    if any(p.extra.get("object_refused") or p.extra.get("never_admitted") or p.extra.get("held") for p in refused):
        return 0
    gone = {(p.obj, p.field) for p in refused}
    count = 0
    for g, pod in zip([g for g in w.groups if isinstance(g.count, int) and g.count > 0], w.first_pods()):
        m, field = located(w, pod.spec_field)
        count += 0 if (m.ref, field) in gone else g.count
    return count


def workload_doc(w: Workload, t: Topology | None, refused: list[Problem] | None = None) -> dict[str, Any]:
    elsewhere = w.managed_by is not None  # its pods are never created here: none listed
    n = 0 if elsewhere else w.pods  # the training world; `pods` also lists auxiliary pods (a TrainJob's initializers)
    not_created = w.launcher.not_created(w)
    out: dict[str, Any] = {"object": f"{w.manifest.kind}/{w.manifest.shown_name}", "namespace": w.manifest.namespace or None,
                           "launcher": w.launcher_id, "topology": topology_doc(t) if t else None,
                           "pod_count": n, "pods": [] if elsewhere else [pod_doc(p) for p in w.every_pod(MAX_PODS)],
                           "services": [] if elsewhere else w.launcher.services(w),
                           "training_env": dict(w.pod(0).env) if n > 0 else {},
                           # The pods the controller here creates now, and why none where it creates none.
                           "pods_now": 0 if not_created else _admitted(w, refused) if refused else w.all_pods,
                           "pods_not_created": not_created}
    if not elsewhere and w.all_pods > MAX_PODS:
        out["pods_truncated"] = f"the first {MAX_PODS} of {w.all_pods} pods"
    if w.suspended:
        out["suspended"] = True  # the controller creates these pods only once the workload is resumed
    if w.queued is not None:
        out["queued"] = w.queued  # the LocalQueue whose admission it waits for (the environment declares Kueue)
        gated = w.launcher.gated(w)
        if gated:
            out["pods_gated"] = gated
    if elsewhere:
        out["managed_by"] = w.managed_by
    if refused:
        out["pods_refused"] = [{"object": p.obj, "field": p.field, "why": p.message} for p in refused]
    notes = t.notes if t is not None else w.notes  # the workload's, and what its topology adds
    if notes:
        out["notes"] = list(notes)
    return out


def unit_doc(u: Unit) -> dict[str, Any]:
    by_obj = {id(t.workload): t for t in u.topologies}
    survives = {id(t.workload): recovery_json(t, s) for t, s in u.recovery}
    found = refusals(u)
    docs = []
    for w in u.workloads:
        doc = workload_doc(w, by_obj.get(id(w)), _refused(w, found))
        if id(w) in survives:
            doc["recovery"] = survives[id(w)]
        docs.append(doc)
    return {"path": rel(u.source), "workloads": docs,
            "problems": [problem_json(p, u) for p in u.problems]}


def to_json(units: list[Unit]) -> str:
    return json.dumps({"overlays": [unit_doc(u) for u in units]}, indent=2, sort_keys=False)


def pods_text(u: Unit) -> str:
    """Every pod of every workload: name, hostname, labels, annotations and each container's env."""
    lines: list[str] = []
    for w in u.workloads:
        why = w.launcher.not_created(w)
        if w.managed_by is not None:
            lines.append(f"{w.manifest.kind}/{w.manifest.shown_name} ({w.launcher_id}): no pods here: {why}")
            continue
        lines.append(f"{w.manifest.kind}/{w.manifest.shown_name} ({w.launcher_id}): {w.all_pods} pods"
                     + (f" (none now: {why})" if why else ""))
        for i, p in enumerate(w.every_pod(MAX_PODS)):
            fqdn = f"{p.hostname}.{p.subdomain}" if p.subdomain else p.hostname
            lines.append(f"  pod {i}: {p.name}  hostname {fqdn}")
            for title, table_ in (("labels", p.labels), ("annotations", p.annotations)):
                if table_:
                    lines.append(f"    {title}: " + ", ".join(f"{k}={v}" for k, v in sorted(table_.items())))
            for c in p.init_containers + p.containers:
                kind = "init container" if c.init else "container"
                lines.append(f"    {kind} {c.name}" + (" (added by the controller)" if c.added else "") + ":")
                for k, v in c.env.items():
                    origin = " (controller)" if k in c.injected else ""
                    lines.append(f"      {k}={'<known only in the cluster>' if v is None else v}{origin}")
        if w.all_pods > MAX_PODS:
            lines.append(f"  ... {w.all_pods - MAX_PODS} more pods")
    return "\n".join(lines)


def text(units: list[Unit], pods: bool = False) -> tuple[str, int]:
    """The text plan and the number of inputs that could not be planned."""
    out: list[str] = []
    bad = 0
    for u in units:
        out.append(f"### {rel(u.source)}")
        if u.failed_input:
            bad += 1
            out += [f"cannot plan: {p.message}" for p in u.problems]
        else:
            idle = [w for w in u.workloads if w.launcher.not_created(w)]
            if not u.topologies:
                out.append("no training workload" + (" whose pods are created here" if any(
                    w.managed_by for w in idle) else ""))
            else:
                out.append(table(plan_rows(u), PLAN_COLUMNS))
                errors = [p for p in u.problems if p.severity == ERROR]
                if errors:
                    out.append(f"{len(errors)} topology errors: run `make validate` for details")
                out += [f"note: {n}" for t in u.topologies for n in t.notes]
                out += [f"recovery: {t.manifest.ref} {s.words()}: {s.why}" for t, s in u.recovery]
            out += [f"note: {w.manifest.kind}/{w.manifest.shown_name}: 0 pods now: {w.launcher.not_created(w)}"
                    for w in idle]
            # A workload that is no torchrun world (an MPI TrainJob's mpirun, an MPIJob) still says what its
            # controller gives it (its hostfile), with its pod count.
            worlds = {id(t.workload) for t in u.topologies}
            out += [f"note: {w.manifest.kind}/{w.manifest.shown_name} ({w.all_pods} pods): {n}" for w in u.workloads
                    if id(w) not in worlds and w not in idle and w.managed_by is None for n in w.notes]
            out += [f"note: {w.manifest.kind}/{w.manifest.shown_name}: {gated}"
                    for w in u.workloads if (gated := w.launcher.gated(w))]
            found = refusals(u)
            out += [f"note: {w.manifest.kind}/{w.manifest.shown_name}: " + (f"{p.obj} is not created, nor any pod of "
                    "it: " if p.extra.get("object_refused") else f"no pod of {p.obj} is created: "
                    if p.extra.get("never_admitted") else f"no pod of {p.obj} is created while its queue is held: "
                    if p.extra.get("held") else f"the pods of {p.obj} {p.field} are not created: ")
                    + f"{p.message} ({p.rule})" for w in u.workloads if w.managed_by is None
                    for p in _refused(w, found)]
            if pods and u.workloads:
                out.append(pods_text(u))
        out.append("")
    return "\n".join(out) + "\n", bad
