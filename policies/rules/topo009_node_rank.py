"""Each pod gets its own node rank, equal to its index, when the rendezvous is static.

Static rendezvous (torchrun's default, and the PyTorchJob operator's) takes `--node-rank` as given: two pods with
rank 0 both try to host the store and the world never forms; a pod 0 whose rank is not 0 waits for a store nobody
hosts. The rank must come from something per pod: the completion index, the pod-index label, the operator.
c10d and etcd rendezvous assign ranks themselves and are exempt.

The same holds for `accelerate launch --machine_rank`, `deepspeed --no_ssh --node_rank` and the ImageNet example's
`--rank` (its node rank, global rank without `--multiprocessing-distributed`).

With c10d or etcd a given `--node-rank` must still be an integer: torchrun parses it before the rendezvous.

A script started without a launcher whose env has no RANK is a warning: env:// initialisation fails without it
unless the script passes a rank of its own, which the manifests do not show. A RANK written as one constant on every
pod stays an error.

Fails: `--node-rank=0` written into a Job's template; `RANK` from `metadata.name` (not a number).
Passes: `--node-rank=$(JOB_COMPLETION_INDEX)`; NODE_RANK from the `apps.kubernetes.io/pod-index` label.
"""
from __future__ import annotations

from typing import Iterator

from ..model.topology import PodView, Topology, view
from ..kube.objects import WARNING, Problem
from .kit import Context, problem

# Rank sources that give pod i the rank i by construction: then pod 0 and the first pod of every other pod
# template (PyTorchJob's Workers, each JobSet child Job) are enough to check.
PER_POD = ("completion index", "pod index label", "hostname ordinal")

ID = "TOPO009"
NAME = "node-rank-per-pod"


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if t.pods <= 1 or t.mpi_world_of_one:
            continue  # (TOPO001 reports an MPI world of one per pod)
        if t.torchrun and t.backend != "static":
            # c10d and etcd assign ranks, but torchrun still parses a given --node-rank as an integer.
            v = t.first
            assert v.inv is not None, "t.torchrun: pod 0 has an invocation (torchrun = first.inv is not None)"
            if v.node_rank.origin != "default" and "$" not in v.node_rank.value and not v.node_rank.value.isdigit():
                yield problem(ID, t, v.node_rank.field or v.inv.field, f"--node-rank is '{v.node_rank.value}' on "
                              f"pod 0: torchrun refuses a node rank that is not an integer (rank source: "
                              f"{t.rank_source})", "take the node rank from the pod-index label, or drop it")
            continue
        if not t.torchrun and not t.first.pod.env.get("MASTER_ADDR"):
            continue
        label = "RANK"
        if t.torchrun:
            assert t.first.inv is not None, "t.torchrun: pod 0 has an invocation (torchrun = first.inv is not None)"
            label = "--node-rank" if t.agent else t.first.inv.flag("node_rank")
        for v in _views_to_check(t):
            value = v.node_rank.value
            if "$" in value:
                break  # TOPO012
            where = v.node_rank.field or (v.inv.field if v.inv else v.pod.container_field)
            if not t.torchrun and v.node_rank.origin == "default":
                # No RANK: the script may pass its own rank (from JOB_COMPLETION_INDEX, say), which the manifests do
                # not show. One from a ConfigMap or Secret applied elsewhere is not known here (REF001 lists it).
                if "RANK" in v.pod.env:
                    break
                yield problem(ID, t, where, f"RANK is not in the env of this {t.pods}-pod job's pods: if the script "
                              "initialises torch.distributed from env:// without a rank of its own, init fails (RANK "
                              "expected, but not set)", "set RANK from the completion index or the pod-index label",
                              severity=WARNING)
                break
            if value != str(v.pod.index):
                yield problem(ID, t, where, f"pod {v.pod.index} ({v.pod.hostname}) gets {label} {value or '(none)'}, "
                              f"expected {v.pod.index} (rank source: {t.rank_source})",
                              "take the node rank from the completion index or the pod-index label")
                break


def _views_to_check(t: Topology) -> list[PodView]:
    source = t.rank_source
    if not (source.startswith(PER_POD) or source.startswith(f"{t.manifest.kind} controller")):
        return t.views  # pods 0, 1 and the last
    out = [t.first]
    for g in t.workload.world_groups[1:]:
        if g.count:
            out.append(view(t.workload.pod(g.offset)))
    return out
