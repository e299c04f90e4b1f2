"""What confines a pod's processes on this machine (confine.py, run in each pod's process, does it): measured once per
run by a probe that goes through the same steps, said in one line of the run's output, and the command line that
starts a pod through it. `SIM_SANDBOX=off` starts pods as before (no line of this is then enforced, and the run says
so)."""
from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..render.paths import REPO
from .host import CONFINE, Network
# The user the image runs as (Dockerfile: USER); a pod runs as it where the simulator is root and no account or
# process of this machine has it, else as the next free uid.
_USER = re.search(r"^USER\s+(\d+)\s*$", (REPO / "Dockerfile").read_text(), re.M) if (REPO / "Dockerfile").exists() else None
IMAGE_UID = int(_USER.group(1)) if _USER else 10001
# Devices a pod may write besides its folders.
WRITE_FILES = ("/dev/null", "/dev/zero", "/dev/full")
# What a pod may read besides its folders, the interpreter and the checkout's code (below): the system's programs and
# libraries, the kernel's views of itself, random numbers, and the few files of /etc a C library, a shell and Python
# read (not /etc as a whole: where a pod runs as root without capability, root's own files there are its to read).
READ = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/proc", "/sys", "/dev/urandom", "/dev/random",
        "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf", "/etc/host.conf",
        "/etc/hosts", "/etc/resolv.conf", "/etc/gai.conf", "/etc/passwd", "/etc/group", "/etc/localtime",
        "/etc/os-release", "/etc/ssl/certs", "/etc/ca-certificates", "/etc/mime.types")
# Folders of the checkout a pod may read (the image's /app/trainer, the C shim of socket_wrapper's port choice);
# of the rest of the checkout only the names (a pod's working directory is /app).
READ_CHECKOUT = ("trainer", ".sim/.lib")


def readable(python_bin: Path) -> list[str]:
    """What a pod may read: READ, the interpreter the pods run and its packages (the venv, where its interpreter
    really is, this Python's), the checkout's READ_CHECKOUT."""
    python = (python_bin / "python").resolve()
    tops = {python_bin.parent, python.parent.parent, Path(sys.prefix), Path(sys.base_prefix)}
    return [*READ, *sorted(str(p.resolve()) for p in tops), *(str(REPO / p) for p in READ_CHECKOUT)]


def free_uid(start: int) -> int:
    """The first uid from `start` that no account and no running process of this machine has."""
    running = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                running.add(entry.stat().st_uid)
            except OSError:
                continue
    uid = start
    while uid in running or _account(uid):
        uid += 1
    return uid


def _account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


@dataclass
class Sandbox:
    """How this run's pods are confined: the uid they run as (None: the simulator's own), whether each pod gets PID
    and mount namespaces, whether Landlock keeps their writes and reads in, whether they get a network namespace of
    their world's (`isolated`; `world`: the one they join, made when the run starts, None: this machine's network);
    what holds and what does not, in words."""

    uid: int | None = None
    namespaces: bool = False
    landlock: bool = False
    read: list[str] | None = None
    isolated: bool = False
    world: dict[str, str | None] | None = None
    enforced: list[str] = field(default_factory=list)
    not_enforced: list[str] = field(default_factory=list)
    # Where the pods may write (the run folder, the pods' socket folder, /dev/shm): set when the run starts.
    writable: list[Path] = field(default_factory=list)
    off: bool = False

    @classmethod
    def probe(cls, python_bin: Path, network: Network) -> Sandbox:
        """What holds here, measured by a probe pod (in a network namespace `network.isolate` makes for it and ends:
        planning holds nothing; the run makes its world's own)."""
        if os.environ.get("SIM_SANDBOX") == "off":
            return cls(off=True, not_enforced=["any confinement (SIM_SANDBOX=off): pods run as this user, may write "
                                               "and read anywhere it can, reach this machine's network, and outlive "
                                               "a SIGKILL of the simulator"])
        root = os.geteuid() == 0
        # What every pod of this repository runs: the venv's interpreter (where it really is) and the checkout.
        needed = [str((python_bin / "python").resolve()), str(REPO)]
        read = readable(python_bin)
        network.isolate()
        try:
            uid = free_uid(IMAGE_UID) if root else None
            seen = _probe(uid, needed, read, network.world)
            why_not_user = ""
            if uid is not None and (seen.get("uid") != uid or seen.get("unreadable")):
                unreadable = ", ".join(seen.get("unreadable") or []) or "what the pods run"
                why_not_user = f"uid {uid} cannot reach {unreadable}" if seen.get("uid") == uid else \
                    f"cannot switch to uid {uid}"
                uid = None
                seen = _probe(None, needed, read, network.world)
        finally:
            network.close()
        landlock = isinstance(seen.get("landlock"), int)
        box = cls(uid=uid, namespaces=seen.get("pid_namespace") == "ok",
                  landlock=landlock and seen.get("write_outside") not in (None, "allowed"),
                  read=read if landlock and seen.get("read_outside") not in (None, "allowed") else None,
                  isolated=seen.get("network") == "ok" and seen.get("connect_outside") not in (None, "allowed"))
        me = pwd.getpwuid(os.geteuid()).pw_name if _account(os.geteuid()) else f"uid {os.geteuid()}"
        if uid is not None:
            box.enforced.append(f"a separate user (uid {uid}{', the image' + chr(39) + 's USER' if uid == IMAGE_UID else ''}; "
                                "no account here)")
        elif root:
            box.enforced.append("root without any capability")
            box.not_enforced.append(f"a separate user ({why_not_user})" if why_not_user else "a separate user")
        else:
            box.not_enforced.append(f"a separate user (the simulator is not root: pods run as {me})")
        if box.namespaces:
            box.enforced.append("a PID namespace per pod (every process of a pod dies with the simulator, SIGKILL "
                                "included; a pod signals and traces its own processes only)")
            if seen.get("mounts") == "ok":
                box.enforced.append("its own /proc (it sees its own processes only) and /dev/shm")
            else:
                box.not_enforced.append(f"a pod's own /proc and /dev/shm ({seen.get('mounts')})")
        else:
            box.not_enforced.append(f"a PID namespace ({seen.get('pid_namespace', 'not available')}): a process a pod "
                                    "starts in a session of its own outlives a SIGKILL of the simulator (its main "
                                    "process dies with it)")
        if box.landlock:
            box.enforced.append(f"no write outside the run folder (Landlock ABI {seen['landlock']}; /dev/shm, "
                                "the pods' socket folder and /dev/null excepted)")
        else:
            box.not_enforced.append(f"no write outside the run folder (Landlock: {seen.get('landlock')})")
        who = f"uid {uid}" if uid is not None else me
        if box.read is not None:
            box.enforced.append("no read outside the run folder, the interpreter and its packages, the checkout's "
                                "trainer/, the system's libraries, /proc and /sys (Landlock; the checkout's other "
                                "names listed, not read)")
        else:
            why = seen.get("landlock") if not landlock else f"a read outside was {seen.get('read_outside')}"
            box.not_enforced.append(f"reads (Landlock: {why}; a pod reads what {who} can read)")
        if box.isolated:
            box.enforced.append("a network namespace per world (the pods reach each other on its own loopback, "
                                "nothing outside it: a listener on this machine's loopback is refused)")
        else:
            why = (network.isolation if network.isolation != "ok" else
                   f"joined: {seen.get('network', 'not joined')}, a listener outside was {seen.get('connect_outside')}")
            box.not_enforced.append(f"the network (no network namespace: {why}; a pod can connect wherever this "
                                    "machine can)")
        box.not_enforced.append("a Unix socket of this machine a pod names by its path; CPU and memory")
        return box

    def line(self) -> str:
        enforced = "; ".join(self.enforced) or "nothing"
        return (f"simulate: each pod runs its manifest's commands on this machine; enforced here: {enforced}; "
                f"NOT enforced: {'; '.join(self.not_enforced)}")

    def command(self, argv: list[str]) -> list[str]:
        """The pod's command (its executable resolved) started through confine.py, or as it is where off."""
        if self.off:
            return argv
        config = {"parent": os.getpid(), "uid": self.uid, "gid": self.uid, "namespaces": self.namespaces,
                  "landlock": self.landlock, "write": [str(p) for p in self.writable],
                  "write_files": list(WRITE_FILES), "world": self.world}
        if self.read is not None:  # and what the command names in the checkout (/app/...), as the image holds it
            config["read"] = [*self.read, *(a for a in argv if a.startswith(f"{REPO}/") and os.path.isfile(a))]
            config["list"] = [str(REPO)]
        return [sys.executable, "-I", str(CONFINE), json.dumps(config), "--", *argv]

    def own(self, *paths: Path) -> None:
        """Give the pods' user what it writes in (the pod's folders, the claims' volumes), where it is a user of its
        own: everything beneath, links not followed."""
        if self.uid is None:
            return
        for top in paths:
            if not top.exists():
                continue
            for path in [top, *top.rglob("*")]:
                st = path.lstat()
                if st.st_uid != self.uid:
                    os.lchown(path, self.uid, self.uid)


def _probe(uid: int | None, needed: list[str], read: list[str], world: dict[str, Any] | None) -> dict[str, Any]:
    """confine.py's probe: what holds for a pod started now (namespaces, user, capabilities, Landlock, the world's
    network, measured from inside: a write to a folder anyone may write in and a read of a file anyone may read,
    outside the allowed ones, must be refused, and so must a connection to a listener on this machine's loopback)."""
    outside = Path(tempfile.mkdtemp(prefix="sim-probe-"))
    allowed = Path(tempfile.mkdtemp(prefix="sim-probe-ok-"))
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        outside.chmod(0o777)
        (outside / "secret").write_text("")
        (outside / "secret").chmod(0o644)
        config = {"parent": os.getpid(), "uid": uid, "gid": uid, "namespaces": True, "landlock": True,
                  "write": [str(allowed)], "write_files": list(WRITE_FILES), "probe": True, "outside": str(outside),
                  "readable": needed, "read": read, "list": [str(REPO)], "world": world,
                  "listener": listener.getsockname()[1]}
        try:
            out = subprocess.run([sys.executable, "-I", str(CONFINE), json.dumps(config), "--", "/bin/true"],
                                 capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            return json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {
                "error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
        except (subprocess.TimeoutExpired, ValueError, OSError) as e:
            return {"error": str(e)}
    finally:
        listener.close()
        shutil.rmtree(outside, ignore_errors=True)
        shutil.rmtree(allowed, ignore_errors=True)
