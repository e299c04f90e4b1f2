"""A fault run (`make simulate FAULT=...`): the faults injected into the running pods when they are due (at the
trainer's step or epoch, which the pods' output says, or at a time), and after each pod that ends what its launcher
module says the kubelet and the controller do (Launcher.after_exit), until the world finishes, the controller fails
it, or it hangs; then the outcome, the steps the trainer's metrics.jsonl counts, and what the rules predicted."""
from __future__ import annotations

import re
import shutil
import signal
import time
from typing import Any, Callable

from ..report import engine
from ..kube.values import as_int
from ..launchers.lifecycle import (FAIL, RECREATE_ALL, RECREATE_POD, RESTART_CONTAINER, SUCCEEDED, WAIT, Decision,
                                   PodExit, RestartCount)
from ..model.topology import compute
from . import ask_trainer, faults as F
from .diagnose import clip, last_words
from .fault_prediction import prediction
from .host import nss_wrapper
from .pods import SimPod, generated_suffix
from .processes import container_pid, parent_of, pod_processes, send, state_of, stop, until_pending, wait_for
from .simulation import Simulation

# A pod restarted this many times after a fault that fails once more is in a crash loop (the kubelet's
# CrashLoopBackOff): the run ends there as hung.
CRASH_LOOP = 3
# For how long after a pause a rank that stops itself only then (later than _paused waits, on a loaded machine) is
# still continued, else it holds the world until the deadline; and how often it is looked for (a pod's processes are
# found by reading every process's environment, and a killed pod's restart may keep the world at that step a while).
LATE_PAUSE_S, LATE_CHECK_S = 60.0, 1.0
# How long the ranks stopped at a return fault's step wait for the pod to be back (beyond its back-off): its container
# started again and its torchrun in the rendezvous, which takes torch's import, seconds to tens on a loaded machine.
RETURN_START_S = 120.0


# What rank 0 prints of its progress: [TRAIN] ... step=N, [EPOCH] epoch=N/M step=N, [DDP] resume ... step=N.
_STEP = re.compile(r"^\[(?:TRAIN|EPOCH|DDP)\] .*?\bstep=(\d+)\b")
_EPOCH_END = re.compile(r"^\[EPOCH\] epoch=(\d+)/")


class FaultRun:
    """The faults of one simulation and what became of them. Made before the pods are planned: a step fault has the
    trainer report every step (LOG_INTERVAL=1 in the training pods' env)."""

    def __init__(self, sim: Simulation, faults: list[F.Fault]):
        self.sim = sim
        self.faults = faults
        self.step = 0
        self.epoch = 0
        self.decisions: list[str] = []
        self.outcome: tuple[str, str] | None = None
        # The workloads a pod's success ended (Decision.ends_job), by id: their controllers act on no pod of theirs.
        self.ended: dict[int, str] = {}
        self._timers: list[tuple[float, Any]] = []
        self._partitioned: set[int] = set()  # the pods a partition fault stopped (not continued after a pause)
        self._watch: tuple[int, float, float] | None = None  # late ranks continued: (pause step, until, next look)
        self._t0 = 0.0
        self._plan: tuple[tuple[int, int, int] | None] | None = None
        # The steps every rank of the repository's trainer stops after (PAUSE_AT_STEPS) until the faults due there
        # are in: a step fault lands between step N and N+1, not a few steps later.
        self.pauses = sorted({int(f.at or 0) for f in faults if f.when == "step"})
        if self.pauses:
            sim.layout.extra_env["LOG_INTERVAL"] = "1"  # the trainer reports every step: a step fault lands on it
            sim.layout.extra_env["PAUSE_AT_STEPS"] = ",".join(map(str, self.pauses))
        sim.on_line = self._on_line

    # --- before the run --------------------------------------------------------------------------------------

    def check(self) -> None:
        """Each fault names a training pod and a step inside the run (before any pod starts); print what is
        injected."""
        sim = self.sim
        trainers = self._trainers()
        if not trainers:
            raise F.FaultError("FAULT: nothing trains in these manifests: no pod to inject a fault into")
        F.resolve(self.faults, [(sp.name, sp.pod.hostname) for sp in trainers])
        for f in self.faults:
            late = f.at if f.when == "t" else f.seconds if f.action == F.DELAY else None
            if late is not None and late >= sim.deadline:
                raise F.FaultError(f"FAULT {f.text!r}: the run stops at its deadline, {sim.deadline:g} s after the "
                                   f"start: a fault {late:g} s after it would never fire (raise DEADLINE)")
        plan = self.planned()
        for f in self.faults:
            if plan is not None and f.when in ("step", "epoch"):
                per_epoch, epochs, total = plan
                # The trainer reports its last step (a fault there lands before the last epoch's checkpoint), and
                # ends after its last epoch (a fault after that one would find nothing running).
                if (f.at or 0) > (total if f.when == "step" else epochs - 1):
                    raise F.FaultError(f"FAULT {f.text!r}: the run ends at step {total} (epoch {epochs}, {per_epoch} "
                                       f"steps an epoch): a fault {f.trigger()} would never fire")
        print("simulate: faults: " + "; ".join(f"{f.text} ({f.action} pod {trainers[f.target].name} {f.trigger()})"
                                              for f in self.faults), file=sim.out)
        if plan is not None:
            print(f"simulate: the trainer runs {plan[2]} steps ({plan[1]} epochs of {plan[0]})", file=sim.out)
        if sim.layout.extra_env:
            print("simulate: added to each training pod's env for the faults: " +
                  " ".join(f"{k}={v}" for k, v in sim.layout.extra_env.items()) + " (the trainer reports every step, "
                  "and every rank stops after a fault's step until the fault is in)", file=sim.out)

    def planned(self) -> tuple[int, int, int] | None:
        """(steps per epoch, epochs, total steps) of the repository's trainer in these pods, where it can be known
        (asked of the trainer once)."""
        if self._plan is None:
            self._plan = (self._ask_plan(),)
        return self._plan[0]

    def _ask_plan(self) -> tuple[int, int, int] | None:
        sim = self.sim
        tops = compute(sim.bundle)[0]
        sp = next((p for p in sim.pods if p.training), None)
        if sp is None or not tops or not any(t.endswith("train.py") for t in sp.argv):
            return None
        script = next(i for i, t in enumerate(sp.argv) if t.endswith("train.py"))
        world = tops[0].world_size
        if not isinstance(world, int) or world < 1:
            return None
        return F.planned_steps(ask_trainer.settings(sp.argv[script + 1:], sp.env), world)

    # --- during the run --------------------------------------------------------------------------------------

    def _trainers(self) -> list[SimPod]:
        return [sp for sp in self.sim.pods if sp.training]

    def _later(self, at: float, action: Any) -> None:
        with self.sim.lock:
            self._timers.append((at, action))

    def _on_line(self, sp: SimPod, line: str) -> None:
        if sp.training:
            self._progress(sp, line)

    def _progress(self, sp: SimPod, line: str) -> None:
        """The trainer's step and epoch as rank 0 prints them; fires the faults they make due (from the pump
        thread, so that a fault lands at the step it names, not a poll later). After a step of PAUSE_AT_STEPS every
        rank has stopped itself: the faults go in while none trains on, then every rank continues."""
        m = _STEP.search(line)
        if m:
            self.step = max(self.step, int(m.group(1))) if not line.startswith("[DDP] resume") else int(m.group(1))
        e = _EPOCH_END.search(line)
        if e:
            self.epoch = int(e.group(1))
        pause = m is not None and line.startswith("[TRAIN]") and int(m.group(1)) in self.pauses
        if pause:
            self._paused(sp)
        try:
            for f in self.faults:
                if f.fired or f.when not in ("step", "epoch"):
                    continue
                if (f.when == "step" and m and int(m.group(1)) >= (f.at or 0)) or (
                        f.when == "epoch" and e and int(e.group(1)) >= (f.at or 0)):
                    self._inject(f)
        finally:
            if pause and m is not None:  # also where a wait of _paused gave up: a rank may stop later than it
                for other in self._trainers():
                    if id(other) not in self._partitioned:
                        for pid in pod_processes(other):
                            send(pid, signal.SIGCONT)
                self._watch = (int(m.group(1)), time.monotonic() + LATE_PAUSE_S, 0.0)

    def _continue_late(self) -> None:
        """Continues a rank that stopped itself at the pause step after the others were continued (they wait for it
        in the next step's all-reduce, not stopped). Every rank stopped is the next pause, which rank 0's pump,
        reading behind the trainer, may not have reached: nothing is continued (CI of 2026-11-30: the ranks stopped
        at a return's step were continued here). Once rank 0 reports a later step, no rank is left at this one."""
        if self._watch is None:
            return
        step, until, due = self._watch
        now = time.monotonic()
        if self.step != step or now > until:
            self._watch = None
            return
        if now < due:
            return
        self._watch = (step, until, now + LATE_CHECK_S)
        stopped, running = [], False
        for sp in self._trainers():
            if id(sp) not in self._partitioned:
                for pid in self._workers(sp):
                    state = state_of(pid)
                    if state in ("T", "t"):
                        stopped.append((sp, pid))
                    running = running or state not in ("T", "t", "Z", "X", "")
        for sp, pid in stopped if running else []:
            self.sim.say(f"[sim] pod {sp.name}: process {pid} stopped at step {step} after the others were "
                         "continued: continued")
            send(pid, signal.SIGCONT)

    def _workers(self, sp: SimPod) -> list[int]:
        """The pod's training processes (its torchrun's children; the process itself where no torchrun runs)."""
        proc = sp.proc
        if proc is None or proc.poll() is not None:
            return []
        container = container_pid(sp)  # below confine.py's processes where the pods are sandboxed
        if container is None:
            return []
        pids = pod_processes(sp)
        return [pid for pid in pids if parent_of(pid) == container] or [container]

    def _paused(self, printer: SimPod) -> None:
        """Waits until the ranks stopped themselves after this step (the repository's trainer under PAUSE_AT_STEPS):
        the printing pod's within a few seconds (else the trainer does not pause, and nothing is waited for), then
        every running training pod's (bounded: a rank that never gets there does not hold the run; _continue_late
        continues it once it does)."""
        def stopped(sp: SimPod) -> bool:
            workers = self._workers(sp)
            return not workers or all(state_of(pid) in ("T", "t") for pid in workers)

        if wait_for(lambda: bool(self._workers(printer)) and stopped(printer), 5.0,
                    gone=lambda: not self._workers(printer)):
            wait_for(lambda: all(stopped(p) for p in self._trainers() if id(p) not in self._partitioned), 30.0)

    def _inject(self, f: F.Fault) -> None:
        say = self.sim.say
        with self.sim.lock:
            if f.fired:
                return
            f.fired = True
        sp = self._trainers()[f.target]
        where = f"{f.trigger()}" + (f" (trainer at step {self.step})" if f.when != "step" else "")
        pids = pod_processes(sp)
        if f.action in (F.KILL, F.NODE_LOST):
            lost = f.action == F.NODE_LOST
            sp.fault_note, sp.node_lost = (f"lost with its node {where}" if lost else f"killed {where}"), lost
            say(f"[sim] fault {f.text}: SIGKILL to every process of pod {sp.name} ({len(pids)})"
                + (": its node is gone, no kubelet restarts it; the pod object stays until the Node object is deleted "
                   "or the pod force-deleted" if lost else ""))
            for pid in pids:
                send(pid, signal.SIGKILL)
        elif f.action == F.KILL_WORKER:
            container = container_pid(sp)
            workers = [pid for pid in pids if container is not None and parent_of(pid) == container]
            if not workers:
                say(f"[sim] fault {f.text}: pod {sp.name} has no worker process now: nothing killed")
                return
            sp.fault_note = f"lost a worker {where}"
            say(f"[sim] fault {f.text}: SIGKILL to worker process {workers[-1]} of pod {sp.name}")
            send(workers[-1], signal.SIGKILL)
        elif f.action == F.TERM:
            grace = float(as_int(sp.pod.spec.get("terminationGracePeriodSeconds"), 30) or 0)
            sp.fault_note, sp.deleting = f"deleted (SIGTERM, grace {grace:g} s) {where}", True
            say(f"[sim] fault {f.text}: pod {sp.name} deleted: SIGTERM to its container, SIGKILL in {grace:g} s "
                "(terminationGracePeriodSeconds)")
            if sp.proc is not None:
                send(sp.proc.pid, signal.SIGTERM)
                # torchrun forwards it to its paused workers from its monitor loop: the ranks continue once it has
                # reached them, so that the fault lands between step N and N+1 (a vote later on a loaded machine)
                if not until_pending(lambda: self._workers(sp), signal.SIGTERM, 15.0):
                    say(f"[sim] pod {sp.name}: SIGTERM had not reached every training process within 15 s")
            proc = sp.proc
            self._later(time.monotonic() + grace, lambda: self._kill_rest(sp, proc))
        elif f.action == F.PARTITION:
            say(f"[sim] fault {f.text}: pod {sp.name} unreachable for {f.seconds:g} s {where}: {F.PARTITION_MODEL}")
            self._partitioned.add(id(sp))
            for pid in pids:
                send(pid, signal.SIGSTOP)

            def resume() -> None:
                self._partitioned.discard(id(sp))
                for pid in pod_processes(sp):
                    send(pid, signal.SIGCONT)
                say(f"[sim] pod {sp.name} reachable again")
            self._later(time.monotonic() + (f.seconds or 0), resume)
        elif f.action == F.RETURN:
            with self.sim.lock:  # against _decide holding the pod at the same moment (f.fired is set by now)
                held, sp.held = sp.held, None
            say(f"[sim] fault {f.text}: pod {sp.name} may come back {where}"
                + ("" if held else " (nothing pending: it was not down)"))
            if held:
                delay, action = held
                old = sp.proc
                self._later(time.monotonic() + delay, action)
                if f.when == "step":  # every rank is stopped at this step (PAUSE_AT_STEPS) until the pod is back
                    self._back(sp, old, delay)

    def _back(self, sp: SimPod, old: Any, delay: float) -> None:
        """Waits, the ranks stopped at a return's step, until the pod is back: started again (after its back-off)
        and, running torchrun, in its rendezvous (`Rendezvous'ing worker group`); in an elastic world also until the
        torchruns that trained on without it have seen it and told their stopped workers to stop (SIGTERM pending),
        so that it is taken in at the next step. Otherwise torchrun's start on this machine decided whether the
        world took it back before its run ended (CI of 2026-11-30). Bounded; the run says where a wait gave up."""
        top = next((t for t in compute(self.sim.bundle)[0] if t.workload.manifest.ref == sp.workload.manifest.ref),
                    None)
        torchrun, within = top is not None and top.torchrun, delay + RETURN_START_S
        started: Callable[[], Any] = lambda: sp.proc if sp.proc is not old else None  # noqa: E731
        if not wait_for(lambda: started() is not None and (sp.rendezvous or not torchrun), within,
                        gone=lambda: started() is not None and started().poll() is not None):
            if started() is None or started().poll() is None:
                self.sim.say(f"[sim] pod {sp.name} was not back within {within:g} s of its return (its back-off "
                             f"{delay:g} s{', then its torchrun in the rendezvous' if torchrun else ''}): the ranks "
                             "continue without it")
            return
        if top is None or not (top.nnodes_min or 0) < (top.nnodes_max or 0):
            return  # a world of a fixed size: it re-forms with the pod, nothing trained on without it
        others = [p for p in self._trainers() if p is not sp and id(p) not in self._partitioned]
        taken = until_pending(lambda: [pid for p in others for pid in self._workers(p)], signal.SIGTERM, 15.0)
        self.sim.say(f"[sim] pod {sp.name} is back in the rendezvous; the torchruns that trained on without it "
                     + ("stop their workers to take it in" if taken else "had not stopped their workers within 15 s")
                     + ": the ranks continue")

    def _kill_rest(self, sp: SimPod, proc: Any) -> None:
        """The end of a deleted pod's grace period: SIGKILL to whatever of it still runs."""
        if proc is not None and sp.proc is proc:
            for pid in pod_processes(sp):
                send(pid, signal.SIGKILL)

    def run(self, start: float, trainers: list[SimPod]) -> tuple[bool, tuple[str, str] | None]:
        """Start the training pods (late where a delay fault says), inject the faults, and after each pod that ends
        do what its launcher module says the kubelet and the controller do, until the world finishes, the
        controller fails it, or the deadline comes (a world that hangs). Whether the deadline stopped it, and the
        outcome."""
        sim = self.sim
        self._t0 = time.monotonic()
        delayed = {f.target: f for f in self.faults if f.action == F.DELAY}
        for i, sp in enumerate(trainers):
            if i in delayed:
                f = delayed[i]
                f.fired = True
                sim.say(f"[sim] fault {f.text}: pod {sp.name} starts {f.seconds:g} s after the others")
                self._later(self._t0 + (f.seconds or 0), lambda sp=sp: sim.start(sp))
            else:
                sim.start(sp)
        for f in self.faults:
            if f.when == "t":
                self._later(self._t0 + (f.at or 0), lambda f=f: self._inject(f))
        counts: dict[int, RestartCount] = {}
        while True:
            now = time.monotonic()
            with sim.lock:
                due = [a for t, a in self._timers if t <= now]
                self._timers = [(t, a) for t, a in self._timers if t > now]
            for action in due:
                action()
            self._continue_late()
            for sp in trainers:
                if sp.proc is None or sp.exit_code is not None or sp.proc.poll() is None:
                    continue
                rc = sp.proc.returncode
                sp.exit_code = 128 - rc if rc < 0 else rc
                sp.finished_at = now - start
                if sp.stopping:
                    continue
                count = counts.setdefault(id(sp.workload), RestartCount())
                self._decide(sp, count, now)
                if self.outcome is not None:
                    return False, self.outcome
                if count.container_restarts.get(sp.pod.index, 0) + count.failed_pods.get(sp.pod.index, 0) > CRASH_LOOP:
                    # Started CRASH_LOOP times after the fault and failed each time: the kubelet's CrashLoopBackOff,
                    # which nothing ends on its own; the run says so now rather than at the deadline.
                    last = next(iter(last_words(sp.lines)), "")
                    self.outcome = ("hung", f"{sp.name} failed again after each of {CRASH_LOOP} restarts: a crash loop "
                                    f"(CrashLoopBackOff) that nothing ends{': ' + clip(last, 160) if last else ''}")
                    return False, self.outcome
            if all(sp.done or sp.idle for sp in trainers):
                idle = [sp.name for sp in trainers if sp.idle]
                self.outcome = ("finished", "every training pod completed" + (
                    f" ({', '.join(idle)}: the run complete, waiting for SIGTERM)" if idle else "") +
                    "".join(f"; {why}" for why in self.ended.values()))
                return False, self.outcome
            if now - start > sim.deadline:
                waiting = [sp.name for sp in trainers if not sp.done]
                if all(id(sp.workload) in self.ended for sp in trainers):  # succeeded: what still runs is left over
                    self.outcome = ("finished", "; ".join(self.ended.values()) + f" ({', '.join(waiting)} still "
                                    "running at the deadline: the workload's status no longer depends on them)")
                    return True, self.outcome
                self.outcome = ("hung", f"{', '.join(waiting)} had not completed at the deadline")
                return True, self.outcome
            time.sleep(0.1)

    def _decide(self, sp: SimPod, count: RestartCount, now: float) -> None:
        sim = self.sim
        w = sp.workload
        if id(w) in self.ended:  # its workload succeeded: no controller decision follows, whatever the exit
            sp.done = True
            if sp.exit_code:
                line = (f"pod {sp.name} exited {sp.exit_code} after {w.manifest.ref} succeeded: its controller "
                        "acts on it no more (the kubelet may restart its container; the workload stays succeeded)")
                self.decisions.append(line)
                sim.say(f"[sim] {line}")
            return
        ended = PodExit(sp.pod.index, sp.exit_code or 0, sp.deleting, sp.node_lost)
        d: Decision = w.launcher.after_exit(w, sim.bundle, ended, count)
        if d.action == SUCCEEDED:
            sp.done = True
            if d.ends_job is not None:
                self.ended[id(w)] = f"{w.manifest.ref}: {d.ends_job}"
                sim.say(f"[sim] pod {sp.name} completed -> {d.ends_job}")
            return
        cause = sp.fault_note or f"exited {sp.exit_code}"
        sp.fault_note, sp.deleting, sp.node_lost = None, False, False
        line = f"pod {sp.name} {cause} -> {d.controller}: {d.why}"
        self.decisions.append(f"{line} [{d.source}]" if d.source else line)
        sim.say(f"[sim] {line}" + (f"  ({d.source})" if d.source else ""))
        away = next((f for f in self.faults if f.action == F.RETURN and not f.fired and
                     self._trainers()[f.target] is sp), None)
        if ended.exit_code == 0 and d.action == RESTART_CONTAINER:
            sp.completions += 1
            if sp.completions > 1:
                self.outcome = ("restarts", f"{sp.name} completed, its controller started it again ({d.why}) and it "
                                "completed again: it restarts for ever, the kubelet's back-off growing to 300 s, until "
                                "the workload is scaled to 0 (the repository's trainer waits instead: AFTER_DONE=wait)")
                return
        if d.awaits_node and away is None:
            self.outcome = ("hung", f"{sp.name} stays on its lost node until the Node object is deleted or the pod "
                            "force-deleted (kubernetes/kubernetes#54368), which nothing here does: a return fault "
                            f"stands for it (e.g. return:{ended.index}@step=N)")
            return

        def after(delay: float, action: Any) -> None:
            with sim.lock:  # the return fault fires from the output pump's thread
                hold = away is not None and not away.fired
                if hold:  # its node is away: the decision waits for the return fault (then its back-off)
                    sp.held = (delay, action)
            if hold and away is not None:  # (hold: away is set)
                sim.say(f"[sim] pod {sp.name} stays away until {away.text} fires")
            else:
                self._later(now + delay, action)

        count.record(d, ended.index)
        if d.action == RESTART_CONTAINER:
            after(d.delay, lambda: self._restart(sp, new_pod=False))
        elif d.action == RECREATE_POD:
            after(d.delay, lambda: self._restart(sp, new_pod=True))
        elif d.action == RECREATE_ALL:
            group = [p for p in self._trainers() if p.workload is w]
            for p in group:
                if p is not sp and p.proc is not None and p.proc.poll() is None:
                    p.stopping = True
                    stop(p)
            for p in group:
                self._later(now + d.delay, lambda p=p: self._restart(p, new_pod=True))
        elif d.action == FAIL:
            self.outcome = ("failed", f"{d.controller}: {d.why}")
        elif d.action == WAIT:
            sp.done = False  # nothing brings it back: the world waits (the deadline says so)

    def _restart(self, sp: SimPod, new_pod: bool) -> None:
        """Start the pod's container again: in place (same pod, same volumes) or as a new pod (the controller's: a
        new generated name where the pod has one, fresh emptyDirs, the same claims)."""
        sim = self.sim
        for pid in pod_processes(sp):  # the container's cgroup is gone
            send(pid, signal.SIGKILL)
        token = sp.env.get("SOCKET_WRAPPER_DIR")
        old = sp.name
        if new_pod:
            sp.generation += 1
            if "<random>" in sp.pod.name:
                sp.suffix = generated_suffix(f"{sp.workload.manifest.ref}/{sp.pod.index}/{sp.generation}")
            else:
                shutil.rmtree(sim.run_dir / "pods" / sp.name / "volumes", ignore_errors=True)  # emptyDirs start empty
            sp.log = sim.run_dir / "logs" / f"{sp.name}.log"
            sim.layout.prepare(sp, nss_wrapper())
            if token:
                sp.env["SOCKET_WRAPPER_DIR"] = token
        sp.proc, sp.exit_code, sp.joined, sp.stopping, sp.done, sp.said_waiting = None, None, False, False, False, False
        sp.idle, sp.rendezvous = False, False
        what = f"new pod {sp.name}" + (f" (replaces {old})" if old != sp.name else "") if new_pod else \
            f"pod {sp.name}: container restarted"
        sim.say(f"[sim] {what}")
        sim.start(sp)

    # --- after the run ---------------------------------------------------------------------------------------

    def report(self, check: engine.Unit) -> str:
        """The outcome of the run, its steps from the trainer's metrics.jsonl, and what the RESTART and ELASTIC
        rules predicted for the same manifests."""
        sim = self.sim
        lines = ["", "== faults"]
        lines += [f"  {d}" for d in self.decisions] or ["  (no pod ended before the run did)"]
        unfired = [f.text for f in self.faults if not f.fired]
        if unfired:
            lines.append(f"  not injected (the run ended first): {', '.join(unfired)}")
        kind, why = self.outcome or ("stopped", "the run was stopped")
        plan = self.planned()
        expected = plan[2] if plan else None
        metrics = next(iter(sorted(sim.run_dir.rglob("metrics.jsonl"))), None)
        acc = F.account(metrics)
        if kind == "finished":
            verdict = ("no step lost, none done again beyond the last checkpoint" if acc.intact(expected) else
                       "steps lost or done again beyond the last checkpoint")
            lines.append(f"outcome: finished at step {acc.final_step}: {verdict}")
        elif kind == "failed":
            lines.append(f"outcome: failed: {why}")
        elif kind == "restarts":
            lines.append(f"outcome: restarts after completing: {why}")
        else:
            pg = next((t.split("=", 1)[1] for sp in sim.pods if sp.training for t in sp.argv
                       if t.startswith("--pg-timeout=")), None) or next(
                (sp.env.get("PG_TIMEOUT") for sp in sim.pods if sp.training and sp.env.get("PG_TIMEOUT")), None) \
                or "600"
            lines.append(f"outcome: hung: {why}; in a cluster the ranks left waiting give up at the trainer's "
                         f"process-group timeout (--pg-timeout/PG_TIMEOUT, {pg} s) or torchrun's rendezvous timeout, "
                         "then the controller decides again")
        lines += [f"  {ln}" for ln in acc.lines(expected if kind == "finished" else None)]
        if metrics is None:
            lines.append("  steps: no metrics.jsonl in the run folder: the trainer wrote none (steps not counted)")
        predicted, basis = prediction(self.faults, self._trainers(), self.sim.bundle, check)
        findings = [p.line() for p in check.problems + check.suppressed if p.rule.startswith(("RESTART", "ELASTIC"))]
        lines.append(f"the rules predicted: {predicted} ({basis})"
                     + (f"; findings: {len(findings)}" if findings else "; RESTART/ELASTIC rules found nothing"))
        lines += [f"  {f}" for f in findings]
        agree = kind == {"recovers": "finished", "waits": "hung"}.get(predicted) or (
            predicted == "fails" and kind in ("failed", "hung"))
        if kind in ("finished", "failed", "hung") and not agree:
            lines.append(f"DISAGREEMENT: the rules predicted the world {predicted}, the run {kind}: one of them is "
                         "wrong")
        return "\n".join(lines)
