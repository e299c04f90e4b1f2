"""`make simulate`: start every pod of an overlay on this machine as the controllers would create them, with the
command, arguments and env written in the manifests, each pod under its own hostname and address, and report
whether the torchrun world formed and trained. Uses the launcher model the policies read (policies/launchers/).

Names resolve through libnss_wrapper. Where libsocket_wrapper is installed each pod also gets a network of its own:
its sockets are Unix sockets named after its address, so a server listening on 0.0.0.0 in one pod answers only at
that pod's address, as in a cluster. Without it every pod shares this machine's loopback network."""
from __future__ import annotations

import argparse
import copy
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from .entry import guarded
from . import engine
from . import faults as F
from . import launchers, paths
from .kube import as_int
from .launchers import Bundle, Pod, Workload, workloads
from .launchers.lifecycle import (FAIL, RECREATE_ALL, RECREATE_POD, RESTART_CONTAINER, WAIT, Decision, PodExit,
                                  RestartCount)
from .model import ERROR, Manifest
from .rules import RULES
from .topology import compute

REPO = Path(__file__).resolve().parent.parent
NSS_WRAPPER = Path("/usr/lib/x86_64-linux-gnu/libnss_wrapper.so")
NSS_WRAPPER_CANDIDATES = (NSS_WRAPPER, Path("/usr/lib/aarch64-linux-gnu/libnss_wrapper.so"), Path("/usr/lib/libnss_wrapper.so"))
SOCKET_WRAPPER_CANDIDATES = tuple(Path(str(c).replace("libnss_wrapper", "libsocket_wrapper")) for c in NSS_WRAPPER_CANDIDATES)
# socket_wrapper's interfaces 1..64 are the addresses 127.0.0.<id> and fd00::5357:5f<id, hex>; pods start at 11
# (127.0.0.1 stays localhost).
FIRST_IFACE, LAST_IFACE = 11, 64
POD_TOKEN = "DDP_SIM_POD"
MAX_PODS = 8
# Where the image keeps the repository (Dockerfile: WORKDIR /app, code in /app/trainer).
IMAGE_ROOT = "/app"


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


SERIAL_SOURCE = Path(__file__).resolve().parent / "native" / "swrap_serial.c"


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


@dataclass
class SimPod:
    """One pod to start: where it runs, under which name and address, with which command and env."""

    pod: Pod
    workload: Workload
    training: bool
    ip: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log: Path
    ports: list[int] = field(default_factory=list)
    # Where the simulator itself reaches the pod's ports: its own address on the host network, or (a pod inside
    # socket_wrapper's network) None.
    host_ip: str | None = None
    iface: int = 0
    proc: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None
    lines: list[str] = field(default_factory=list)
    joined: bool = False
    finished_at: float | None = None
    last_words: list[str] = field(default_factory=list)
    said_waiting: bool = False
    # torchrun's own workers all exited 0 (its agent said so); what the agent logs after that is said once
    workers_succeeded: bool = False
    said_after_success: bool = False
    # Fault runs: what the simulator did to the pod (the kubelet's and controller's cause), a deletion in progress,
    # a stop the simulator asked for (not a failure), a pod that completed, how many pods stood under this name.
    fault_note: str | None = None
    deleting: bool = False
    stopping: bool = False
    done: bool = False
    generation: int = 0
    # A restart decided while a `return` fault still holds the pod away: carried out when it fires.
    held: Any = None

    # The 5 characters the API server puts where generateName ends (`<random>` in the model), fixed per pod.
    suffix: str = ""

    @property
    def name(self) -> str:
        return self.pod.name.replace("<random>", self.suffix)


# The API server's generateName alphabet (k8s.io/apimachinery/pkg/util/rand: no vowels, no confusable digits).
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def generated_suffix(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHANUMS[b % len(_ALPHANUMS)] for b in digest[:5])


# --- scaling an overlay down, only on request --------------------------------------------------------------------


def needs_scaling(bundle: Bundle) -> list[str]:
    """Why the overlay cannot run here as it is: GPU requests, more pods than this machine takes."""
    reasons = []
    for t in compute(bundle)[0]:
        if t.gpus:
            reasons.append(f"{t.manifest.ref} requests {t.gpus} GPUs per pod (this machine has none)")
        if t.pods > MAX_PODS:
            reasons.append(f"{t.manifest.ref} has {t.pods} pods (at most {MAX_PODS} run here)")
    return reasons


_FLAG_NUM = re.compile(r"(--(?:nnodes|nproc[-_]per[-_]node)[= ])(\d+(?::\d+)?)")


def scale_down(manifests: list[Manifest], nodes: int) -> tuple[list[Manifest], list[str]]:
    """A copy of the manifests with every training workload at `nodes` pods x 1 process, no GPUs, gloo.
    Returns the copy and the list of changes, which the output prints."""
    out = [Manifest(copy.deepcopy(m.obj), m.source, m.index) for m in manifests]
    changes: list[str] = []
    bundle = Bundle.of(out)
    training = {id(t.manifest.obj) for t in compute(bundle)[0]}
    for m in out:
        if id(m.obj) not in training:
            if m.kind == "ConfigMap" and (m.obj.get("data") or {}).get("DIST_BACKEND") == "nccl":
                m.obj["data"]["DIST_BACKEND"] = "gloo"
                changes.append(f"{m.ref}: DIST_BACKEND nccl -> gloo")
            continue
        launcher = launchers.of(m)
        if launcher is not None:
            changes += launcher.scale_down(m, nodes)
        for c in _containers(m.obj):
            for key in ("limits", "requests"):
                for g in launchers.GPU_RESOURCES:
                    if ((c.get("resources") or {}).get(key) or {}).pop(g, None) is not None:
                        changes.append(f"{m.ref}: container {c.get('name')} {key}.{g} removed")
            for v in c.get("env") or []:
                if v.get("name") == "NNODES" and "value" in v:
                    v["value"] = str(nodes)
                elif v.get("name") == "NPROC_PER_NODE" and "value" in v:
                    v["value"] = "1"
                elif v.get("name") == "DIST_BACKEND" and v.get("value") == "nccl":
                    v["value"] = "gloo"
            for key in ("command", "args"):
                c[key] = [_FLAG_NUM.sub(lambda mm: mm.group(1) + (str(nodes) if "nnodes" in mm.group(1) else "1"), str(t))
                          for t in c.get(key) or []] or c.get(key)
    return out, changes


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container list in a workload object, wherever its pod template sits."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("containers", "initContainers") and isinstance(v, list):
                    found.extend(c for c in v if isinstance(c, dict))
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(obj)
    return found


# --- the pods ----------------------------------------------------------------------------------------------------


class Simulation:
    def __init__(self, manifests: list[Manifest], run_dir: Path, deadline: float = 180.0,
                 out: TextIO = sys.stdout, source: str = "", python_bin: Path | None = None):
        self.manifests = manifests
        self.bundle = Bundle.of(manifests)
        self.run_dir = run_dir
        self.deadline = deadline
        self.out = out
        self.source = source
        self.bin = python_bin or Path(sys.executable).parent
        # torchrun's own rendezvous timeout, inside the deadline, so that a world that cannot form says so itself.
        self.rdzv_timeout = max(10, int(deadline * 0.6))
        self.pods: list[SimPod] = []
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self.swrap = socket_wrapper()
        self.serial = name_serializer() if self.swrap else None
        if self.swrap is None:
            self.host_network_reason = ("SIM_HOST_NETWORK=1" if os.environ.get("SIM_HOST_NETWORK") == "1"
                                        else "libsocket_wrapper is not installed")
        elif self.serial is None:
            self.swrap, self.host_network_reason = None, "no C compiler to build policies/native/swrap_serial.c"
        self.swrap_dir: Path | None = None
        self._relays: list[socket.socket] = []
        # The pods with a process left after the run stopped them (stop_all).
        self.left: list[str] = []
        self.dns: dict[str, str] = {}
        # Fault runs (policies/faults.py): the faults, env added to the training pods, what happened.
        self.faults: list[F.Fault] = []
        self.extra_env: dict[str, str] = {}
        self.step = 0
        self.epoch = 0
        self.decisions: list[str] = []
        self.outcome: tuple[str, str] | None = None
        self._timers: list[tuple[float, Any]] = []
        self._t0 = 0.0

    def say(self, text: str) -> None:
        with self._lock:
            print(text, file=self.out, flush=True)

    # DNS as the cluster would answer it: pod FQDNs only behind a headless Service that selects the pod.
    def _dns(self, pods: list[SimPod]) -> dict[str, str]:
        names: dict[str, str] = {}
        for sp in pods:
            p, w = sp.pod, sp.workload
            ns = p.namespace or "default"
            if w.managed_dns:
                bases = [w.launcher.address(w, p)]  # the controller's own Services
            elif p.subdomain and self._service_selects(p):
                bases = [f"{p.hostname}.{p.subdomain}"]
            else:
                bases = []
            for b in bases:
                for name in (b, f"{b}.{ns}", f"{b}.{ns}.svc", f"{b}.{ns}.svc.cluster.local"):
                    names[name] = sp.ip
        # Services with a cluster IP: the name answers with (here: the first of) the pods it selects.
        for (ns, svc_name), svc in self.bundle.services.items():
            spec = svc.obj.get("spec") or {}
            selector = spec.get("selector") or {}
            if spec.get("clusterIP") == "None" or not selector:
                continue
            target = next((sp for sp in pods if all(sp.pod.labels.get(k) == str(v) for k, v in selector.items())), None)
            if target:
                n = ns or "default"
                for name in (svc_name, f"{svc_name}.{n}", f"{svc_name}.{n}.svc", f"{svc_name}.{n}.svc.cluster.local"):
                    names.setdefault(name, target.ip)
        return names

    def _service_selects(self, p: Pod) -> bool:
        svc = self.bundle.services.get((p.namespace, p.subdomain or ""))
        if svc is None:
            return False
        spec = svc.obj.get("spec") or {}
        selector = spec.get("selector") or {}
        return spec.get("clusterIP") == "None" and bool(selector) and all(
            p.labels.get(str(k)) == str(v) for k, v in selector.items())

    def plan(self) -> list[SimPod]:
        training = {id(t.workload.manifest.obj) for t in compute(self.bundle)[0]}
        pods: list[SimPod] = []
        n = 0
        for w in workloads(self.bundle):
            for i in range(w.pods):
                n += 1
                pod = w.pod(i)
                sp = SimPod(pod=pod, workload=w, training=id(w.manifest.obj) in training, ip=f"127.0.1.{n}",
                            argv=[], env={}, cwd=REPO, log=REPO,
                            suffix=generated_suffix(f"{w.manifest.ref}/{i}"))
                sp.log = self.run_dir / "logs" / f"{sp.name}.log"
                pods.append(sp)
        if not pods:
            raise SimulationError("no pods: nothing in these manifests starts a pod (" +
                                  ", ".join(k for k in launchers.workload_kinds()) + ")")
        if self.swrap and len(pods) > LAST_IFACE - FIRST_IFACE + 1:
            raise SimulationError(f"{len(pods)} pods: socket_wrapper gives at most {LAST_IFACE - FIRST_IFACE + 1} "
                                  "addresses")
        any_training = any(sp.training for sp in pods)
        for k, sp in enumerate(pods):
            if not self.swrap:
                sp.host_ip = sp.ip
                continue
            sp.iface = FIRST_IFACE + k
            sp.ip = f"127.0.0.{sp.iface}"
            if any_training and not sp.training:
                # A service pod (an etcd, say) may not call the C library for its sockets (Go does not), so it runs
                # on the host network and the simulator relays its declared ports into the pods' network.
                sp.host_ip = f"127.0.1.{k + 1}"
        dns = self.dns = self._dns(pods)
        wrapper = nss_wrapper()
        for sp in pods:
            self._prepare(sp, dns, wrapper)
        self.pods = pods
        return pods

    def _prepare(self, sp: SimPod, dns: dict[str, str], wrapper: Path) -> None:
        p = sp.pod
        pod_dir = self.run_dir / "pods" / sp.name
        mapping: dict[str, Path] = {IMAGE_ROOT: REPO}
        volumes = {v.get("name"): v for v in p.spec.get("volumes") or []}
        for vm in p.container.get("volumeMounts") or []:
            vol = volumes.get(vm.get("name")) or {}
            if "persistentVolumeClaim" in vol:
                host = self.run_dir / "pvc" / str(vol["persistentVolumeClaim"].get("claimName"))
            else:
                host = pod_dir / "volumes" / str(vm.get("name"))
            host.mkdir(parents=True, exist_ok=True)
            if "configMap" in vol:
                for k, v in (self.bundle.configmaps.get(str(vol["configMap"].get("name"))) or {}).items():
                    (host / k).write_text(v)
            mapping[str(vm.get("mountPath")).rstrip("/") or "/"] = host
        sp.cwd = self._map_path(str(p.container.get("workingDir") or IMAGE_ROOT), mapping)
        env: dict[str, str] = {}
        for k, v in p.env.items():
            if v is None:
                v = self._runtime_value(p, k, sp)
            if v is not None:
                env[k] = self._rewrite(str(v).replace("<random>", sp.suffix), mapping)
        argv, _ = p.argv()
        sp.argv = [self._rewrite(t.replace("<random>", sp.suffix), mapping) for t in argv]
        hosts = pod_dir / "hosts"
        hosts.parent.mkdir(parents=True, exist_ok=True)
        # Like the kubelet's /etc/hosts: the pod's own FQDN first (socket.getfqdn() answers with it, and c10d
        # hands it to the workers as MASTER_ADDR), then its short hostname; then what cluster DNS would answer.
        ns = p.namespace or "default"
        own = f"{p.hostname}.{p.subdomain}.{ns}.svc.cluster.local {p.hostname}" if p.subdomain else p.hostname
        # torch's TCPStore client asks for IPv6 first, and libuv's server listens on "::": every name has both.
        lines = [line for ip in (sp.ip,) for line in (f"{ip} {own}", f"{self._ipv6(ip)} {own}")]
        for name, ip in sorted(dns.items()):
            lines += [f"{ip} {name}", f"{self._ipv6(ip)} {name}"]
        lines.append("127.0.0.1 localhost")
        hosts.write_text("\n".join(lines) + "\n")
        wrapped = self.swrap is not None and sp.host_ip is None
        env.update({
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "HOSTNAME": p.hostname,
            "LD_PRELOAD": f"{self.serial} {self.swrap} {wrapper}" if wrapped else str(wrapper),
            "NSS_WRAPPER_HOSTS": str(hosts),
            "NSS_WRAPPER_HOSTNAME": p.hostname,
            "PYTHONUNBUFFERED": "1",
            "LOGLEVEL": env.get("LOGLEVEL", "INFO"),
        })
        # Marks every process of this pod, so that the simulator can stop all of them, wherever they were reparented.
        env[POD_TOKEN] = f"{os.getpid()}-{id(self)}-{sp.name}"
        if wrapped:
            env["SOCKET_WRAPPER_DEFAULT_IFACE"] = str(sp.iface)  # SOCKET_WRAPPER_DIR: set when the run starts
        if sp.training and "PET_RDZV_CONF" not in env and not any(t.startswith("--rdzv-conf") or
                                                                   t.startswith("--rdzv_conf") for t in sp.argv):
            env["PET_RDZV_CONF"] = f"join_timeout={self.rdzv_timeout},timeout={self.rdzv_timeout}"
        if sp.training:
            env.update(self.extra_env)
        sp.env = env
        sp.ports = [as_int(port.get("containerPort"), 0) or 0 for port in p.container.get("ports") or []]

    def _ipv6(self, ip: str) -> str:
        """The IPv6 address of a pod: socket_wrapper's fd00::5357:5f<iface> for its network, else IPv4-mapped."""
        if self.swrap and ip.startswith("127.0.0."):
            return f"fd00::5357:5f{int(ip.rsplit('.', 1)[1]):02x}"
        return f"::ffff:{ip}"

    def _runtime_value(self, p: Pod, name: str, sp: SimPod) -> str | None:
        for var in p.container.get("env") or []:
            if var.get("name") == name:
                path = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
                if path in ("status.podIP", "status.hostIP"):
                    return sp.ip
                if path == "spec.nodeName":
                    return f"sim-node-{p.index}"
        return None

    @staticmethod
    def _map_path(path: str, mapping: dict[str, Path]) -> Path:
        for cpath in sorted(mapping, key=len, reverse=True):
            if path == cpath or path.startswith(cpath.rstrip("/") + "/"):
                return Path(str(mapping[cpath]) + path[len(cpath.rstrip("/")):])
        return Path(path)

    @staticmethod
    def _rewrite(text: str, mapping: dict[str, Path]) -> str:
        """Every in-pod path in `text` as its host folder, in one pass: a path already mapped is never mapped again
        (a run folder under /tmp, once /out is mapped into it, is not then taken for the pod's /tmp volume)."""
        paths = [c for c in sorted(mapping, key=len, reverse=True) if c not in ("", "/")]
        if not paths:
            return text
        pattern = re.compile(r"(?<![\w.\-/])(" + "|".join(map(re.escape, paths)) + r")(?=/|$|[\s:;,'\"=])")
        return pattern.sub(lambda m: str(mapping[m.group(1)]), text)

    # --- running ---------------------------------------------------------------------------------------------

    def _check_ports(self) -> None:
        busy = []
        for sp in self.pods:
            for port in sp.ports:
                if port and sp.host_ip and not _port_free(sp.host_ip, port):
                    busy.append(f"{sp.host_ip}:{port} ({sp.name})")
        if busy:
            raise SimulationError(f"ports already in use on this machine: {', '.join(busy)}")

    def _start(self, sp: SimPod) -> None:
        sp.log.parent.mkdir(parents=True, exist_ok=True)
        exe = shutil.which(sp.argv[0], path=sp.env["PATH"]) if sp.argv else None
        if not sp.argv or exe is None:
            sp.exit_code = 127
            sp.lines.append(f"simulate: executable '{sp.argv[0] if sp.argv else '(no command)'}' not found here")
            self.say(f"[{sp.name}] {sp.lines[-1]}")
            return
        sp.proc = subprocess.Popen([exe, *sp.argv[1:]], cwd=sp.cwd, env=sp.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        threading.Thread(target=self._pump, args=(sp,), daemon=True).start()

    def _pump(self, sp: SimPod) -> None:
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
                if self.faults and sp.training:
                    self._progress(line)
                waiting = _WAITING.search(line)
                if waiting and not sp.said_waiting:
                    sp.said_waiting = True
                    host, port = waiting.groups()
                    peer = next((p.name for p in self.pods if self.dns.get(host) == p.ip), host)
                    self.say(f"[{sp.name}] waiting for {peer} ({host}:{port}): nothing listens there yet; torch's "
                             f"connection retries go to {sp.log}")
                if "worker group successfully finished" in line:
                    sp.workers_succeeded = True
                if sp.workers_succeeded and _TORCH_LOG.match(line):
                    # torch 2.13's exit barrier: the last agent to arrive still waits on the store after its host's
                    # agent has passed the barrier and left, and logs the broken connection (sendBytes failed, the
                    # barrier's traceback, a failed heartbeat). The workers are done: one line here, all in the log.
                    if not sp.said_after_success:
                        sp.said_after_success = True
                        why = (": the rendezvous store was gone, its host having left first (torch 2.13's exit "
                               "barrier races with it)" if _STORE_GONE.search(line) else "")
                        self.say(f"[{sp.name}] torchrun logged warnings after its workers had succeeded{why}; "
                                 f"they are in {sp.log}")
                    continue
                if _noise(line) or not line.strip():
                    continue
                self.say(f"[{sp.name}] {line}")

    def _stop(self, sp: SimPod) -> None:
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
        for pid in _processes_with(POD_TOKEN, sp.env.get(POD_TOKEN, "")):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # --- socket_wrapper's network ----------------------------------------------------------------------------

    def _open_network(self) -> None:
        """A folder for the pods' sockets (short: a Unix socket path has at most 107 bytes), and a relay from each
        host-network pod's declared ports into it, at that pod's address."""
        self.swrap_dir = Path(tempfile.mkdtemp(prefix="sim-net-"))
        for sp in self.pods:
            if sp.host_ip is None:
                sp.env["SOCKET_WRAPPER_DIR"] = str(self.swrap_dir)
                continue
            for port in sp.ports:
                for family in "TX":  # socket_wrapper's name for a TCP (IPv4, IPv6) socket: <type><iface><port>
                    self._relay(self.swrap_dir / f"{family}{sp.iface:02X}{port:04X}", (sp.host_ip, port))

    def _relay(self, path: Path, target: tuple[str, int]) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(64)
        self._relays.append(listener)

        def connect() -> socket.socket:
            upstream = socket.create_connection(target, timeout=5)
            upstream.settimeout(None)
            return upstream

        relay(listener, connect)

    def _close_network(self) -> None:
        for listener in self._relays:
            listener.close()
        if self.swrap_dir:
            shutil.rmtree(self.swrap_dir, ignore_errors=True)

    def run(self) -> "Result":
        self._check_ports()
        if self.swrap:
            self._open_network()
        try:
            return self._run()
        finally:
            self._close_network()

    def _run(self) -> "Result":
        start = time.monotonic()
        services = [sp for sp in self.pods if not sp.training]
        trainers = [sp for sp in self.pods if sp.training]
        if not trainers:  # no torchrun world here: run every pod as written and wait for all of them
            services, trainers = [], list(self.pods)
        timed_out = False
        try:
            for sp in services:
                self._start(sp)
            for sp in services:  # readiness, as far as this machine can tell: the declared ports accept connections
                for port in sp.ports:
                    while (port and sp.host_ip and time.monotonic() - start < min(30.0, self.deadline)
                           and not _port_open(sp.host_ip, port)):
                        if sp.proc and sp.proc.poll() is not None:
                            break
                        time.sleep(0.2)
            timed_out = self._run_faulted(start, trainers) if self.faults else self._run_plain(start, trainers)
        finally:
            for sp in self.pods:
                # What each pod last said on its own, before the simulator stops it (and it prints its exit).
                sp.last_words = _last_words(sp.lines)
            self.stop_all()
            time.sleep(0.1)
        return Result(self, timed_out, time.monotonic() - start)

    def _run_plain(self, start: float, trainers: list[SimPod]) -> bool:
        """Start the training pods and wait for them; True when the deadline stopped the run."""
        timed_out = False
        for sp in trainers:
            self._start(sp)
        while True:
            for sp in self.pods:
                if sp.proc is not None and sp.exit_code is None and sp.proc.poll() is not None:
                    sp.exit_code = sp.proc.returncode
                    sp.finished_at = time.monotonic() - start
            if all(sp.exit_code is not None for sp in trainers):
                break
            if any(sp.exit_code not in (None, 0) for sp in trainers) and all(
                    sp.exit_code is not None or not sp.training for sp in trainers):
                break
            if time.monotonic() - start > self.deadline:
                timed_out = True
                break
            time.sleep(0.2)
        # A failed pod in a gang: the others cannot finish; give them a moment to fail on their own.
        if not timed_out and any(sp.exit_code not in (None, 0) for sp in trainers):
            grace = time.monotonic() + 10
            while time.monotonic() < grace and any(sp.exit_code is None for sp in trainers):
                for sp in trainers:
                    if sp.proc is not None and sp.exit_code is None and sp.proc.poll() is not None:
                        sp.exit_code = sp.proc.returncode
                time.sleep(0.2)
        return timed_out

    # --- fault runs (policies/faults.py): inject, then do what the kubelet and the controller would ---------------

    def _later(self, at: float, action: Any) -> None:
        with self._lock:
            self._timers.append((at, action))

    def _progress(self, line: str) -> None:
        """The trainer's step and epoch as rank 0 prints them; fires the faults they make due (from the pump
        thread, so that a fault lands at the step it names, not a poll later)."""
        m = _STEP.search(line)
        if m:
            self.step = max(self.step, int(m.group(1))) if not line.startswith("[DDP] resume") else int(m.group(1))
        e = _EPOCH_END.search(line)
        if e:
            self.epoch = int(e.group(1))
        for f in self.faults:
            if f.fired or f.when not in ("step", "epoch"):
                continue
            if (f.when == "step" and m and int(m.group(1)) >= (f.at or 0)) or (
                    f.when == "epoch" and e and int(e.group(1)) >= (f.at or 0)):
                self._inject(f)

    def _trainers(self) -> list[SimPod]:
        return [sp for sp in self.pods if sp.training]

    def _inject(self, f: F.Fault) -> None:
        with self._lock:
            if f.fired:
                return
            f.fired = True
        sp = self._trainers()[f.target]
        where = f"{f.trigger()}" + (f" (trainer at step {self.step})" if f.when != "step" else "")
        pids = _processes_with(POD_TOKEN, sp.env.get(POD_TOKEN, ""))
        if f.action == F.KILL:
            sp.fault_note = f"killed {where}"
            self.say(f"[sim] fault {f.text}: SIGKILL to every process of pod {sp.name} ({len(pids)})")
            for pid in pids:
                _signal(pid, signal.SIGKILL)
        elif f.action == F.KILL_WORKER:
            workers = [pid for pid in pids if sp.proc is not None and _parent(pid) == sp.proc.pid]
            if not workers:
                self.say(f"[sim] fault {f.text}: pod {sp.name} has no worker process now: nothing killed")
                return
            sp.fault_note = f"lost a worker {where}"
            self.say(f"[sim] fault {f.text}: SIGKILL to worker process {workers[-1]} of pod {sp.name}")
            _signal(workers[-1], signal.SIGKILL)
        elif f.action == F.TERM:
            grace = float(as_int(sp.pod.spec.get("terminationGracePeriodSeconds"), 30) or 0)
            sp.fault_note, sp.deleting = f"deleted (SIGTERM, grace {grace:g} s) {where}", True
            self.say(f"[sim] fault {f.text}: pod {sp.name} deleted: SIGTERM to its container, SIGKILL in {grace:g} s "
                     "(terminationGracePeriodSeconds)")
            if sp.proc is not None:
                _signal(sp.proc.pid, signal.SIGTERM)
            proc = sp.proc
            self._later(time.monotonic() + grace, lambda: self._kill_rest(sp, proc))
        elif f.action == F.PARTITION:
            self.say(f"[sim] fault {f.text}: pod {sp.name} unreachable for {f.seconds:g} s {where}: {F.PARTITION_MODEL}")
            for pid in pids:
                _signal(pid, signal.SIGSTOP)

            def resume() -> None:
                for pid in _processes_with(POD_TOKEN, sp.env.get(POD_TOKEN, "")):
                    _signal(pid, signal.SIGCONT)
                self.say(f"[sim] pod {sp.name} reachable again")
            self._later(time.monotonic() + (f.seconds or 0), resume)
        elif f.action == F.RETURN:
            with self._lock:  # against _decide holding the pod at the same moment (f.fired is set by now)
                held, sp.held = sp.held, None
            self.say(f"[sim] fault {f.text}: pod {sp.name} may come back {where}"
                     + ("" if held else " (nothing pending: it was not down)"))
            if held:
                held()

    def _kill_rest(self, sp: SimPod, proc: subprocess.Popen[bytes] | None) -> None:
        """The end of a deleted pod's grace period: SIGKILL to whatever of it still runs."""
        if proc is not None and sp.proc is proc:
            for pid in _processes_with(POD_TOKEN, sp.env.get(POD_TOKEN, "")):
                _signal(pid, signal.SIGKILL)

    def _run_faulted(self, start: float, trainers: list[SimPod]) -> bool:
        """Start the training pods (late where a delay fault says), inject the faults, and after each pod that ends
        do what its launcher module says the kubelet and the controller do, until the world finishes, the
        controller fails it, or the deadline comes (a world that hangs). True when the deadline stopped it."""
        self._t0 = time.monotonic()
        delayed = {f.target: f for f in self.faults if f.action == F.DELAY}
        for i, sp in enumerate(trainers):
            if i in delayed:
                f = delayed[i]
                f.fired = True
                self.say(f"[sim] fault {f.text}: pod {sp.name} starts {f.seconds:g} s after the others")
                self._later(self._t0 + (f.seconds or 0), lambda sp=sp: self._start(sp))
            else:
                self._start(sp)
        for f in self.faults:
            if f.when == "t":
                self._later(self._t0 + (f.at or 0), lambda f=f: self._inject(f))
        counts: dict[int, RestartCount] = {}
        while True:
            now = time.monotonic()
            with self._lock:
                due = [a for t, a in self._timers if t <= now]
                self._timers = [(t, a) for t, a in self._timers if t > now]
            for action in due:
                action()
            for sp in trainers:
                if sp.proc is None or sp.exit_code is not None or sp.proc.poll() is None:
                    continue
                rc = sp.proc.returncode
                sp.exit_code = 128 - rc if rc < 0 else rc
                sp.finished_at = now - start
                if sp.stopping:
                    continue
                if sp.exit_code == 0 and not sp.deleting:
                    sp.done = True
                    continue
                count = counts.setdefault(id(sp.workload), RestartCount())
                self._decide(sp, count, now)
                if self.outcome is not None:
                    return False
                if count.container_restarts.get(sp.pod.index, 0) + count.failed_pods.get(sp.pod.index, 0) > CRASH_LOOP:
                    # Started CRASH_LOOP times after the fault and failed each time: the kubelet's CrashLoopBackOff,
                    # which nothing ends on its own; the run says so now rather than at the deadline.
                    last = next(iter(_last_words(sp.lines)), "")
                    self.outcome = ("hung", f"{sp.name} failed again after each of {CRASH_LOOP} restarts: a crash loop "
                                    f"(CrashLoopBackOff) that nothing ends{': ' + last[:160] if last else ''}")
                    return False
            if all(sp.done for sp in trainers):
                self.outcome = ("finished", "every training pod completed")
                return False
            if now - start > self.deadline:
                waiting = [sp.name for sp in trainers if not sp.done]
                self.outcome = ("hung", f"{', '.join(waiting)} had not completed at the deadline")
                return True
            time.sleep(0.1)

    def _decide(self, sp: SimPod, count: RestartCount, now: float) -> None:
        w = sp.workload
        ended = PodExit(sp.pod.index, sp.exit_code or 0, sp.deleting)
        d: Decision = w.launcher.after_exit(w, self.bundle, ended, count)
        cause = sp.fault_note or f"exited {sp.exit_code}"
        sp.fault_note, sp.deleting = None, False
        line = f"pod {sp.name} {cause} -> {d.controller}: {d.why}"
        self.decisions.append(f"{line} [{d.source}]" if d.source else line)
        self.say(f"[sim] {line}" + (f"  ({d.source})" if d.source else ""))
        away = next((f for f in self.faults if f.action == F.RETURN and not f.fired and
                     self._trainers()[f.target] is sp), None)

        def after(delay: float, action: Any) -> None:
            with self._lock:  # the return fault fires from the output pump's thread
                hold = away is not None and not away.fired
                if hold:  # its node is away: the decision waits for the return fault (then its back-off)
                    sp.held = lambda: self._later(time.monotonic() + delay, action)
            if hold:
                self.say(f"[sim] pod {sp.name} stays away until {away.text} fires")
            else:
                self._later(now + delay, action)

        if d.action == RESTART_CONTAINER:
            count.container_restarts[ended.index] = count.container_restarts.get(ended.index, 0) + 1
            after(d.delay, lambda: self._restart(sp, new_pod=False))
        elif d.action == RECREATE_POD:
            if d.counted:
                count.failed_pods[ended.index] = count.failed_pods.get(ended.index, 0) + 1
            after(d.delay, lambda: self._restart(sp, new_pod=True))
        elif d.action == RECREATE_ALL:
            if d.counted:
                count.workload_restarts += 1
            group = [p for p in self._trainers() if p.workload is w]
            for p in group:
                if p is not sp and p.proc is not None and p.proc.poll() is None:
                    p.stopping = True
                    self._stop(p)
            for p in group:
                self._later(now + d.delay, lambda p=p: self._restart(p, new_pod=True))
        elif d.action == FAIL:
            self.outcome = ("failed", f"{d.controller}: {d.why}")
        elif d.action == WAIT:
            sp.done = False  # nothing brings it back: the world waits (the deadline says so)

    def _restart(self, sp: SimPod, new_pod: bool) -> None:
        """Start the pod's container again: in place (same pod, same volumes) or as a new pod (the controller's: a
        new generated name where the pod has one, fresh emptyDirs, the same claims)."""
        for pid in _processes_with(POD_TOKEN, sp.env.get(POD_TOKEN, "")):  # the container's cgroup is gone
            _signal(pid, signal.SIGKILL)
        token = sp.env.get("SOCKET_WRAPPER_DIR")
        old = sp.name
        if new_pod:
            sp.generation += 1
            if "<random>" in sp.pod.name:
                sp.suffix = generated_suffix(f"{sp.workload.manifest.ref}/{sp.pod.index}/{sp.generation}")
            else:
                shutil.rmtree(self.run_dir / "pods" / sp.name / "volumes", ignore_errors=True)  # emptyDirs start empty
            sp.log = self.run_dir / "logs" / f"{sp.name}.log"
            self._prepare(sp, self.dns, nss_wrapper())
            if token:
                sp.env["SOCKET_WRAPPER_DIR"] = token
        sp.proc, sp.exit_code, sp.joined, sp.stopping, sp.done, sp.said_waiting = None, None, False, False, False, False
        what = f"new pod {sp.name}" + (f" (replaces {old})" if old != sp.name else "") if new_pod else \
            f"pod {sp.name}: container restarted"
        self.say(f"[sim] {what}")
        self._start(sp)

    def stop_all(self) -> list[str]:
        """Stop every pod at once (see _stop) and check that none of their processes is left; the pods that still
        have one (none, unless a process outlives SIGKILL)."""
        live = [sp for sp in self.pods if sp.proc is not None and sp.proc.poll() is None]
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
            for sp in self.pods:
                pids = _processes_with(POD_TOKEN, sp.env.get(POD_TOKEN, ""))
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
        self.left = left
        return left


def _processes_with(name: str, value: str) -> list[int]:
    """The processes whose environment holds name=value (children inherit it, whoever their parent is now)."""
    if not value:
        return []
    needle = b"\0" + f"{name}={value}".encode() + b"\0"
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


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


# A pod restarted this many times after a fault that fails once more is in a crash loop (the kubelet's
# CrashLoopBackOff): the run ends there as hung.
CRASH_LOOP = 3

# What rank 0 prints of its progress: [TRAIN] ... step=N, [EPOCH] epoch=N/M step=N, [DDP] resume ... step=N.
_STEP = re.compile(r"^\[(?:TRAIN|EPOCH|DDP)\] .*?\bstep=(\d+)\b")
_EPOCH_END = re.compile(r"^\[EPOCH\] epoch=(\d+)/")

_EXC = re.compile(r"^[\w.]+(Error|Exception|Timeout)\b")


def _last_words(lines: list[str]) -> list[str]:
    """A pod's last lines worth reading: the last exception it raised (not the traceback frames), then its last line."""
    clean = [ln for ln in lines if ln.strip() and not _noise(ln)]
    exc = [ln for ln in clean[-80:] if _EXC.match(ln.strip())]
    out = [exc[-1].strip()] if exc else []
    out += [ln for ln in clean[-2:] if ln.strip() not in out and not ln.startswith(("  File ", "    "))]
    return out[-3:]


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


def _noise(line: str) -> bool:
    """torchrun's INFO chatter, c10d's IPv6 lookup warnings and the store client's retries (with their C++ stacks)
    stay in the pod log, not on the terminal."""
    return ("cannot be retrieved (gai error: -9" in line or line.startswith(("I1", "I0")) or "*****" in line
            or "OMP_NUM_THREADS" in line or bool(_STORE_RETRY.match(line)) or bool(_CPP_STACK.match(line))
            or "has failed to shutdown the rendezvous" in line)


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


def _port_free(ip: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def _port_open(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.5):
            return True
    except OSError:
        return False


_DDP = re.compile(r"\[DDP\] world=(\d+)")
_DONE = re.compile(r"\[DONE\] (.*)")


@dataclass
class Result:
    sim: Simulation
    timed_out: bool
    seconds: float

    @property
    def trainers(self) -> list[SimPod]:
        """The pods the run waits for: the training pods, or every pod where none trains."""
        return [sp for sp in self.sim.pods if sp.training] or list(self.sim.pods)

    @property
    def ok(self) -> bool:
        if self.sim.outcome is not None:
            return self.sim.outcome[0] == "finished"
        return not self.timed_out and bool(self.trainers) and all(sp.exit_code == 0 for sp in self.trainers)

    def world_size(self) -> int | None:
        for sp in self.trainers:
            for line in sp.lines:
                m = _DDP.search(line)
                if m:
                    return int(m.group(1))
        return None

    def done_line(self) -> str | None:
        for sp in self.trainers:
            for line in sp.lines:
                m = _DONE.search(line)
                if m:
                    return m.group(1)
        return None

    def report(self, static_problems: list[str]) -> str:
        rows = []
        for sp in self.sim.pods:
            if sp.exit_code is not None:
                state = f"exit {sp.exit_code}"
            elif sp.training:
                state = "stopped at the deadline" if self.timed_out else "stopped after a peer failed"
            else:
                state = "stopped after the trainers"
            last = next((ln for ln in reversed(sp.lines) if ln.strip() and not _noise(ln)), "")
            rows.append((sp.name, sp.ip, "trainer" if sp.training else "service", state,
                         "yes" if sp.joined else ("-" if not sp.training else "no"), last[:140]))
        width = [max(len(r[i]) for r in rows + [("pod", "address", "role", "state", "joined", "")]) for i in range(5)]
        lines = ["", "== simulation summary"]
        lines.append("  ".join(h.ljust(w) for h, w in zip(("pod", "address", "role", "state", "joined"), width)))
        for r in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r[:5], width)))
        world = self.world_size()
        verdict = "PASSED" if self.ok else ("FAILED: deadline reached" if self.timed_out else "FAILED")
        lines.append(f"pods: {len(self.sim.pods)} ({len(self.trainers)} training); world size reached: "
                     f"{world if world is not None else 'none'}; {self.seconds:.1f} s")
        done = self.done_line()
        if done:
            lines.append(f"trainer: {done}")
        if not self.ok:
            lines.append("diagnosis:")
            joined = [sp.name for sp in self.trainers if sp.joined]
            missing = [sp.name for sp in self.trainers if not sp.joined]
            lines.append(f"  joined the rendezvous: {', '.join(joined) or 'none'}; did not: {', '.join(missing) or 'none'}")
            for sp in self.trainers:
                if sp.exit_code != 0:
                    for ln in sp.last_words or ["(printed nothing)"]:
                        lines.append(f"  [{sp.name}] {ln[:220]}")
            if static_problems:
                lines.append("  the static checks (make validate) say:")
                lines += [f"    {p}" for p in static_problems]
            else:
                lines.append("  the static checks (make validate) found no error: the problem is outside the manifests "
                             "(image, script, data), see the pod logs")
        elif static_problems:
            # The run cannot show everything (ports, NetworkPolicies, security settings): never pass it silently.
            lines.append(f"the run trained, but the static checks (make validate) report {len(static_problems)} "
                         f"error{'s' if len(static_problems) != 1 else ''} this machine cannot show:")
            lines += [f"  {p}" for p in static_problems]
            verdict = f"PASSED (the run only; make validate fails on the {len(static_problems)} above)"
        lines.append(f"{verdict}: logs in {self.sim.run_dir / 'logs'}")
        return "\n".join(lines)


def seed_pvcs(run_dir: Path, pvcs: list[str]) -> list[str]:
    """Copy a folder into a claim's volume before the pods start (--pvc CLAIM=FOLDER): the data or model
    a PVC holds on the cluster (make tiny-lm's models/ and data/ for the causal-lm overlay)."""
    seeded = []
    for item in pvcs:
        claim, sep, folder = item.partition("=")
        src = Path(folder)
        if not sep or not claim or not src.is_dir():
            raise SimulationError(f"--pvc {item!r}: expected CLAIM=FOLDER with an existing folder")
        shutil.copytree(src, run_dir / "pvc" / claim, dirs_exist_ok=True)
        seeded.append(f"{claim} <- {src}")
    return seeded


# Written into every run folder the simulator makes: the only folders it ever empties.
RUN_MARKER = ".ddp-sim-run"
# What a run folder of an earlier version (before the marker) held: emptied only under the checkout's .sim/.
_LEGACY_RUN_ENTRIES = {"logs", "pods", "pvc"}


def prepare_run_dir(run_dir: Path) -> None:
    """An empty run folder, marked as the simulator's. An existing folder is emptied only when the simulator made it
    (its marker), never when it holds the repository or a .git; anything else is refused before a pod starts."""
    where = run_dir.resolve()
    if where.exists() and not where.is_dir():
        raise SimulationError(f"--run-dir {run_dir}: is a file, not a folder")
    if where == REPO or REPO.is_relative_to(where):
        raise SimulationError(f"--run-dir {run_dir}: holds this repository ({REPO}); the simulator empties its run "
                              "folder: give a folder of its own (default .sim/<overlay>)")
    if where.is_dir():
        entries = {e.name for e in where.iterdir()}
        if ".git" in entries:
            raise SimulationError(f"--run-dir {run_dir}: holds a .git; the simulator empties its run folder: give a "
                                  "folder of its own (default .sim/<overlay>)")
        legacy = where.parent.is_relative_to(REPO / ".sim") and entries <= _LEGACY_RUN_ENTRIES
        if entries and RUN_MARKER not in entries and not legacy:
            raise SimulationError(f"--run-dir {run_dir}: exists, is not empty and was not made by the simulator (no "
                                  f"{RUN_MARKER} in it): give a new or empty folder, or remove this one yourself")
        for e in where.iterdir():  # the folder itself stays: a user may have made it (empty)
            if e.is_dir() and not e.is_symlink():
                shutil.rmtree(e)
            else:
                e.unlink()
    where.mkdir(parents=True, exist_ok=True)
    (where / RUN_MARKER).write_text("made by `python -m policies.simulate`; emptied by its next run into this "
                                    "folder\n")


def default_run_dir(source: str) -> Path:
    """.sim/<overlay>, named from where the overlay is (`..` from an overlay's patches/ names that overlay)."""
    path = Path(source).resolve()
    try:
        name = str(path.relative_to(REPO / "overlays"))
    except ValueError:
        name = path.name or "run"
    return REPO / ".sim" / (re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip(".") or "run")


def positive_seconds(text: str, what: str = "DEADLINE") -> float:
    """A deadline as given on the command line or in DEADLINE: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value <= 7 * 24 * 3600):
        raise SimulationError(f"{what} must be a positive number of seconds (at most a week), got {text!r}")
    return value


def simulate(source: str, run_dir: Path, deadline: float, scale_to: int | None, out: TextIO = sys.stdout,
             fault_spec: str | None = None, pvcs: list[str] | None = None) -> int:
    faults = F.parse(fault_spec) if fault_spec is not None else []
    units = engine.collect([source], REPO / "overlays")
    if len(units) != 1:
        raise SimulationError(f"{source}: names {len(units)} overlays; simulate one at a time")
    unit = units[0]
    if unit.failed_input:
        first = unit.problems[0]  # the input's own error (file and line), without the report's severity and rule
        raise SimulationError(first.line().removeprefix(f"{first.severity} {first.rule} "))
    manifests = unit.manifests
    bundle = Bundle.of(manifests)
    reasons = needs_scaling(bundle)
    if reasons and scale_to is None:
        raise SimulationError(f"{source} cannot run on this machine as written: {'; '.join(reasons)}. "
                              f"Set SCALE_TO=<pods> to run it scaled down (1 process per pod, no GPUs, gloo)")
    if scale_to is not None:
        if scale_to < 1:
            raise SimulationError(f"SCALE_TO must be a positive number of pods, got {scale_to}")
        manifests, changes = scale_down(manifests, scale_to)
        print(f"simulate: SCALED DOWN on request to {scale_to} pods; not the overlay as written:", file=out)
        for c in changes:
            print(f"  {c}", file=out)
    # The same static checks `make validate` runs, for the diagnosis.
    check = engine.Unit(source, "overlay", manifests)
    engine.check_policies(check)
    static_problems = [p.line() for p in check.problems if p.severity == ERROR]
    sim = Simulation(manifests, run_dir, deadline, out, source)
    if faults:
        sim.faults = faults
        if any(f.when == "step" for f in faults):
            sim.extra_env["LOG_INTERVAL"] = "1"  # the trainer reports every step: a step fault lands on its step
    prepare_run_dir(run_dir)
    for line in seed_pvcs(run_dir, pvcs or []):
        print(f"simulate: PVC {line} (copied before the pods start)", file=out)
    pods = sim.plan()
    if faults:
        check_faults(sim, faults, check)
    print(f"simulate: {source}: {len(pods)} pods; deadline {deadline:.0f} s; run folder {run_dir}", file=out)
    print(f"simulate: {IMAGE_ROOT} is mapped to the checkout {REPO}; volumes to folders under {run_dir} "
          "(emptyDir per pod, each PVC shared by claim name); pod names resolve through libnss_wrapper, only where "
          "a headless Service (or the launcher's own) publishes them", file=out)
    if sim.swrap:
        print("simulate: network: each pod has its own address (libsocket_wrapper, 127.0.0.11 on): a port is open "
              "only at the address of the pod that listens on it; pods that do not train (an etcd) run on the host "
              "network and their declared ports are relayed to their address", file=out)
    else:
        print(f"simulate: network: every pod shares this machine's loopback network ({sim.host_network_reason}): a "
              "port open in one pod answers at every pod's address", file=out)
    print("simulate: added to each pod's env: LOGLEVEL=INFO (to see who joined), PYTHONUNBUFFERED=1 and, where the "
          f"manifest sets no rendezvous config, PET_RDZV_CONF=join_timeout={sim.rdzv_timeout},timeout={sim.rdzv_timeout}"
          " (short rendezvous timeouts, so a world that cannot form fails inside the deadline)", file=out)
    for sp in pods:
        where = f", on the host network at {sp.host_ip}, ports relayed" if sim.swrap and sp.host_ip else ""
        print(f"simulate: pod {sp.name} ({sp.ip}, {'trainer' if sp.training else 'service'}{where}): "
              f"{' '.join(sp.argv)[:200]}", file=out)
    try:
        result = sim.run()
    except Stopped as stop:  # every pod was stopped on the way out (Simulation._run)
        name = signal.Signals(stop.signum).name
        if sim.left:
            print(f"simulate: stopped by {name}; processes of {', '.join(sim.left)} are still running", file=out)
        else:
            print(f"simulate: stopped by {name}; every process of every pod stopped, none left", file=out)
        return 128 + stop.signum
    print(result.report(static_problems), file=out)
    if faults:
        print(fault_report(sim, check), file=out)
    from trainer.report import for_folder  # matplotlib only when a run gets this far

    for line in for_folder(run_dir):
        print(line, file=out)
    return 0 if result.ok else 1


def check_faults(sim: Simulation, faults: list[F.Fault], check: engine.Unit) -> None:
    """Each fault names a training pod and a step inside the run (before any pod starts); print what is injected."""
    trainers = [sp for sp in sim.pods if sp.training]
    if not trainers:
        raise F.FaultError("FAULT: nothing trains in these manifests: no pod to inject a fault into")
    F.resolve(faults, [(sp.name, sp.pod.hostname) for sp in trainers])
    plan = planned(sim)
    for f in faults:
        if plan is not None and f.when in ("step", "epoch"):
            per_epoch, epochs, total = plan
            last = total if f.when == "step" else epochs
            if (f.at or 0) > last - (1 if f.when == "epoch" else 0) or (f.when == "step" and (f.at or 0) >= total):
                raise F.FaultError(f"FAULT {f.text!r}: the run ends at step {total} (epoch {epochs}, {per_epoch} steps "
                                   f"an epoch): a fault {f.trigger()} would never fire")
    print("simulate: faults: " + "; ".join(f"{f.text} ({f.action} pod {trainers[f.target].name} {f.trigger()})"
                                          for f in faults), file=sim.out)
    if plan is not None:
        print(f"simulate: the trainer runs {plan[2]} steps ({plan[1]} epochs of {plan[0]})", file=sim.out)
    if sim.extra_env:
        print("simulate: added to each training pod's env for the faults: " +
              " ".join(f"{k}={v}" for k, v in sim.extra_env.items()) + " (the trainer reports every step)",
              file=sim.out)


def planned(sim: Simulation) -> tuple[int, int, int] | None:
    """(steps per epoch, epochs, total steps) of the repository's trainer in these pods, where it can be known."""
    tops = compute(sim.bundle)[0]
    sp = next((p for p in sim.pods if p.training), None)
    if sp is None or not tops or not any(t.endswith("train.py") for t in sp.argv):
        return None
    script = next(i for i, t in enumerate(sp.argv) if t.endswith("train.py"))
    world = tops[0].world_size
    if not isinstance(world, int) or world < 1:
        return None
    return F.planned_steps(sp.argv[script + 1:], sp.env, world)


def fault_report(sim: Simulation, check: engine.Unit) -> str:
    """The outcome of a faulted run, its steps from the trainer's metrics.jsonl, and what the RESTART and ELASTIC
    rules predicted for the same manifests."""
    lines = ["", "== faults"]
    lines += [f"  {d}" for d in sim.decisions] or ["  (no pod ended before the run did)"]
    unfired = [f.text for f in sim.faults if not f.fired]
    if unfired:
        lines.append(f"  not injected (the run ended first): {', '.join(unfired)}")
    kind, why = sim.outcome or ("stopped", "the run was stopped")
    plan = planned(sim)
    expected = plan[2] if plan else None
    metrics = next(iter(sorted(sim.run_dir.rglob("metrics.jsonl"))), None)
    acc = F.account(metrics)
    if kind == "finished":
        verdict = ("no step lost, none done again beyond the last checkpoint" if acc.intact(expected) else
                   "steps lost or done again beyond the last checkpoint")
        lines.append(f"outcome: finished at step {acc.final_step}: {verdict}")
    elif kind == "failed":
        lines.append(f"outcome: failed: {why}")
    else:
        pg = next((t.split("=", 1)[1] for sp in sim.pods if sp.training for t in sp.argv if t.startswith("--pg-timeout=")),
                  None) or next((sp.env.get("PG_TIMEOUT") for sp in sim.pods if sp.training and sp.env.get("PG_TIMEOUT")),
                                None) or "600"
        lines.append(f"outcome: hung: {why}; in a cluster the ranks left waiting give up at the trainer's process-group "
                     f"timeout (--pg-timeout/PG_TIMEOUT, {pg} s) or torchrun's rendezvous timeout, then the controller "
                     "decides again")
    lines += [f"  {ln}" for ln in acc.lines(expected if kind == "finished" else None)]
    if metrics is None:
        lines.append("  steps: no metrics.jsonl in the run folder: the trainer wrote none (steps not counted)")
    # The static prediction: what restarts the world (the launcher's restarts(), RESTART004's reading), and the
    # RESTART/ELASTIC findings on the same manifests.
    recovers = []
    for w in workloads(sim.bundle):
        recovers += w.launcher.restarts(w, sim.bundle)
    findings = [p.line() for p in check.problems + check.suppressed if p.rule.startswith(("RESTART", "ELASTIC"))]
    # A suppressed finding still holds (the overlay says so on purpose): the world does not re-form either way.
    blocked = sorted({p.rule for p in check.problems + check.suppressed
                      if p.rule in RULES and RULES[p.rule].blocks_recovery})
    predicted = "recovers" if recovers and not blocked else "fails"
    basis = (f"{'; '.join(recovers)}, but {', '.join(blocked)}: the world does not re-form" if recovers and blocked
             else '; '.join(recovers) if recovers else 'nothing restarts the world')
    lines.append(f"the rules predicted: {predicted} ({basis})"
                 + (f"; findings: {len(findings)}" if findings else "; RESTART/ELASTIC rules found nothing"))
    lines += [f"  {f}" for f in findings]
    agree = (predicted == "recovers") == (kind == "finished")
    if kind in ("finished", "failed", "hung") and not agree:
        lines.append(f"DISAGREEMENT: the rules predicted the world {predicted}, the run {kind}: one of them is wrong")
    return "\n".join(lines)


class Stopped(KeyboardInterrupt):
    """The simulator was told to stop (Ctrl-C, SIGTERM from `timeout` or a cancelled CI job, SIGHUP from a closed
    terminal): the run's pods are stopped on the way out as at the deadline."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stop_on_signal(signum: int, frame: Any) -> None:
    for s in STOP_SIGNALS:  # the pods' cleanup runs to its end (bounded: about 10 s)
        signal.signal(s, signal.SIG_IGN)
    raise Stopped(signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="simulate", description=__doc__)
    ap.add_argument("overlay", help="an overlay folder or a rendered manifest file")
    ap.add_argument("--deadline", default=os.environ.get("DEADLINE") or "180",
                    help="seconds before a world that has not finished is stopped and diagnosed (default 180)")
    ap.add_argument("--scale-to", default=None,
                    help="run an overlay that does not fit this machine at this many pods (1 process each, no GPUs)")
    ap.add_argument("--run-dir", type=Path, default=None, help="where logs and volumes go (default .sim/<overlay>)")
    ap.add_argument("--pvc", action="append", default=[], metavar="CLAIM=FOLDER",
                    help="copy FOLDER into the volume of PVC CLAIM before the pods start (repeatable)")
    ap.add_argument("--fault", default=None, help="faults to inject, e.g. 'kill:1@step=6 term:0@epoch=1' "
                    "(docs/simulate.md; policies/faults.py)")
    args = ap.parse_args(argv)
    args.overlay = paths.overlay_path(args.overlay)  # kind-cpu/indexed-job as make scale takes it, or overlays/...
    run_dir = args.run_dir or default_run_dir(args.overlay)

    def body() -> int:
        scale_to = None
        if args.scale_to is not None:
            if not re.fullmatch(r"\s*\d+\s*", args.scale_to) or int(args.scale_to) < 1:
                raise SimulationError(f"SCALE_TO must be a positive number of pods, got {args.scale_to!r}")
            scale_to = int(args.scale_to)
        deadline = positive_seconds(args.deadline)
        for s in STOP_SIGNALS:
            signal.signal(s, _stop_on_signal)
        try:
            return simulate(args.overlay, run_dir, deadline, scale_to, fault_spec=args.fault, pvcs=args.pvc)
        except Stopped as stop:  # before any pod started
            return 128 + stop.signum

    return guarded(body, (SimulationError, F.FaultError))


if __name__ == "__main__":
    sys.exit(main())
