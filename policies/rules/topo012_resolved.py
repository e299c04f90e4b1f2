"""Every topology value can be worked out from the manifests.

A `$(VAR)` that no env entry defines stays literally `$(VAR)` in the container's arguments (the kubelet leaves it),
so torchrun receives `--nnodes=$(NNODES)` and fails; a workload with no pods trains nothing. A check that cannot
work out a value says so here rather than passing silently.

`accelerate launch --config_file PATH` takes what its command line leaves out from that file: read where a
ConfigMap or Secret in the manifests is mounted at PATH; a file from the image cannot be read here, and where the
command line does not give the number of machines, the processes and the main process itself, an info line says
the world was not checked (no error: the file may well be right).

A launcher other than torchrun whose own default this cannot know is not guessed at: on several pods, a script
given the ImageNet example's `--dist-url` without `--world-size`, `--rank` or a `tcp://` address (or, with
`env://`, without WORLD_SIZE, RANK, MASTER_ADDR in the env), `deepspeed --no_ssh` without its node count, GPUs,
node rank or master address, `accelerate launch` without `--config_file` and without its number of machines or main
process (its default config file may be in the image), and `deepspeed` without `--no_ssh` (it starts every node
over ssh from a hostfile the manifests do not show) each get one info line. An MPIJob whose launcher runs mpirun,
and a TrainJob on an `mlPolicy.mpi` runtime whose launcher does, get one info line saying what mpirun starts and what
was not checked (TOPO011 checks its ranks and hosts): its ranks are mpirun's slots over the controller's hostfile,
not one env:// process per pod, so MASTER_ADDR or WORLD_SIZE in the env does not make its pods a torchrun world.
Where mpirun starts torchrun, the line says each rank runs its own torchrun agent, which reads its own flags (TOPO011
checks --nnodes, --node-rank and --standalone against the ranks), and that the rendezvous endpoint and the processes
per node were not checked.
mpirun started by the first pod of a world no MPI controller lays out (an Indexed Job, a StatefulSet, a JobSet)
whose command does not state its hosts (no `-H`, a `--hostfile` no ConfigMap or Secret in the manifests is mounted
at, hosts known only when it runs such as `${MPI_HOST}`) gets one info line: its hosts, slots and rank 0's host
were not checked (TOPO011 checks them where the command states them). So does a mounted hostfile whose lines give no
`slots=`: Open MPI gives such a host its node's processor cores, so -np was not checked against them.

A shell script (`sh -c`, read by policies/command/shell.py) may compute a value when it runs: `$(...)`, `read`, what a
loop, a conditional or a sourced file sets. Such a value is unknown here, never an error: one info line per workload
names the settings and the checks they hide. A `$VAR` that neither the container's env nor the script sets may come
from the image's environment: a warning, phrased as the condition under which torchrun fails. A script that cannot
be read at all is said in an info line too.

A kind modelled only as its controller's admission (KubeRay's RayCluster, RayJob, RayService and RayCronJob: the pods
it starts and the Ray Train world, which Ray sets up in Python rather than torchrun, are not) gets one info line per
object saying so.

A workload whose `managedBy` names another controller (MultiKueue, an external one) gets no pods from the controller
here: the checks that need its pods are skipped, and an info line says so.

A `$(VAR)` in a container whose `envFrom` names a ConfigMap or Secret the manifests do not hold may be defined there:
a warning phrased as that condition, an error where the environment declares its manifests self-contained. So is
torchrun given no flag for its nodes, processes, rendezvous endpoint or node rank there: it reads `PET_NNODES`,
`PET_RDZV_ENDPOINT`, ... (run.py's env defaults), which that envFrom may set, so its own defaults (1 node, 127.0.0.1,
node rank 0) are not claimed: one line names the settings and the checks they hide (info on a single pod).

Fails: `--nnodes=$(NNODES)` with no `NNODES` in the env; a Job with `completions: 0`.
Passes: every `$(VAR)` defined in the container's env; `--nnodes=$(cat /etc/nnodes)` in a script (info).
"""
from __future__ import annotations

from typing import Any, Iterator

from ..launchers import leader_mpirun_unchecked
from ..launchers.mpirun import UNDER_MPIRUN
from ..kube.objects import ERROR, INFO, WARNING, Problem
from ..kube.values import listing, mapping
from ..model.topology import ENV_ELSEWHERE, Undetermined, UnreadConfig, UnreadScript, Unstated
from .kit import Context, find_object, problem
from ..command.shellwords import RUN_TIME, UNSET

ID = "TOPO012"
NAME = "topology-resolved"


def check(ctx: Context) -> Iterator[Problem]:
    for w in ctx.unresolved:
        if not w.unresolved:  # (TOPO011 reports why the controller's pods cannot be worked out)
            m = w.manifest
            yield Problem(ID, f"{w.launcher_id} creates no pods", m.source, m.ref, "spec",
                          "set the replica count to the number of nodes")
    u: Undetermined | Unstated
    for u in ctx.undetermined:
        if u.unlinked:  # (TOPO001 reports that its pods form no world together)
            continue
        m = u.workload.manifest
        other = u.workload.launcher.unmodelled_world(u.workload)
        if other is not None:
            fix = ("give each agent --nnodes <ranks> and a c10d --rdzv-endpoint on the first host" if UNDER_MPIRUN in
                   other else "start the script with torchrun (or a tcp:// --dist-url) to have its world checked")
            said = other if UNDER_MPIRUN in other else \
                f"{other}: the world's shape was not checked as torchrun's (TOPO001-TOPO010)"
            yield Problem(ID, said, m.source, m.ref, "spec", fix, severity=INFO)
            continue
        yield Problem(ID, "the container starts no torchrun (or accelerate) and gets no MASTER_ADDR or WORLD_SIZE: "
                      "whether the script forms a distributed world cannot be told from the manifest, so the "
                      "topology checks did not run", m.source, m.ref, "spec", "start the script with torchrun if it "
                      "calls torch.distributed", severity=INFO)
    for w in ctx.workloads:
        unchecked = leader_mpirun_unchecked(w)
        if unchecked is not None:
            m = w.manifest
            yield Problem(ID, unchecked[0], m.source, m.ref, w.pod(0).container_field, unchecked[1], severity=INFO)
    unread: UnreadConfig | UnreadScript
    for unread in ctx.unread:
        m = unread.workload.manifest
        yield Problem(ID, f"accelerate launch reads its settings from {unread.path}, which no ConfigMap or Secret in "
                      "the manifests is mounted at: the number of machines, the processes and the main process were "
                      "not checked", m.source, m.ref, unread.field or "spec", "mount the config from a ConfigMap, or "
                      "give --num_machines, --num_processes and --main_process_ip on the command line", severity=INFO)
    for u in ctx.unstated:
        m = u.workload.manifest
        if u.why:
            yield Problem(ID, f"{u.launcher} {u.why}: the world size, the ranks and the address it forms were not "
                          "checked", m.source, m.ref, u.field or "spec", "run it on every pod with --no_ssh, "
                          "--num_nodes, --num_gpus, --node_rank and --master_addr to have the world checked",
                          severity=INFO)
            continue
        yield Problem(ID, f"{u.launcher} is not given {' or '.join(u.missing)} (neither written nor in the "
                      "env): the world size, the ranks and the address it forms were not checked", m.source, m.ref,
                      u.field or "spec", f"give {', '.join(u.missing)} (written, or in the env) to have "
                      "the world checked", severity=INFO)
    for m, launcher in ctx.launched:
        left_out = launcher.unchecked(m) if isinstance(m.obj, dict) else None
        if left_out is not None:
            yield Problem(ID, left_out, m.source, m.ref, "spec", "see docs/validation.md for what is checked of it",
                          severity=INFO)
    for w in ctx.elsewhere:
        m = w.manifest
        yield Problem(ID, f"{w.launcher.not_created(w)}: the checks of its pods and torchrun world (TOPO001-TOPO010, "
                      "ELASTIC, RDZV, RES, NCCL) were skipped", m.source, m.ref,
                      ".".join(w.launcher.managed_by_field or ("spec",)), "validate the workload where its pods are "
                      "created, or leave managedBy out to have them checked here", severity=INFO)
    for unread in ctx.scripts:
        m = unread.workload.manifest
        yield Problem(ID, f"the container's shell script could not be read ({unread.why}): whether it starts torchrun "
                      "and the world it forms were not checked", m.source, m.ref, unread.field or "spec",
                      "write the command so that it parses as a shell script", severity=INFO)
    for t in ctx.topologies:
        v = t.first
        at_run_time: list[tuple[str, str]] = []
        elsewhere: list[tuple[str, str]] = []
        for label, s in (("nnodes", v.nnodes), ("processes per node", v.nproc), ("rendezvous endpoint", v.endpoint),
                         ("node rank", v.node_rank)):
            if "$" not in s.value:
                continue
            if s.unknown_kind == RUN_TIME:
                at_run_time.append((label, s.unknown or ""))
            elif s.unknown_kind == ENV_ELSEWHERE:
                elsewhere.append((label, s.unknown or ""))
            elif s.unknown_kind == UNSET:
                yield problem(ID, t, s.field, f"{label} is '{s.value}': {s.unknown}; unless the image sets it, "
                              f"torchrun gets an empty {label} and fails", "set the variable in the container's env "
                              "or the script, or write the value", severity=WARNING)
            elif away := _env_from_elsewhere(ctx, v.pod.container):
                yield problem(ID, t, s.field, f"{label} is '{s.value}': a variable the container env does not "
                              f"define, unless {away} (not in these manifests) does: else the kubelet leaves it as "
                              "written and torchrun fails", "define the variable in the container's env, or write "
                              "the value", severity=ERROR if ctx.env is not None and ctx.env.self_contained else WARNING)
            else:
                yield problem(ID, t, s.field, f"{label} is '{s.value}': a variable the container env does not define",
                              "define the variable in the container's env, or write the value")
        if elsewhere:
            pet = [why.split()[2].rstrip(",") for _, why in elsewhere]  # "torchrun reads PET_X, which ..."
            away = elsewhere[0][1].split(", which ", 1)[1]
            yield problem(ID, t, v.inv.field if v.inv else v.pod.container_field,
                          f"no flag gives {', '.join(label for label, _ in elsewhere)}: torchrun reads "
                          f"{', '.join(pet)}, which {away}"
                          + (f"; unless it does, torchrun takes its own defaults for them (1 node, a static "
                             f"rendezvous on 127.0.0.1, node rank 0) and no world forms over {t.pods} pods"
                             if t.pods > 1 else "") + " (" + ", ".join(sorted({c for label, _ in elsewhere
                                                                          for c in HIDES[label]}))
                          + " did not check them)", "write the flags, or validate with the ConfigMap or Secret that "
                          "sets them", severity=INFO if t.pods <= 1 else ERROR
                          if ctx.env is not None and ctx.env.self_contained else WARNING)
        if at_run_time:
            hidden = sorted({c for label, _ in at_run_time for c in HIDES[label]})
            said = "; ".join(f"{label}: {why}" for label, why in at_run_time)
            yield problem(ID, t, v.inv.field if v.inv else v.pod.container_field,
                          f"known only when the container runs ({said}): {', '.join(hidden)} did not check "
                          f"{'it' if len(at_run_time) == 1 else 'them'}",
                          "write the value, or set it in the container's env, to have it checked", severity=INFO)


def _env_from_elsewhere(ctx: Context, container: dict[str, Any]) -> str:
    """The container's envFrom sources the manifests do not hold ("ConfigMap a, Secret b"): any variable may come
    from them (the kubelet expands `$(VAR)` against envFrom's variables too)."""
    away = []
    for src in listing(container.get("envFrom")):
        kind = "ConfigMap" if "configMapRef" in mapping(src) else "Secret"
        name = str(mapping(mapping(src).get("configMapRef") or mapping(src).get("secretRef")).get("name"))
        if find_object(ctx, kind, name) is None:
            away.append(f"{kind} {name}")
    return ", ".join(away)


# The checks a setting known only at run time hides.
HIDES = {"nnodes": ("TOPO001", "ELASTIC001"), "processes per node": ("TOPO002", "TOPO008"),
         "rendezvous endpoint": ("TOPO003", "TOPO004", "TOPO006"), "node rank": ("TOPO009",)}
