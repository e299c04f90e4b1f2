"""How many pod losses a torchrun world survives before its controller gives up, counted as the controller counts.

A lost pod (its container killed, or the pod deleted: a node lost, an eviction) ends more than itself. Where every
pod's torchrun ends with it (a static rendezvous, or torchrun without `--max-restarts`: the others' workers lose a
peer, and their torchrun exits 1), every pod of the world fails or restarts; on a dynamic rendezvous (c10d, etcd)
whose torchrun restarts its workers, the others stay up and re-form the world in a new round, unless the lost pod
hosts the c10d store (pod 0: its torchrun holds it), which ends every torchrun again. What each pod's end costs is
the launcher's own decision (`Launcher.after_exit`, which the simulator carries out too), counted with
`RestartCount.record`; this module replays lost pods through it until the controller fails the workload, so the
figure follows the same code as a fault run: a PyTorchJob of 4 pods with `backoffLimit: 3` fails at its first lost
pod (4 container restarts reach 3; training-operator v1.9.4 pkg/core/job.go lines 113-132 sum the restartCounts of
the running pods and fail at `>=`), one with `backoffLimit: 5` survives one.

Read by `make validate` (one line per workload, and RESTART007 against the environment's `podLosses`), `make plan`
and the simulator's fault report (what the rules predict for the faults a run injected)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..kube.values import as_int
from ..launchers import Bundle
from ..launchers.lifecycle import FAIL, RECREATE_ALL, SUCCEEDED, WAIT, Decision, PodExit, RestartCount
from .topology import Topology, launcher_field

# The container killed in place (exit 137), the pod deleted (an eviction: DisruptionTarget), its node lost, one of its
# workers crashed (its torchrun exits 1, unless it restarts its workers itself).
KILLED, DELETED, NODE_LOST, WORKER = "killed", "deleted", "node-lost", "worker"
KILLED_EXIT, DELETED_EXIT, PEER_LOST_EXIT = 137, 143, 1  # torchrun exits 1 when its workers lost a peer
DYNAMIC = ("c10d", "etcd", "etcd-v2")
# Losses replayed before a world that never fails is said to survive any number of them.
MAX_LOSSES = 8
# Pod ends replayed at most, whatever the world's size (memory and time stay bounded on a 100,000-pod Job): a
# 512-pod world's MAX_LOSSES losses fit.
MAX_ENDS = 5_000


class TooLarge(Exception):
    """The replay would pass MAX_ENDS pod ends: the losses replayed so far (`args[0]`)."""


@dataclass(frozen=True)
class Loss:
    index: int   # the lost pod's world index
    kind: str    # KILLED, DELETED, NODE_LOST or WORKER


@dataclass
class Survival:
    """The pod losses a world survives: `losses` (None: any number, up to MAX_LOSSES replayed), and why; `blocker`:
    what keeps the world from re-forming after its pods restart, where something does."""

    losses: int | None
    why: str
    modelled: bool = True
    blocker: "Blocker | None" = None

    def words(self) -> str:
        if not self.modelled:
            return "pod losses survived: not worked out"
        if self.losses is None:
            return "survives any number of pod losses"
        return f"survives {self.losses} pod loss{'es' if self.losses != 1 else ''}"


def store_host(t: Topology) -> int | None:
    """The pod whose torchrun holds the rendezvous store (pod 0 of a c10d world whose endpoint names it)."""
    if not t.torchrun or not t.backend.startswith("c10d") or not t.endpoint_host or t.pods < 1:
        return None
    pod = t.workload.pod(0)
    return 0 if t.endpoint_host.split(".")[0] in (pod.hostname, pod.name) else None


def torchrun_restarts(t: Topology) -> int:
    """torchrun's `--max-restarts` on a dynamic rendezvous (0 elsewhere: a static world cannot take a restarted
    node back, every torchrun ends)."""
    if not t.torchrun or t.first.inv is None or not t.backend.startswith(DYNAMIC):
        return 0
    v = t.first
    assert v.inv is not None  # tested above
    return as_int(v.inv.setting("max_restarts", v.pod.env, v.pod.env_fields).value, 0) or 0


_STOPS = (FAIL, WAIT, SUCCEEDED)  # the decisions that end a replay


class _Replay:
    """The world's pods as the controller sees them while losses are replayed: its counts, and each torchrun's
    restarts left."""

    def __init__(self, t: Topology, bundle: Bundle):
        self.t, self.bundle, self.w = t, bundle, t.workload
        self.count = RestartCount()
        self.budget = torchrun_restarts(t)
        self.left = {i: self.budget for i in range(t.pods)}
        self.host = store_host(t)
        self.ends = 0
        self.waited: Decision | None = None

    def ending(self, loss: Loss) -> list[int]:
        """The pods whose container ends with this loss: the lost one first."""
        others = [i for i in range(self.t.pods) if i != loss.index]
        if loss.kind == WORKER and self.left[loss.index] > 0:  # its own torchrun restarts the workers
            self.left[loss.index] -= 1
            out = []
        elif not self.budget or loss.index == self.host:
            return [loss.index] + others
        else:
            out = [loss.index]
        for i in others:  # each torchrun left restarts its workers into a new round; one with none left ends
            if self.left[i] > 0:
                self.left[i] -= 1
            else:
                out.append(i)
        return out

    def lose(self, loss: Loss) -> Decision | None:
        """Replay one loss; the decision that failed the workload (or left it waiting), else None."""
        lost_code = {DELETED: DELETED_EXIT, WORKER: PEER_LOST_EXIT}.get(loss.kind, KILLED_EXIT)
        after_exit, w, bundle, count = self.w.launcher.after_exit, self.w, self.bundle, self.count
        stops, left, budget = _STOPS, self.left, self.budget  # read once: thousands of pod ends per replay
        for i in self.ending(loss):
            self.ends += 1
            if i == loss.index:
                ended = PodExit(i, lost_code, deleted=loss.kind == DELETED, node_lost=loss.kind == NODE_LOST)
            else:
                ended = PodExit(i, PEER_LOST_EXIT)
            d = after_exit(w, bundle, ended, count)
            if d.action in stops:
                return d
            if d.awaits_node:  # the world waits until the node is deleted or the pod force-deleted
                self.waited = self.waited or d
            count.record(d, i)
            left[i] = budget  # a new container, a new torchrun
            if d.action == RECREATE_ALL:  # every pod recreated: the rest of this loss ends with them
                self.left = {j: self.budget for j in range(self.t.pods)}
                break
        return None


def replay(t: Topology, bundle: Bundle, losses: list[Loss]) -> tuple[int, Decision | None, Decision | None]:
    """How many of `losses`, in order, the workload survives, the decision that ended it (None: it survived them
    all), and the first decision that waited for a lost node to be deleted. TooLarge past MAX_ENDS pod ends."""
    r = _Replay(t, bundle)
    for k, loss in enumerate(losses):
        if r.ends + t.pods > MAX_ENDS:
            raise TooLarge(k)
        d = r.lose(loss)
        if d is not None:
            return k, d, r.waited
    return len(losses), None, r.waited


def survival(t: Topology, bundle: Bundle) -> Survival:
    """The losses the world survives whichever pod goes (pod 0, the last pod) and however (its container killed,
    the pod deleted, its node lost), with the reason of the worst case."""
    w = t.workload
    if type(w.launcher).after_exit is _BASE_AFTER_EXIT:
        return Survival(None, f"what {w.launcher.title or w.launcher.id} does after a pod fails is not modelled",
                        modelled=False)
    if t.pods < 1:
        return Survival(None, "no pods", modelled=False)
    worst: tuple[int, str] | None = None
    waits = ""
    for index in sorted({0, t.pods - 1}):
        for kind in (KILLED, DELETED, NODE_LOST):
            try:
                n, d, waited = replay(t, bundle, [Loss(index, kind)] * MAX_LOSSES)
            except TooLarge:
                return Survival(None, f"not worked out: {t.pods} pods, and the replay stops at {MAX_ENDS} pod ends",
                                modelled=False)
            if waited is not None and not waits:
                waits = f"{waited.controller}: {waited.why}"
            if d is None:
                continue
            why = f"{_what(t, bundle, index, kind)}; " + (f"at loss {n + 1}, " if n else "") + \
                f"{d.controller}: {d.why}" + ("" if d.action == FAIL else " (nothing brings the pod back)")
            if worst is None or n < worst[0]:
                worst = (n, why)
    if worst is None:
        return Survival(None, f"{_ends_note(t)}; the controller restarted the world after each of {MAX_LOSSES} "
                        "losses replayed" + (f"; a pod on a lost node: {waits}" if waits else ""))
    return Survival(worst[0], worst[1])


def _what(t: Topology, bundle: Bundle, index: int, kind: str) -> str:
    how = {KILLED: "killed", DELETED: "deleted (an eviction)", NODE_LOST: "lost with its node"}[kind]
    host = " (the c10d store's host)" if index == store_host(t) else ""
    n = len(_Replay(t, bundle).ending(Loss(index, kind)))
    ends = "only that pod ends" if n == 1 else (f"every pod's torchrun ends ({n} pods)" if n == t.pods else
                                                  f"{n} pods end")
    return f"pod {index}{host} {how}: {ends}"


def _ends_note(t: Topology) -> str:
    budget = torchrun_restarts(t)
    if not budget:
        return f"each lost pod ends every pod's torchrun ({t.pods} pods)"
    host = store_host(t)
    return (f"torchrun restarts its workers (--max-restarts {budget}): a lost pod ends that pod only"
            + (", pod 0 (the c10d store's host) every pod" if host is not None else ""))


def predicts(t: Topology, bundle: Bundle, losses: list[Loss]) -> tuple[bool, Decision | None, str]:
    """Whether the controller carries the world through these losses (a fault run's), the first decision that
    waited for a lost node, and why not."""
    try:
        n, d, waited = replay(t, bundle, losses)
    except TooLarge as cut:
        return True, None, f"not worked out past loss {cut.args[0]} ({t.pods} pods)"
    if d is None:
        return True, waited, ""
    return False, waited, f"at loss {n + 1}: {d.controller}: {d.why}"


def _base_after_exit() -> object:
    from ..launchers.base import Launcher
    return Launcher.after_exit


_BASE_AFTER_EXIT = _base_after_exit()


# ---------------------------------------------------------------- what keeps a restarted world from re-forming


def restarts_and_max_restarts(ctx: Any, topo: Topology) -> tuple[list[str], Any]:
    """What restarts the workload's pods (the controller's and kubelet's reasons, empty if nothing does) and
    torchrun's `--max-restarts` setting on its first pod (value, origin, field; None without torchrun): what the
    restart rules weigh, worked out once per topology."""
    cache = ctx.memo.setdefault("restarts", {})
    found: tuple[list[str], Any] | None = cache.get(id(topo))
    if found is None:
        restarts = topo.workload.launcher.restarts(topo.workload, ctx.bundle)
        first = topo.first
        mr = first.inv.setting("max_restarts", first.pod.env, first.pod.env_fields) if first.inv is not None else None
        found = cache[id(topo)] = (restarts, mr)
    return found


@dataclass(frozen=True)
class Blocker:
    """The controller restarts the pods, but the world does not re-form: the rule that reports it, the field, why,
    and the fix (RESTART005 and RESTART006 say these as they are)."""

    rule: str
    field: str | None
    message: str
    hint: str


def etcd_closes(ctx: Any, t: Topology) -> Blocker | None:
    """RESTART005: on torchrun's etcd rendezvous with no torchrun restart, a peer's failure makes the surviving
    torchrun close the rendezvous in etcd, and every restarted pod ends with RendezvousClosedError."""
    if not t.torchrun or not t.backend.startswith("etcd"):
        return None
    restarts, mr = restarts_and_max_restarts(ctx, t)
    if not restarts or (mr.value.isdigit() and int(mr.value) > 0):
        return None
    v = t.first
    shown = f"--max-restarts {mr.value}" + (" (torchrun's default)" if mr.origin == "default" else "")
    return Blocker("RESTART005", mr.field or (v.inv.field if v.inv is not None else None),
                   f"{restarts[0]} but torchrun has {shown} with the {t.backend} rendezvous: on a peer's failure the "
                   f"other pods' torchrun closes rendezvous '{v.rdzv_id.value}' in etcd, and every restarted pod ends "
                   "with RendezvousClosedError", "use --rdzv-backend=c10d (its state ends with the pods, a restart "
                   "starts clean), or set --max-restarts above 0 so that torchrun restarts its workers into a new "
                   "round instead of closing the rendezvous")


SHARED_STORE_VAR = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
DYNAMIC_BACKENDS = ("c10d", "etcd-v2")


def shared_store(ctx: Any, t: Topology) -> Blocker | None:
    """RESTART006: on a dynamic rendezvous whose torchrun restarts its workers, a pod started again waits for the
    store address the surviving rank 0 publishes in its first round only, unless every pod sets
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1."""
    if not t.torchrun or t.backend not in DYNAMIC_BACKENDS or not (t.nnodes_max or 0) > 1:
        return None
    restarts, mr = restarts_and_max_restarts(ctx, t)
    if not restarts or not (mr.value.isdigit() and int(mr.value) > 0):
        return None
    if all(str(pod.env.get(SHARED_STORE_VAR, "")).strip() == "1" for pod in ctx.distinct_pods(t)):
        return None
    v = t.first
    written = mr.field or (v.inv.field if v.inv is not None else None)
    return Blocker("RESTART006", launcher_field(t, written, "max_restarts"),
                   f"the pods restart ({', '.join(restarts)}) and torchrun restarts its workers (--max-restarts "
                   f"{mr.value}) on the {t.backend} rendezvous with the store shared ({SHARED_STORE_VAR} unset): a pod "
                   "started again waits for the store address that the surviving rank 0 publishes in its first "
                   "round only, and the round never completes",
                   f"set {SHARED_STORE_VAR}=1 in the training container's env (every round then publishes a fresh "
                   "address)")


BLOCKERS = (etcd_closes, shared_store)


def in_context(ctx: Any, t: Topology) -> Survival:
    """How many pod losses the topology's world survives in its overlay, worked out once per topology (the engine
    for validate, plan and simulate; RESTART007 compares it with the environment's podLosses): the replay above,
    then none where the world does not re-form once its pods restart (a Blocker, whether or not an annotation
    suppresses the rule that reports it: the pods restart, the world does not come back)."""
    found: dict[int, Survival] = ctx.memo.setdefault("survival", {})
    if id(t) not in found:
        s = _replayed(ctx, t)
        blocker = next((b for check in BLOCKERS if (b := check(ctx, t)) is not None), None)
        if blocker is not None:
            s = Survival(0, f"the controller restarts the pods, but {blocker.rule}: {blocker.message}",
                         blocker=blocker) if s.modelled and s.losses != 0 else \
                Survival(s.losses, s.why, s.modelled, blocker)
        found[id(t)] = s
    return found[id(t)]


# survival() by the input it was worked out on (the engine's digest of it, Context.inputs) and the topology's place
# among that input's: a generated tree, or environments that share their launchers' overlays, hold the same world
# many times, and a 64-pod static world that survives every loss replays 3,072 pod ends. A Survival is not changed
# once made (in_context makes another to add a Blocker).
_REPLAYED: dict[tuple[bytes, int], Survival] = {}


def _replayed(ctx: Any, t: Topology) -> Survival:
    place = next((i for i, x in enumerate(ctx.topologies) if x is t), None)
    if ctx.inputs is None or place is None:
        return survival(t, ctx.bundle)
    key = (ctx.inputs, place)
    s = _REPLAYED.get(key)
    if s is None:
        if len(_REPLAYED) > 4096:  # bounded on any input
            _REPLAYED.clear()
        s = _REPLAYED[key] = survival(t, ctx.bundle)
    return s
