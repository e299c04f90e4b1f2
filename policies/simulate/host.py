"""What this machine gives a simulation: libnss_wrapper (pod names resolve), libsocket_wrapper and the C shim that
serialises its port choice (each pod gets a network of its own), the world's network namespace (its own loopback,
nothing outside), the relay that brings a host-network pod's ports into socket_wrapper's network, and the one error a
simulation that cannot run here raises."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable
from ..render.paths import REPO

NSS_WRAPPER = Path("/usr/lib/x86_64-linux-gnu/libnss_wrapper.so")
NSS_WRAPPER_CANDIDATES = (NSS_WRAPPER, Path("/usr/lib/aarch64-linux-gnu/libnss_wrapper.so"), Path("/usr/lib/libnss_wrapper.so"))
SOCKET_WRAPPER_CANDIDATES = tuple(Path(str(c).replace("libnss_wrapper", "libsocket_wrapper")) for c in NSS_WRAPPER_CANDIDATES)
# socket_wrapper's interfaces 1..64 are the addresses 127.0.0.<id> and fd00::5357:5f<id, hex>; pods start at 11
# (127.0.0.1 stays localhost).
FIRST_IFACE, LAST_IFACE = 11, 64
SERIAL_SOURCE = REPO / "policies" / "native" / "swrap_serial.c"
CONFINE = Path(__file__).with_name("confine.py")


class SimulationError(Exception):
    """The overlay cannot be simulated here: the message says why, in one line."""


def installed(candidates: tuple[Path, ...]) -> Path | None:
    """The first of a library's usual paths that exists on this machine."""
    return next((p for p in candidates if p.exists()), None)


def socket_wrapper() -> Path | None:
    """libsocket_wrapper where installed (Debian: libsocket-wrapper), unless SIM_HOST_NETWORK=1 asks for the host's."""
    if os.environ.get("SIM_HOST_NETWORK") == "1":
        return None
    return installed(SOCKET_WRAPPER_CANDIDATES)


def name_serializer() -> Path | None:
    """policies/native/swrap_serial.c built for this machine (once, cached under .sim/.lib by the source's hash):
    without it two processes of one pod can be given one port by libsocket_wrapper. None without a C compiler."""
    digest = hashlib.sha256(SERIAL_SOURCE.read_bytes()).hexdigest()[:12]
    out = REPO / ".sim" / ".lib" / f"swrap_serial-{digest}.so"
    if out.exists():
        return out
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".so.tmp")
    os.close(fd)
    try:
        built = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", tmp, str(SERIAL_SOURCE), "-ldl", "-lpthread"],
                               capture_output=True, text=True)
        if built.returncode != 0:
            return None
        os.replace(tmp, out)
        for old in out.parent.glob("swrap_serial-*.so"):  # builds of earlier versions of the source
            if old != out:
                old.unlink(missing_ok=True)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def nss_wrapper() -> Path:
    found = installed(NSS_WRAPPER_CANDIDATES)
    if found:
        return found
    raise SimulationError("libnss_wrapper is not installed (Debian: apt-get install libnss-wrapper; `make setup` "
                          "installs it where it can): pod DNS names cannot resolve on this machine")


class Network:
    """The pods' network: socket_wrapper's (each pod its own address; the socket folder made when the run starts,
    with a relay from each host-network pod's ports into it) where this machine has it and the C shim builds, else
    one loopback network shared by every pod (`host_network_reason` says why). Either lies in the world's network
    namespace where `isolate` made one (its own loopback: a pod reaches the other pods and nothing outside), else
    on this machine's network (`isolation` says why)."""

    def __init__(self) -> None:
        self.swrap = socket_wrapper()
        self.serial = name_serializer() if self.swrap else None
        self.host_network_reason = ""
        if self.swrap is None:
            self.host_network_reason = ("SIM_HOST_NETWORK=1" if os.environ.get("SIM_HOST_NETWORK") == "1"
                                        else "libsocket_wrapper is not installed")
        elif self.serial is None:
            self.swrap, self.host_network_reason = None, "no C compiler to build policies/native/swrap_serial.c"
        self.folder: Path | None = None
        self._relays: list[socket.socket] = []
        # The holder of the world's network namespace (confine.py --world) and the simulator's end of its socket
        # requests; `isolation` is "ok" or why there is none.
        self._holder: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._requests: socket.socket | None = None
        self.world: dict[str, str | None] | None = None
        self.isolation = "not asked"

    def isolate(self) -> str:
        """The world's network namespace, where the machine allows one (POLICIES_NETWORK_NAMESPACE=off: not asked
        for, as for kustomize); "ok" or why not. Its holder ends with the simulator (or `close`)."""
        if os.environ.get("POLICIES_NETWORK_NAMESPACE") == "off":
            self.isolation = "POLICIES_NETWORK_NAMESPACE=off"
            return self.isolation
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            holder = subprocess.Popen([sys.executable, "-I", str(CONFINE), "--world", str(os.getpid())],
                                      stdin=theirs.fileno(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            ours.close()
            self.isolation = str(e)
            return self.isolation
        finally:
            theirs.close()
        assert holder.stdout is not None
        first = holder.stdout.readline().decode("utf-8", "replace")
        try:
            said = json.loads(first)
        except ValueError:
            assert holder.stderr is not None
            said = {"network": (first.strip() or holder.stderr.read().decode("utf-8", "replace").strip()
                                or f"the holder exited {holder.wait()}").splitlines()[-1]}
        if said.get("network") != "ok":
            ours.close()
            _end(holder)
            self.isolation = str(said.get("network"))
            return self.isolation
        self._holder, self._requests = holder, ours
        ns = f"/proc/{said['pid']}/ns"
        self.world = {"net": f"{ns}/net", "user": f"{ns}/user" if os.geteuid() != 0 else None}
        self.isolation = "ok"
        return self.isolation

    def new_socket(self, family: int = socket.AF_INET) -> socket.socket:
        """A TCP socket of the pods' network: made in the world's namespace by its holder where there is one."""
        if self._requests is None:
            return socket.socket(family, socket.SOCK_STREAM)
        with self._lock:
            self._requests.sendall(b"6" if family == socket.AF_INET6 else b"4")
            _, fds, _, _ = socket.recv_fds(self._requests, 1, 1)
        if not fds:
            raise OSError("the world's network holder ended")
        return socket.socket(fileno=fds[0])

    def connect(self, ip: str, port: int, timeout: float) -> socket.socket:
        """A connection to `ip:port` in the pods' network (a host-network pod's port)."""
        sock = self.new_socket()
        try:
            sock.settimeout(timeout)
            sock.connect((ip, port))
        except OSError:
            sock.close()
            raise
        return sock

    def port_open(self, ip: str, port: int) -> bool:
        try:
            with self.connect(ip, port, 0.5):
                return True
        except OSError:
            return False

    def ipv6(self, ip: str) -> str:
        """The IPv6 address of a pod: socket_wrapper's fd00::5357:5f<iface> for its network, else IPv4-mapped."""
        if self.swrap and ip.startswith("127.0.0."):
            return f"fd00::5357:5f{int(ip.rsplit('.', 1)[1]):02x}"
        return f"::ffff:{ip}"

    def open(self) -> Path:
        """A folder for the pods' sockets (short: a Unix socket path has at most 107 bytes)."""
        self.folder = Path(tempfile.mkdtemp(prefix="sim-net-"))
        return self.folder

    def relay_ports(self, iface: int, host_ip: str, ports: list[int]) -> None:
        """Relay a host-network pod's declared ports into the pods' network, at that pod's address."""
        assert self.folder is not None
        for port in ports:
            for family in "TX":  # socket_wrapper's name for a TCP (IPv4, IPv6) socket: <type><iface><port>
                self._relay(self.folder / f"{family}{iface:02X}{port:04X}", (host_ip, port))

    def _relay(self, path: Path, target: tuple[str, int]) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        path.chmod(0o777)  # the pods' user (sandbox.py) connects to it
        listener.listen(64)
        self._relays.append(listener)

        def connect() -> socket.socket:
            upstream = self.connect(*target, timeout=5)
            upstream.settimeout(None)
            return upstream

        relay(listener, connect)

    def close(self) -> None:
        for listener in self._relays:
            listener.close()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
        if self._holder is not None and self._requests is not None:
            self._requests.close()  # the holder ends when its requests do
            _end(self._holder)
            self._holder, self._requests, self.world = None, None, None


def _end(holder: subprocess.Popen[bytes]) -> None:
    """The holder of a world's network ended (killed after 5 s), its pipes closed."""
    try:
        holder.wait(5)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait()
    for pipe in (holder.stdout, holder.stderr):
        if pipe is not None:
            pipe.close()


def relay(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Accept on `listener` until it is closed, and pipe each connection both ways to the socket `connect()` opens
    (a connection whose other end cannot be opened, OSError, is closed at once). Each direction's thread closes the
    socket it reads when either side ends; the other thread closes the other."""

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            src.close()

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = connect()
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def port_free(ip: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False
