"""Reading what a pod prints: what reaches the terminal (torchrun's INFO chatter, the store client's retries and
torch's warnings after a world succeeded stay in the pod's log, said once where they matter), and a pod's last words
for the diagnosis of a run that failed."""
from __future__ import annotations

import re
from typing import Callable

from ..model.trainer_contract import contract
from ..launchers.pods import env_from_configmap
from .pods import SimPod

# torch's store client while the store it connects to is not up yet: a warning per address and try, each with the
# C++ stack of the exception it retries (torch/csrc/distributed/c10d/socket.cpp, TCPStore.cpp); a C++ stack of
# any other exception (gloo's sendBytes when a peer is gone) stays there too, its Python exception line does not.
_STORE_RETRY = re.compile(r"^\[[WE]\d{4} [\d:.]+ (?:\d+ )?\S*(?:socket|TCPStore)\.cpp:\d+\] \[c10d\] "
                          r"(?:The client socket has failed to connect|TCP client failed to connect)")
_CPP_STACK = re.compile(r"^(?:frame #\d+: |Exception raised from \w+ at \S+:\d+ \(most recent call first\):|"
                        r"<omitting python frames>$)")
_WAITING = re.compile(r"TCP client failed to connect/validate to host (\S+?):(\d+) - retrying")

# torch's log lines at warning or error level, from Python (`W1124 04:00:59.543000 14029 api.py:1008] ...`) and C++
# (`[W1124 04:00:59.638782784 TCPStore.cpp:106] ...`), and what they say when the store went away.
_TORCH_LOG = re.compile(r"^\[?[WE]\d{4} ")
_STORE_GONE = re.compile(r"sendBytes failed|recvValue failed|exit barrier|keep-alive heartbeat|Broken pipe|"
                         r"Connection reset by peer")

_EXC = re.compile(r"^[\w.]+(Error|Exception|Timeout)\b")


# torchrun's banner when it sets OMP_NUM_THREADS itself (torch/distributed/run.py); the trainer's own [DDP] line
# names the variable too (threads_from=...), and stays.
_OMP_BANNER = "Setting OMP_NUM_THREADS environment variable for each process"
# torchrun stopped by a signal (SIGTERM from the kubelet, a term fault, the simulator's stop) raises SignalException
# out of its agent: a 30-line traceback for what one line says.
_SIGNAL_EXC = re.compile(r"^torch\.distributed\.elastic\.multiprocessing\.api\.SignalException: Process \d+ got signal: "
                         r"(\d+)")
# A traceback held back until its exception line says whether it is that one, at most this many lines.
MAX_TRACEBACK = 200


def noise(line: str) -> bool:
    """torchrun's INFO chatter, c10d's IPv6 lookup warnings and the store client's retries (with their C++ stacks)
    stay in the pod log, not on the terminal."""
    return ("cannot be retrieved (gai error: -9" in line or line.startswith(("I1", "I0")) or "*****" in line
            or _OMP_BANNER in line or bool(_STORE_RETRY.match(line)) or bool(_CPP_STACK.match(line))
            or "has failed to shutdown the rendezvous" in line)


def clip(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut after a whole word and marked ` ...` where it was cut."""
    if len(text) <= width:
        return text
    head = text[:width - 4]
    cut = head.rsplit(" ", 1)[0] if " " in head.strip() else head
    return cut.rstrip() + " ..."


def tracebacks(sp: SimPod, line: str) -> list[str] | None:
    """Python tracebacks, held back until their exception line: torchrun's SignalException becomes one line (the
    traceback stays in the pod's log), any other comes out whole. None: `line` is not part of one."""
    held = sp.traceback
    if line.startswith("Traceback (most recent call last):") and not held:
        held.append(line)
        return []
    if not held:
        return None
    held.append(line)
    if line.startswith((" ", "\t")) and len(held) < MAX_TRACEBACK:
        return []
    sp.traceback = []
    signal = _SIGNAL_EXC.match(line)
    if signal:  # (a pod whose run is complete and waits: the simulator stopping it; the summary says so)
        return [] if sp.idle else [f"torchrun stopped by signal {signal.group(1)} (SignalException; its traceback is "
                                   f"in {sp.log})"]
    return held


def flush(sp: SimPod) -> list[str]:
    """What a pod's output left held back when it ended, for the terminal."""
    held, sp.traceback = sp.traceback, []
    return [f"[{sp.name}] {ln}" for ln in held]


def for_terminal(sp: SimPod, line: str, peer_of: Callable[[str], str]) -> list[str]:
    """What the terminal shows of one line pod `sp` printed (most lines as they are; none, or one said once, for
    the chatter that belongs in its log); `peer_of` names the pod at a host name."""
    out: list[str] = []
    waiting = _WAITING.search(line)
    if waiting and not sp.said_waiting:
        sp.said_waiting = True
        host, port = waiting.groups()
        out.append(f"[{sp.name}] waiting for {peer_of(host)} ({host}:{port}): nothing listens there yet; torch's "
                   f"connection retries go to {sp.log}")
    if "worker group successfully finished" in line:
        sp.workers_succeeded = True
    if sp.workers_succeeded and _TORCH_LOG.match(line):
        # torch 2.13's exit barrier: the last agent to arrive still waits on the store after its host's agent has
        # passed the barrier and left, and logs the broken connection (sendBytes failed, the barrier's traceback, a
        # failed heartbeat). The workers are done: one line here, all in the log.
        if not sp.said_after_success:
            sp.said_after_success = True
            why = (": the rendezvous store was gone, its host having left first (torch 2.13's exit barrier races "
                   "with it)" if _STORE_GONE.search(line) else "")
            out.append(f"[{sp.name}] torchrun logged warnings after its workers had succeeded{why}; they are in "
                       f"{sp.log}")
        return out
    if noise(line) or not line.strip() or (sp.idle and _TORCH_LOG.match(line)):
        return out  # (torchrun's warnings once the run is complete and waits: the simulator stopping it)
    held = tracebacks(sp, line)
    if held is not None:
        return out + [f"[{sp.name}] {ln}" for ln in held]
    out.append(f"[{sp.name}] {line}")
    return out


def last_words(lines: list[str]) -> list[str]:
    """A pod's last lines worth reading: the last exception it raised (not the traceback frames), then its last line."""
    clean = [ln for ln in lines if ln.strip() and not noise(ln)]
    exc = [ln for ln in clean[-80:] if _EXC.match(ln.strip())]
    out = [exc[-1].strip()] if exc else []
    out += [ln for ln in clean[-2:] if ln.strip() not in out and not ln.startswith(("  File ", "    "))]
    return out[-3:]


# argparse's refusal, as the trainer prints it before any collective (trainer/cli.py parse_args): every rank exits 2.
_REFUSED = re.compile(r"error: argument (--[\w-]+)(?:/-\w+)?: (.+)$")


def rejected_setting(sp: SimPod) -> str | None:
    """Where the manifests set the value the trainer refused in pod `sp` (its flag on the command line, or the
    environment variable the flag defaults from and the object and field that set it); None where the pod printed
    no such refusal or the flag is not the trainer's."""
    for line in reversed(sp.lines):
        m = _REFUSED.search(line)
        if m is None:
            continue
        flag, why = m.groups()
        var = contract.FLAGS.get(flag)
        if var is None:
            return None
        ref = sp.workload.manifest.ref
        start = contract.starts_trainer(sp.argv)
        if flag in contract.flags_given(sp.argv[start:] if start is not None else sp.argv):
            return f"the trainer refused {flag} ({clip(why, 120)}): it is on the command line of {ref} " \
                   f"({sp.pod.container_field}.command/args)"
        value = sp.pod.env.get(var.name)
        if value is None:
            return f"the trainer refused {flag} ({clip(why, 120)}), whose default is {var.name}: nothing in the " \
                   "manifests sets it (the image's environment?)"
        return f"the trainer refused {flag} ({clip(why, 120)}): {var.name}={value!r} comes from " \
               f"{_set_in(sp, var.name)}"
    return None


def _set_in(sp: SimPod, name: str) -> str:
    """The object and field that give the pod's training container `name`: a ConfigMap key through envFrom, else
    the container's env entry, else what its controller injects."""
    field = sp.pod.env_fields.get(name, "")
    configmap = env_from_configmap(sp.pod.container, field)
    if configmap:
        return f"ConfigMap/{configmap} data.{name} (through {sp.workload.manifest.ref} {field})"
    if name in sp.pod.injected:
        return f"what the {sp.workload.manifest.kind} controller injects into {sp.workload.manifest.ref}"
    return f"{sp.workload.manifest.ref} {field or sp.pod.container_field + '.env'}"
