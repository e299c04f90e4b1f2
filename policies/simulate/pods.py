"""The pods a simulation starts, laid out on this machine as the cluster would run them: each pod's address and
hostname, the names cluster DNS would answer (only behind a headless Service that selects the pod, or the launcher's
own), its volumes as folders under the run folder (a PVC shared by claim name), and its command and env with every
in-pod path mapped to its host folder."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import launchers
from ..kube.objects import NAME_ALPHABET
from ..kube.values import as_int, dig, env_entry
from ..launchers import Bundle, Pod, Workload, workloads
from ..model.topology import compute
from ..render.paths import REPO
from .host import FIRST_IFACE, LAST_IFACE, Network, SimulationError, nss_wrapper

POD_TOKEN = "DDP_SIM_POD"
# Where the image keeps the repository (Dockerfile: WORKDIR /app, code in /app/trainer).
IMAGE_ROOT = "/app"


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
    # A Python traceback being printed, held back until its exception line (diagnose.tracebacks).
    traceback: list[str] = field(default_factory=list)
    # Fault runs: what the simulator did to the pod (the kubelet's and controller's cause), a deletion in progress,
    # a stop the simulator asked for (not a failure), a pod that completed, how many pods stood under this name.
    fault_note: str | None = None
    deleting: bool = False
    node_lost: bool = False
    stopping: bool = False
    done: bool = False
    generation: int = 0
    # The trainer said its run is complete and it waits for SIGTERM (AFTER_DONE=wait: `[IDLE] ...`); the times its
    # container exited 0 (a second one under restartPolicy Always: it restarts for ever).
    idle: bool = False
    completions: int = 0
    # A restart decided while a `return` fault still holds the pod away, (back-off, action): carried out when it fires.
    held: Any = None
    # Its torchrun has entered its rendezvous since the container last started (`Rendezvous'ing worker group`).
    rendezvous: bool = False

    # The 5 characters the API server puts where generateName ends (`<random>` in the model), fixed per pod.
    suffix: str = ""
    # What Layout.prepare laid out for the pod's next start, written by Layout.write once the run folder is made.
    folders: list[Path] = field(default_factory=list)
    files: dict[Path, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.pod.name.replace("<random>", self.suffix)


def generated_suffix(seed: str) -> str:
    """The 5 characters generateName appends (objects.NAME_ALPHABET), fixed by `seed`."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(NAME_ALPHABET[b % len(NAME_ALPHABET)] for b in digest[:5])


class Layout:
    """How the pods of one simulation are laid out: planned once (plan), each prepared again when the controller
    recreates it (prepare)."""

    def __init__(self, bundle: Bundle, run_dir: Path, network: Network, python_bin: Path, rdzv_timeout: int,
                 cluster_domain: str | None = None):
        self.bundle = bundle
        # The environment's clusterDomain (cluster.local where it declares none): the names the cluster answers.
        self.domain = cluster_domain or "cluster.local"
        self.run_dir = run_dir
        self.network = network
        self.bin = python_bin
        self.rdzv_timeout = rdzv_timeout
        # Env added to the training pods (a fault run's LOG_INTERVAL=1).
        self.extra_env: dict[str, str] = {}
        self.dns: dict[str, str] = {}

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
        swrap = self.network.swrap
        if swrap and len(pods) > LAST_IFACE - FIRST_IFACE + 1:
            raise SimulationError(f"{len(pods)} pods: socket_wrapper gives at most {LAST_IFACE - FIRST_IFACE + 1} "
                                  "addresses")
        any_training = any(sp.training for sp in pods)
        for k, sp in enumerate(pods):
            if not swrap:
                sp.host_ip = sp.ip
                continue
            sp.iface = FIRST_IFACE + k
            sp.ip = f"127.0.0.{sp.iface}"
            if any_training and not sp.training:
                # A service pod (an etcd, say) may not call the C library for its sockets (Go does not), so it runs
                # on the host network and the simulator relays its declared ports into the pods' network.
                sp.host_ip = f"127.0.1.{k + 1}"
        self.dns = self._dns(pods)
        wrapper = nss_wrapper()
        for sp in pods:
            self.prepare(sp, wrapper)
        return pods

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
                for name in (b, f"{b}.{ns}", f"{b}.{ns}.svc", f"{b}.{ns}.svc.{self.domain}"):
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
                for name in (svc_name, f"{svc_name}.{n}", f"{svc_name}.{n}.svc", f"{svc_name}.{n}.svc.{self.domain}"):
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

    def write(self, sp: SimPod) -> None:
        """What prepare laid out for the pod, on disk: its volume folders, ConfigMap files and hosts file. Called as
        the pod starts, so that nothing is written while the inputs are still being checked."""
        for folder in sp.folders:
            folder.mkdir(parents=True, exist_ok=True)
        for path, text in sp.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def prepare(self, sp: SimPod, wrapper: Path) -> None:
        """The pod's folders, working directory, command and env (and its /etc/hosts) for its next start (written
        by write)."""
        p = sp.pod
        pod_dir = self.run_dir / "pods" / sp.name
        mapping: dict[str, Path] = {IMAGE_ROOT: REPO}
        volumes = {v.get("name"): v for v in p.spec.get("volumes") or []}
        sp.folders, sp.files = [], {}
        for vm in p.container.get("volumeMounts") or []:
            vol = volumes.get(vm.get("name")) or {}
            if "persistentVolumeClaim" in vol:
                host = self.run_dir / "pvc" / str(vol["persistentVolumeClaim"].get("claimName"))
            else:
                host = pod_dir / "volumes" / str(vm.get("name"))
            sp.folders.append(host)
            if "configMap" in vol:
                for k, v in (self.bundle.configmaps.get(str(vol["configMap"].get("name"))) or {}).items():
                    sp.files[host / k] = v
            mapping[str(vm.get("mountPath")).rstrip("/") or "/"] = host
        sp.cwd = map_path(str(p.container.get("workingDir") or IMAGE_ROOT), mapping)
        # A container's own /tmp: the pod's /tmp volume where it mounts one, else a folder of its own (a pod may
        # not write outside the run folder: sandbox.py).
        tmp = map_path("/tmp", mapping) if "/tmp" in mapping else pod_dir / "tmp"
        if tmp not in sp.folders:
            sp.folders.append(tmp)  # (made by write, as the pod starts)
        env: dict[str, str] = {}
        for k, value in p.env.items():
            if value is None:
                value = self._runtime_value(p, k, sp)
            if value is not None:
                env[k] = rewrite(str(value).replace("<random>", sp.suffix), mapping)
        argv, _ = p.argv()
        sp.argv = [rewrite(t.replace("<random>", sp.suffix), mapping) for t in argv]
        hosts = pod_dir / "hosts"
        # Like the kubelet's /etc/hosts: the pod's own FQDN first (socket.getfqdn() answers with it, and c10d
        # hands it to the workers as MASTER_ADDR), then its short hostname; then what cluster DNS would answer.
        ns = p.namespace or "default"
        own = f"{p.hostname}.{p.subdomain}.{ns}.svc.{self.domain} {p.hostname}" if p.subdomain else p.hostname
        # torch's TCPStore client asks for IPv6 first, and libuv's server listens on "::": every name has both.
        ipv6 = self.network.ipv6
        lines = [line for ip in (sp.ip,) for line in (f"{ip} {own}", f"{ipv6(ip)} {own}")]
        for name, ip in sorted(self.dns.items()):
            lines += [f"{ip} {name}", f"{ipv6(ip)} {name}"]
        lines.append("127.0.0.1 localhost")
        sp.files[hosts] = "\n".join(lines) + "\n"
        wrapped = self.network.swrap is not None and sp.host_ip is None
        env.update({
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "HOSTNAME": p.hostname,
            "LD_PRELOAD": f"{self.network.serial} {self.network.swrap} {wrapper}" if wrapped else str(wrapper),
            "NSS_WRAPPER_HOSTS": str(hosts),
            "NSS_WRAPPER_HOSTNAME": p.hostname,
            "PYTHONUNBUFFERED": "1",
            "LOGLEVEL": env.get("LOGLEVEL", "INFO"),
            "TMPDIR": env.get("TMPDIR", str(tmp)),
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

    def _runtime_value(self, p: Pod, name: str, sp: SimPod) -> str | None:
        path = dig(env_entry(p.container, name), "valueFrom", "fieldRef", "fieldPath")
        if path in ("status.podIP", "status.hostIP"):
            return sp.ip
        if path == "spec.nodeName":
            return f"sim-node-{p.index}"
        return None


def map_path(path: str, mapping: dict[str, Path]) -> Path:
    for cpath in sorted(mapping, key=len, reverse=True):
        if path == cpath or path.startswith(cpath.rstrip("/") + "/"):
            return Path(str(mapping[cpath]) + path[len(cpath.rstrip("/")):])
    return Path(path)


def rewrite(text: str, mapping: dict[str, Path]) -> str:
    """Every in-pod path in `text` as its host folder, in one pass: a path already mapped is never mapped again
    (a run folder under /tmp, once /out is mapped into it, is not then taken for the pod's /tmp volume)."""
    paths = [c for c in sorted(mapping, key=len, reverse=True) if c not in ("", "/")]
    if not paths:
        return text
    pattern = re.compile(r"(?<![\w.\-/])(" + "|".join(map(re.escape, paths)) + r")(?=/|$|[\s:;,'\"=])")
    return pattern.sub(lambda m: str(mapping[m.group(1)]), text)

