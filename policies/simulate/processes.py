"""The pods' processes: start one as the container runtime would (its own session, its output pumped to its log and,
as far as it is worth reading, to the terminal), stop it as the kubelet does (SIGTERM, then SIGKILL, then whatever of
it is left wherever it was reparented), and stop the simulator itself on Ctrl-C, SIGTERM or SIGHUP with its pods."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

from . import diagnose
from .pods import POD_TOKEN, SimPod
from .host import CONFINE

CONFINE_ARG = str(CONFINE).encode()

# Called with each line a pod prints (a fault run follows the trainer's progress this way).
LineListener = Callable[[SimPod, str], None]


def start(sp: SimPod, say: Callable[[str], None], on_line: LineListener | None = None,
          peer_of: Callable[[str], str] = lambda host: host,
          confine: Callable[[list[str]], list[str]] = lambda argv: argv) -> None:
    """Start the pod's container command (through `confine`: sandbox.py); its output goes to its log, to `on_line`,
    and (what is worth reading) to `say`, from a thread of its own. Pods are started from the thread that runs the
    simulation: a pod's process dies with the thread that started it (PR_SET_PDEATHSIG)."""
    sp.log.parent.mkdir(parents=True, exist_ok=True)
    exe = shutil.which(sp.argv[0], path=sp.env["PATH"]) if sp.argv else None
    if not sp.argv or exe is None:
        sp.exit_code = 127
        sp.lines.append(f"simulate: executable '{sp.argv[0] if sp.argv else '(no command)'}' not found here")
        say(f"[{sp.name}] {sp.lines[-1]}")
        return
    sp.proc = subprocess.Popen(confine([exe, *sp.argv[1:]]), cwd=sp.cwd, env=sp.env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    threading.Thread(target=pump, args=(sp, say, on_line, peer_of), daemon=True).start()


def pump(sp: SimPod, say: Callable[[str], None], on_line: LineListener | None, peer_of: Callable[[str], str]) -> None:
    assert sp.proc and sp.proc.stdout
    with open(sp.log, "a", encoding="utf-8") as log:  # a restarted container appends (kubectl logs -p)
        for raw in sp.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            log.write(line + "\n")
            log.flush()
            sp.lines.append(line)
            if len(sp.lines) > 400:
                del sp.lines[:200]
            if "Rendezvous complete for workers" in line:
                sp.joined = True
            if "Rendezvous'ing worker group" in line:  # torchrun's agent (LOGLEVEL=INFO) entering its rendezvous
                sp.rendezvous = True
            if line.startswith("[IDLE] "):  # the trainer's run is complete and it waits (AFTER_DONE=wait)
                sp.idle = True
            for text in diagnose.for_terminal(sp, line, peer_of):
                say(text)
            if on_line is not None:  # after the line is shown: a fault it makes due is said after it
                on_line(sp, line)
    for text in diagnose.flush(sp):
        say(text)


def stop(sp: SimPod) -> None:
    """SIGTERM to the pod's process group (as the kubelet stops a container), then SIGKILL; then SIGKILL to
    whatever of the pod is left in other process groups: torchrun starts its workers in sessions of their own,
    and a worker blocked in a collective does not act on SIGTERM."""
    if sp.proc is not None and sp.proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(sp.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                sp.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    for pid in pod_processes(sp):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def stop_all(pods: list[SimPod]) -> list[str]:
    """Stop every pod at once (see stop) and check that none of their processes is left; the pods that still
    have one (none, unless a process outlives SIGKILL)."""
    live = [sp for sp in pods if sp.proc is not None and sp.proc.poll() is None]
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        for sp in live:
            try:
                os.killpg(sp.proc.pid, sig)  # type: ignore[union-attr]
            except ProcessLookupError:
                pass
        end = time.monotonic() + wait
        while live and time.monotonic() < end:
            live = [sp for sp in live if sp.proc is not None and sp.proc.poll() is None]
            time.sleep(0.05)
        if not live:
            break
    left: list[str] = []
    for attempt in range(20):  # killed processes vanish once reaped
        left = []
        for sp in pods:
            pids = pod_processes(sp)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if pids:
                left.append(sp.name)
        if not left:
            break
        time.sleep(0.1)
    return left


def pod_processes(sp: SimPod) -> list[int]:
    """Every process of the pod, wherever it was reparented (they carry the pod's POD_TOKEN in their env)."""
    return processes_with(POD_TOKEN, sp.env.get(POD_TOKEN, ""))


def container_pid(sp: SimPod) -> int | None:
    """The pod's container process (its command: torchrun), below confine.py's processes where they stand between
    the simulator and it (sandbox.py)."""
    if sp.proc is None:
        return None
    pid, pids = sp.proc.pid, pod_processes(sp)
    for _ in range(3):
        try:
            wrapper = CONFINE_ARG in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return pid
        if not wrapper:
            return pid
        below = [p for p in pids if parent_of(p) == pid]
        if not below:
            return pid
        pid = below[0]
    return pid


def processes_with(name: str, value: str) -> list[int]:
    """The processes whose environment holds name=value (children inherit it, whoever their parent is now)."""
    if not value:
        return []
    return _processes_holding(b"\0" + f"{name}={value}".encode() + b"\0")


def processes_with_prefix(name: str, prefix: str) -> list[int]:
    """The processes whose environment holds name=<prefix...> (every pod of one simulator: POD_TOKEN's pid)."""
    return _processes_holding(b"\0" + f"{name}={prefix}".encode())


def _processes_holding(needle: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in b"\0" + (entry / "environ").read_bytes() + b"\0":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def send(pid: int, sig: int) -> None:
    """A signal to a process that may be gone already."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def state_of(pid: int) -> str:
    """A process's state letter (/proc/<pid>/stat: R, S, T for stopped, ...), empty once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def pending(pid: int, signum: int) -> bool:
    """Whether `signum` waits for the process (/proc/<pid>/status SigPnd, ShdPnd: a stopped process receives it
    once continued)."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":" in line)
        mask = int(fields.get("SigPnd", "0").strip(), 16) | int(fields.get("ShdPnd", "0").strip(), 16)
    except (OSError, ValueError):
        return False
    return bool(mask >> (signum - 1) & 1)


def wait_for(ready: Callable[[], bool], within: float, gone: Callable[[], bool] = lambda: False) -> bool:
    """Polls `ready()` every 10 ms for at most `within` s, giving up sooner once `gone()`; whether it became true."""
    end = time.monotonic() + within
    while not ready():
        if gone() or time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def until_pending(workers: Callable[[], list[int]], signum: int, within: float) -> bool:
    """Waits (at most `within` s) until every stopped process of `workers()` has `signum` pending; whether it came.
    A process that runs, or is gone, is not waited for: it handles the signal as it comes."""
    return wait_for(lambda: not [pid for pid in workers() if state_of(pid) in ("T", "t") and not pending(pid, signum)],
                    within)


class Stopped(KeyboardInterrupt):
    """The simulator was told to stop (Ctrl-C, SIGTERM from `timeout` or a cancelled CI job, SIGHUP from a closed
    terminal): the run's pods are stopped on the way out as at the deadline."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_on_signal(signum: int, frame: Any) -> None:
    for s in STOP_SIGNALS:  # the pods' cleanup runs to its end (bounded: about 10 s)
        signal.signal(s, signal.SIG_IGN)
    raise Stopped(signum)
