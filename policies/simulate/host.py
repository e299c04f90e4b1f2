"""What this machine gives a simulation: libnss_wrapper (pod names resolve), libsocket_wrapper and the C shim that
serialises its port choice (each pod gets a network of its own), the relay that brings a host-network pod's ports
into that network, and the one error a simulation that cannot run here raises."""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
NSS_WRAPPER = Path("/usr/lib/x86_64-linux-gnu/libnss_wrapper.so")
NSS_WRAPPER_CANDIDATES = (NSS_WRAPPER, Path("/usr/lib/aarch64-linux-gnu/libnss_wrapper.so"), Path("/usr/lib/libnss_wrapper.so"))
SOCKET_WRAPPER_CANDIDATES = tuple(Path(str(c).replace("libnss_wrapper", "libsocket_wrapper")) for c in NSS_WRAPPER_CANDIDATES)
# socket_wrapper's interfaces 1..64 are the addresses 127.0.0.<id> and fd00::5357:5f<id, hex>; pods start at 11
# (127.0.0.1 stays localhost).
FIRST_IFACE, LAST_IFACE = 11, 64
SERIAL_SOURCE = REPO / "policies" / "native" / "swrap_serial.c"


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
    this machine's loopback network, shared by every pod (`host_network_reason` says why)."""

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
            upstream = socket.create_connection(target, timeout=5)
            upstream.settimeout(None)
            return upstream

        relay(listener, connect)

    def close(self) -> None:
        for listener in self._relays:
            listener.close()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


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


def port_open(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.5):
            return True
    except OSError:
        return False
