"""`make simulate FAULT=...`: the faults a simulated run injects (what they are, when they fire, which pod), the steps
the repository's trainer plans, and the accounting of a faulted run from the trainer's own metrics.jsonl. fault_run.py
injects them; what the kubelet and each controller do after a pod ends comes from the launcher modules
(Launcher.after_exit).

A fault is `<action>:<pod>@<when>`, several separated by spaces or commas:

  kill:1@step=6            SIGKILL every process of pod 1 once the trainer reports step 6 (its container killed: an
                           OOM kill, a crash; the kubelet restarts it in place)
  node-lost:1@step=6       SIGKILL every process of pod 1, and no kubelet is left to restart it: its node is gone; the
                           pod stays until the Node object is deleted or the pod force-deleted (a `return` fault)
  kill-worker:1@step=6     SIGKILL one training process of pod 1 (torchrun sees a worker die)
  term:1@epoch=1           SIGTERM to pod 1's container, SIGKILL after its terminationGracePeriodSeconds; the pod is
                           deleted (an eviction, a spot pre-emption): it carries DisruptionTarget
  partition=20:1@t=30      pod 1 stops answering for 20 s, 30 s after the trainers start (its processes stopped:
                           SIGSTOP, then SIGCONT)
  delay=30:1               pod 1 starts 30 s after the others (a node pulling the image late, a partial gang)
  return:1@step=40         pod 1, killed, deleted or lost by an earlier fault, comes back no sooner than step 40:
                           until then neither the kubelet nor the controller can start it (its node is away; after
                           node-lost: the Node object deleted or the pod force-deleted), then they do what they
                           decided (an elastic world runs without it, then takes it back); at a step, the ranks stay
                           stopped there until it is back (fault_run.FaultRun._back)

<pod> is the pod's number among the training pods (0 = node rank 0), its name as the simulator prints it, or its
hostname. <when> is `step=N` (the trainer's global step; the simulator sets LOG_INTERVAL=1 so that it sees each, and
PAUSE_AT_STEPS=N so that every rank stops after step N until the fault is in: it lands between step N and N+1),
`epoch=N` (once epoch N has ended) or `t=S` (seconds after the training pods start)."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KILL, KILL_WORKER, TERM, PARTITION, DELAY, RETURN = "kill", "kill-worker", "term", "partition", "delay", "return"
NODE_LOST = "node-lost"
ACTIONS = (KILL, NODE_LOST, KILL_WORKER, TERM, PARTITION, DELAY, RETURN)
# The faults that take a pod away (a `return` brings it back), and those that lose a pod (policies/model/recovery.py).
AWAY = (KILL, TERM, NODE_LOST)
WHEN = ("step", "epoch", "t")
_FAULT = re.compile(r"^(?P<action>[a-z-]+)(?:=(?P<seconds>\d+(?:\.\d+)?))?:(?P<pod>[^@\s:]+)"
                    r"(?:@(?P<when>[a-z]+)=(?P<at>\d+(?:\.\d+)?))?$")
# What SIGSTOP for N seconds models, printed with the fault.
PARTITION_MODEL = ("its processes stopped (SIGSTOP) and resumed (SIGCONT): peers see no answer and no reset, as "
                   "behind a dropped network or a frozen node; open connections survive, as they would a short "
                   "partition")


class FaultError(Exception):
    """A fault that cannot be injected: the message says why, in one line."""


@dataclass
class Fault:
    action: str
    pod: str
    when: str | None = None
    at: float | None = None
    seconds: float | None = None
    text: str = ""
    target: int = -1  # index into the simulator's training pods, once resolved
    fired: bool = False

    def trigger(self) -> str:
        if self.when is None:
            return "at the start"
        return {"step": f"at step {self.at:g}", "epoch": f"after epoch {self.at:g}",
                "t": f"{self.at:g} s after the start"}[self.when]


def parse(spec: str) -> list[Fault]:
    """The faults of a FAULT= value; a FaultError naming the first one that is not understood."""
    faults = []
    for text in [t for t in re.split(r"[\s,]+", spec.strip()) if t]:
        m = _FAULT.match(text)
        usage = ("expected <action>:<pod>@<when>, e.g. kill:1@step=6, node-lost:1@step=6, kill-worker:1@step=6, "
                 "term:0@epoch=1, partition=20:1@t=30, delay=30:1, return:1@step=40")
        if m is None:
            raise FaultError(f"FAULT {text!r}: {usage}")
        action, seconds = m["action"], m["seconds"]
        if action not in ACTIONS:
            raise FaultError(f"FAULT {text!r}: unknown fault {action!r} (known: {', '.join(ACTIONS)})")
        if action in (PARTITION, DELAY) and not seconds:
            raise FaultError(f"FAULT {text!r}: {action} needs its seconds, e.g. {action}=20:1"
                             + ("@t=30" if action == PARTITION else ""))
        if action not in (PARTITION, DELAY) and seconds:
            raise FaultError(f"FAULT {text!r}: {action} takes no seconds")
        if action == DELAY and m["when"]:
            raise FaultError(f"FAULT {text!r}: delay applies to the pod's start; it takes no @<when>")
        if action != DELAY and not m["when"]:
            raise FaultError(f"FAULT {text!r}: say when, e.g. {text}@step=6, @epoch=1 or @t=30")
        if m["when"] and m["when"] not in WHEN:
            raise FaultError(f"FAULT {text!r}: unknown time {m['when']!r} (step=N, epoch=N or t=seconds)")
        at = float(m["at"]) if m["at"] else None
        if m["when"] in ("step", "epoch") and (at is None or at != int(at) or at < 1):
            raise FaultError(f"FAULT {text!r}: {m['when']} must be a whole number from 1")
        faults.append(Fault(action, m["pod"], m["when"], at, float(seconds) if seconds else None, text))
    if not faults:
        raise FaultError("FAULT is empty: give at least one fault, e.g. kill:1@step=6")
    return faults


def resolve(faults: list[Fault], pods: list[tuple[str, str]]) -> None:
    """Point each fault at a training pod: (name, hostname) per training pod, in node-rank order."""
    for f in faults:
        if f.pod.isdigit() and int(f.pod) < len(pods):
            f.target = int(f.pod)
            continue
        matches = [i for i, (name, host) in enumerate(pods) if f.pod in (name, host)]
        if not matches:
            known = ", ".join(f"{i} ({name})" for i, (name, _) in enumerate(pods))
            raise FaultError(f"FAULT {f.text!r}: no training pod {f.pod!r} (the pods: {known})")
        f.target = matches[0]
    for f in faults:
        if f.action != RETURN:
            continue
        away = [g for g in faults if g.action in AWAY and g.target == f.target]
        if not away:
            raise FaultError(f"FAULT {f.text!r}: nothing takes pod {f.pod} away first: give a kill, node-lost or term "
                             f"fault for it too, e.g. kill:{f.pod}@step=6 {f.text}")
        if all(g.when == f.when and (g.at or 0) >= (f.at or 0) for g in away):
            raise FaultError(f"FAULT {f.text!r}: it would fire before pod {f.pod} is taken away ({away[0].text}): "
                             f"give a later {f.when}")


def planned_steps(settings: dict[str, Any] | None, world: int) -> tuple[int, int, int] | None:
    """(steps per epoch, epochs, total steps) the repository's trainer runs on a world of `world` ranks with these
    settings (its flags as its own parser reads them: ask_trainer.settings; each rank trains
    ceil(ceil(n / world) / batch) batches an epoch, trainer/train.py), or None where they are not known or the data
    set's size is known only once it is loaded (tasks other than synthetic)."""
    if settings is None or settings.get("task") != "synthetic":
        return None
    per_epoch = math.ceil(math.ceil(settings["samples"] / world) / settings["batch_size"])
    total = per_epoch * settings["epochs"]
    if settings.get("max_steps"):
        total = min(total, settings["max_steps"])
    return per_epoch, settings["epochs"], total


# --- what the trainer's metrics.jsonl says about a faulted run ---------------------------------------------------


@dataclass
class Account:
    """Steps of a run counted from the trainer's metrics.jsonl (rank 0 writes it, appending across restarts)."""

    final_step: int = 0
    finished: bool = False
    starts: int = 0
    resumes: list[tuple[int, int, int]] = field(default_factory=list)  # (step reached before, resumed at, checkpoint)
    repeated: int = 0
    beyond_checkpoint: int = 0  # repeated steps that a checkpoint written before the fault already covered

    def lines(self, expected: int | None) -> list[str]:
        out = []
        for reached, resumed, ckpt in self.resumes:
            note = ("the last checkpoint" if resumed == ckpt else
                    f"an older checkpoint than the last one (step {ckpt})")
            out.append(f"restart: reached step {reached}, resumed at step {resumed} ({note}): "
                       f"{max(reached - resumed, 0)} step{'s' if reached - resumed != 1 else ''} done again")
        if expected is not None:
            out.append(f"steps: {self.final_step} of {expected}"
                       + (" (as an uninterrupted run)" if self.final_step == expected else
                          f" ({expected - self.final_step} lost)" if self.final_step < expected else
                          f" ({self.final_step - expected} more than planned)"))
        return out

    def intact(self, expected: int | None) -> bool:
        """No step lost, none repeated beyond the last checkpoint."""
        return self.finished and (expected is None or self.final_step == expected) and self.beyond_checkpoint == 0


def account(metrics: Path | None) -> Account:
    acc = Account()
    if metrics is None or not metrics.exists():
        return acc
    reached = 0
    last_ckpt = 0
    for line in metrics.read_text(errors="replace").splitlines():
        try:
            rec: dict[str, Any] = json.loads(line)
        except ValueError:
            continue
        event = rec.get("event")
        step = rec.get("step") if isinstance(rec.get("step"), int) else None
        if event == "start":
            acc.starts += 1
            if acc.starts > 1:  # a restart: from step 0 unless a resume event follows
                acc.resumes.append((reached, 0, last_ckpt))
                reached = 0
        elif event == "resume" and acc.resumes:
            before, _, ckpt = acc.resumes[-1]
            acc.resumes[-1] = (before, step or 0, ckpt)
            reached = step or 0
        elif event in ("train", "epoch") and step is not None:
            reached = max(reached, step)
        elif event == "checkpoint" and step is not None:
            last_ckpt = max(last_ckpt, step)
        if event == "epoch" and rec.get("checkpoint") and step is not None:
            last_ckpt = max(last_ckpt, step)
        if event == "done":
            acc.finished = True
            steps = rec.get("steps")
            reached = max(reached, steps if isinstance(steps, int) else 0)
    acc.final_step = reached
    for before, at, ckpt in acc.resumes:
        acc.repeated += max(before - at, 0)
        acc.beyond_checkpoint += max(ckpt - at, 0)
    return acc
