"""A pod's command under the least privilege this machine allows, started by the simulator (sandbox.py) as
`python -I confine.py CONFIG -- EXE ARG...` in the pod's env (`--world PARENT`: the holder of the world's network,
below). The standard library and the landlock package only: it runs before the pod's command and imports nothing of
this repository.

- The pod dies with the simulator, even by SIGKILL: this process gets SIGKILL when the simulator ends
  (PR_SET_PDEATHSIG); where the machine allows a PID namespace (root, or a user namespace), the pod runs in one of its
  own under a small init (this process's child, pid 1 there) that gets SIGKILL when this process ends, and when a PID
  namespace's init ends the kernel kills every process in it, reparented or in a session of its own included.
  That init also gives the pod its own /proc and /dev/shm (a mount namespace), as a container has.
- A separate user where the simulator runs as root (CONFIG's uid and gid, no supplementary groups); where that user
  cannot reach what the pod runs (CONFIG's uid null), root with no capability at all.
- No write outside the folders CONFIG names (the run folder, the pods' socket folder, /dev/shm and a few devices),
  and no read outside what CONFIG's "read" names (the interpreter and its packages, the checkout's trainer, system
  libraries, /proc, /sys), with Landlock, where the kernel has it.
- The world's network: CONFIG's "world" names the network namespace (and, where the simulator is not root, the user
  namespace that owns it) of a holder process, `confine.py --world`, one per simulation: every pod of the world
  joins it, so the pods reach each other on its own loopback and nothing outside. The holder makes the namespace,
  brings its loopback up, and hands the simulator sockets made in it (for the relay and the readiness checks) until
  the simulator closes its end or ends.

The init forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the command (as the container runtime
signals the container's main process), reaps orphans, and ends as the command ended; so does this process.
With CONFIG's "probe", the command is not run: the pod's process prints what was enforced (JSON) instead."""
from __future__ import annotations

import ctypes
import encodings.idna  # noqa: F401  (the probe's connect encodes its host with it, after the user and Landlock)
import fcntl
import json
import os
import resource
import signal
import socket
import struct
import sys
from typing import Any, Callable

PR_SET_PDEATHSIG, PR_CAPBSET_DROP = 1, 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
FORWARD = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
libc = ctypes.CDLL(None, use_errno=True)
# What was enforced, for the probe (the pod's process is a fork of the processes that set it up).
done: dict[str, object] = {}


def call(name: str, *args: object) -> None:
    ctypes.set_errno(0)
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def die_with_parent(parent: int | None) -> None:
    """SIGKILL when the process that started this one ends (already ended: end now)."""
    call("prctl", PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(137)


def end_as(status: int) -> None:
    """End as a child that ended with `status` (os.waitpid's) did: the same exit code, or the same signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal init may not take from itself
    os._exit(os.waitstatus_to_exitcode(status))


def supervise(start_child: Callable[[], int], init: bool) -> int:
    """Start the child, forward the stop signals to it, reap (as init: every orphan too) until it ends; its status."""
    child: list[int] = []
    pending: list[int] = []

    def forward(sig: int, frame: object) -> None:
        if not child:
            pending.append(sig)
            return
        try:
            os.kill(child[0], sig)
        except ProcessLookupError:
            pass

    for s in FORWARD:
        signal.signal(s, forward)
    child.append(start_child())
    for sig in pending:
        forward(sig, None)
    while True:
        pid, status = os.waitpid(-1 if init else child[0], 0)
        if pid == child[0]:
            return status


def namespaces() -> bool:
    """A PID and a mount namespace for this process's children (with a user namespace where not root)."""
    try:
        unshare(CLONE_NEWPID | CLONE_NEWNS)
    except OSError as e:
        done["pid_namespace"] = e.strerror or str(e)
        return False
    done["pid_namespace"] = "ok"
    return True


def unshare(flags: int) -> None:
    """New namespaces for this process (its children, for a PID namespace), with a user namespace where not root:
    the same ids inside, so the processes are who they were, with no capability after exec."""
    uid, gid = os.geteuid(), os.getegid()
    call("unshare", flags | (CLONE_NEWUSER if uid != 0 else 0))
    if uid != 0:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)


def join_world(world: dict[str, Any]) -> None:
    """Into the world's network namespace (through the user namespace that owns it, where there is one)."""
    for key, flag in (("user", CLONE_NEWUSER), ("net", CLONE_NEWNET)):
        if world.get(key):
            fd = os.open(world[key], os.O_RDONLY | os.O_CLOEXEC)
            try:
                call("setns", fd, flag)
            finally:
                os.close(fd)
    done["network"] = "ok"


def loopback_up() -> None:
    """The namespace's own loopback up (a new network namespace has it down, and nothing else)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sh22x", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sh22x", b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))


def hold_world(parent: int) -> None:
    """`--world`: a network namespace of its own with its loopback up; says so (JSON) on stdout, then makes a socket
    in it for each request on stdin (a Unix socket: b"4" or b"6", the fd sent back) until stdin ends."""
    die_with_parent(parent)
    try:
        unshare(CLONE_NEWNET)
        loopback_up()
    except OSError as e:
        print(json.dumps({"network": e.strerror or str(e)}), flush=True)
        return
    print(json.dumps({"network": "ok", "pid": os.getpid()}), flush=True)
    with socket.socket(fileno=0) as requests:
        while (ask := requests.recv(1)):
            made = socket.socket(socket.AF_INET6 if ask == b"6" else socket.AF_INET, socket.SOCK_STREAM)
            socket.send_fds(requests, [b"s"], [made.fileno()])
            made.close()


def container_mounts() -> None:
    """As init of the pod's namespaces: its own /proc (its processes only) and /dev/shm (64 MiB, as a container's)."""
    try:
        call("mount", b"none", b"/", None, MS_REC | MS_PRIVATE, None)
        call("mount", b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        call("mount", b"shm", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64m,mode=1777")
        done["mounts"] = "ok"
    except OSError as e:
        done["mounts"] = e.strerror or str(e)


def ruleset(config: dict[str, Any]) -> tuple[Any, int | str]:
    """A Landlock ruleset that allows writing only beneath CONFIG's folders and to its files and, where CONFIG names
    what may be read ("read"; "list": folders whose names only may be read), reading only those and what may be
    written (None, and why, where the kernel or the package has no Landlock). Built before the user changes: the
    paths are opened here."""
    try:
        import landlock
        from landlock import FSAccess
        ctypes.set_errno(0)  # the package reads errno after each call as the call's own
        abi = landlock.landlock_abi_version()
        file_rights = FSAccess.WRITE_FILE | (FSAccess.TRUNCATE if abi >= 3 else 0)
        rights = (file_rights | FSAccess.REMOVE_DIR | FSAccess.REMOVE_FILE | FSAccess.MAKE_CHAR | FSAccess.MAKE_DIR
                  | FSAccess.MAKE_REG | FSAccess.MAKE_SOCK | FSAccess.MAKE_FIFO | FSAccess.MAKE_BLOCK
                  | FSAccess.MAKE_SYM | (FSAccess.REFER if abi >= 2 else 0))
        reads = config.get("read") is not None
        read_file = FSAccess.READ_FILE | FSAccess.EXECUTE if reads else FSAccess(0)
        read_dir = read_file | FSAccess.READ_DIR if reads else FSAccess(0)
        ctypes.set_errno(0)
        ruleset = landlock.Ruleset(restrict_rules=rights | read_dir)
        allowed = [(path, rights | read_dir, file_rights | read_file) for path in config["write"]]
        allowed += [(path, None, file_rights | read_file) for path in config["write_files"]]
        allowed += [(path, read_dir, read_file) for path in config.get("read") or []]
        allowed += [(path, FSAccess.READ_DIR, None) for path in config.get("list") or []]
        for path, folder, file in allowed:
            rules = folder if os.path.isdir(path) else file if os.path.exists(path) else None
            if rules:
                ctypes.set_errno(0)
                ruleset.allow(path, rules=rules)
        return ruleset, abi
    except Exception as e:  # ImportError, landlock.LandlockError (a kernel without it), OSError
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def drop_capabilities() -> None:
    """Root without a capability, for good: the bounding set emptied (what an execve as root would regain) and the
    current sets cleared. uid 0 still owns root's files; Landlock keeps the writes in."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        call("prctl", PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; two 32-bit words each: all empty
    call("capset", header, data)


def _capabilities() -> str:
    with open("/proc/self/status") as f:
        return f.read().split("CapEff:")[1].split()[0]


def become_pod(config: dict[str, Any], command: list[str], parent: int | None) -> None:
    """In the pod's process: the user, the pod's death with its parent, Landlock; then the command (or the probe)."""
    die_with_parent(parent)
    rules, abi = ruleset(config) if config.get("landlock") else (None, "not asked")
    if config.get("uid") is not None:
        os.setgroups([])
        os.setgid(config["gid"])
        os.setuid(config["uid"])
        die_with_parent(parent)  # a change of user clears the parent-death signal
    if _capabilities() != "0" * 16:  # root, or a process of a user namespace of its own: none left at exec
        drop_capabilities()
    done["uid"] = os.getuid()
    done["capabilities"] = _capabilities()
    if rules is not None:
        ctypes.set_errno(0)
        rules.apply()
    done["landlock"] = abi
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; the command gets the defaults
        signal.signal(sig, signal.SIG_DFL)
    if config.get("probe"):
        probe(config)
        os._exit(0)
    os.execv(command[0], command)


def probe(config: dict[str, Any]) -> None:
    """What holds, measured from inside: the paths the user cannot read, whether a write and a read outside are
    refused, and whether a listener of this machine's loopback answers."""
    done["unreadable"] = [p for p in config.get("readable", []) if not os.access(p, os.R_OK | os.X_OK)]
    outside = config.get("outside")
    if outside:
        for key, mode, name in (("write_outside", "w", "written-by-a-pod"), ("read_outside", "r", "secret")):
            try:
                with open(os.path.join(outside, name), mode):
                    pass
                done[key] = "allowed"
            except OSError as e:
                done[key] = e.strerror or str(e)
    if config.get("listener"):
        try:
            socket.create_connection(("127.0.0.1", config["listener"]), timeout=5).close()
            done["connect_outside"] = "allowed"
        except OSError as e:
            done["connect_outside"] = e.strerror or str(e)
    done["pid"] = os.getpid()
    print(json.dumps(done), flush=True)


def main(argv: list[str]) -> None:
    if argv[1] == "--world":
        hold_world(int(argv[2]))
        return
    config = json.loads(argv[1])
    command = argv[3:]
    die_with_parent(config["parent"])
    if config.get("world"):
        try:
            join_world(config["world"])
        except OSError as e:  # the probe joined it: a pod is not started outside it
            print(f"confine.py: cannot join the world's network namespace: {e}", file=sys.stderr, flush=True)
            os._exit(126)
    if not config.get("namespaces") or not namespaces():
        become_pod(config, command, None)  # this process is the pod's: no fork
        return
    read_end, write_end = os.pipe()

    def start_init() -> int:
        pid = os.fork()
        if pid:
            return pid
        # pid 1 of the pod's PID namespace, in a process group of its own (a signal to the simulator's child's group
        # reaches it once, through the forwarding)
        os.close(read_end)
        die_with_parent(None)  # its parent is outside the namespace: getppid() is 0 here
        os.setpgid(0, 0)
        container_mounts()

        def start_pod() -> int:
            child = os.fork()
            if child == 0:
                os.close(write_end)
                become_pod(config, command, 1)
            return child

        status = supervise(start_pod, init=True)
        os.write(write_end, str(status).encode())
        os._exit(0)

    status = supervise(start_init, init=False)
    os.close(write_end)
    told = os.read(read_end, 64)
    end_as(int(told) if told else status)


if __name__ == "__main__":
    main(sys.argv)
