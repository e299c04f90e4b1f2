"""One simulation: the overlay's pods laid out on this machine (pods.py), their network opened (host.py), the pods
that do not train started first and waited for, then the training pods, which run until they end, the deadline
comes, or (a fault run, fault_run.py) the controllers decide the world finished, failed or hangs; every process is
stopped on the way out."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

from ..launchers import Bundle
from ..launchers.lifecycle import RESTART_CONTAINER, PodExit, RestartCount
from ..kube.objects import Manifest
from . import processes
from .diagnose import last_words
from .host import Network, SimulationError, port_free
from .pods import Layout, SimPod
from .processes import LineListener
from .result import Result
from .sandbox import Sandbox

# How the training pods run once started: (the run's start, the training pods) -> (whether the deadline stopped the
# run, the outcome where the run decided one: finished, failed or hung, with why).
Training = Callable[[float, list[SimPod]], tuple[bool, tuple[str, str] | None]]


class Simulation:
    def __init__(self, manifests: list[Manifest], run_dir: Path, deadline: float = 180.0,
                 out: TextIO = sys.stdout, source: str = "", python_bin: Path | None = None,
                 cluster_domain: str | None = None):
        self.manifests = manifests
        self.bundle = Bundle.of(manifests)
        self.run_dir = run_dir
        self.deadline = deadline
        self.out = out
        self.source = source
        # torchrun's own rendezvous timeout, inside the deadline, so that a world that cannot form says so itself.
        self.rdzv_timeout = max(10, int(deadline * 0.6))
        self.network = Network()
        self.layout = Layout(self.bundle, run_dir, self.network, python_bin or Path(sys.executable).parent,
                             self.rdzv_timeout, cluster_domain)
        self.pods: list[SimPod] = []
        self.lock = threading.Lock()
        # The pods with a process left after the run stopped them (processes.stop_all).
        self.left: list[str] = []
        # Called with every line a pod prints (a fault run follows the trainer's steps).
        self.on_line: LineListener | None = None
        # How the pods are confined on this machine (measured when the pods are planned).
        self.sandbox = Sandbox(off=True)

    def say(self, text: str) -> None:
        with self.lock:
            print(text, file=self.out, flush=True)

    def plan(self) -> list[SimPod]:
        self.pods = self.layout.plan()
        self.sandbox = Sandbox.probe(self.layout.bin, self.network)
        return self.pods

    def peer_of(self, host: str) -> str:
        """The pod a host name answers with, else the name."""
        return next((p.name for p in self.pods if self.layout.dns.get(host) == p.ip), host)

    def start(self, sp: SimPod) -> None:
        self.sandbox.own(self.run_dir / "pods" / sp.name, self.run_dir / "pvc")
        self.layout.write(sp)
        processes.start(sp, self.say, self.on_line, self.peer_of, self.sandbox.command)

    def run(self, training: Training | None = None) -> Result:
        """Run the pods: the training pods as `training` says (a fault run), else until they end or the deadline."""
        try:
            if self.sandbox.isolated:  # the world's network namespace, as the probe made one
                why = self.network.isolate()
                if why != "ok":
                    raise SimulationError(f"the pods' network namespace could not be made again: {why}")
                self.sandbox.world = self.network.world
            self._check_ports()
            if self.network.swrap:
                self._open_network()
            self.sandbox.writable = [self.run_dir.resolve(), Path("/dev/shm")]
            if self.network.folder is not None:
                self.sandbox.writable.append(self.network.folder)
                self.sandbox.own(self.network.folder)
            return self._run(training or self._run_plain)
        finally:
            self.network.close()

    def _check_ports(self) -> None:
        if self.sandbox.isolated:  # the world's own network: nothing of this machine's holds its ports
            return
        busy = []
        for sp in self.pods:
            for port in sp.ports:
                if port and sp.host_ip and not port_free(sp.host_ip, port):
                    busy.append(f"{sp.host_ip}:{port} ({sp.name})")
        if busy:
            raise SimulationError(f"ports already in use on this machine: {', '.join(busy)}")

    def _open_network(self) -> None:
        """socket_wrapper's socket folder for the pods in its network, and a relay from each host-network pod's
        declared ports into it."""
        folder = self.network.open()
        for sp in self.pods:
            if sp.host_ip is None:
                sp.env["SOCKET_WRAPPER_DIR"] = str(folder)
            else:
                self.network.relay_ports(sp.iface, sp.host_ip, sp.ports)

    def _run(self, training: Training) -> Result:
        start = time.monotonic()
        services = [sp for sp in self.pods if not sp.training]
        trainers = [sp for sp in self.pods if sp.training]
        if not trainers:  # no torchrun world here: run every pod as written and wait for all of them
            services, trainers = [], list(self.pods)
        timed_out, outcome = False, None
        try:
            for sp in services:
                self.start(sp)
            for sp in services:  # readiness, as far as this machine can tell: the declared ports accept connections
                for port in sp.ports:
                    while (port and sp.host_ip and time.monotonic() - start < min(30.0, self.deadline)
                           and not self.network.port_open(sp.host_ip, port)):
                        if sp.proc and sp.proc.poll() is not None:
                            break
                        time.sleep(0.2)
            timed_out, outcome = training(start, trainers)
        finally:
            for sp in self.pods:
                # What each pod last said on its own, before the simulator stops it (and it prints its exit).
                sp.last_words = last_words(sp.lines)
            self.left = processes.stop_all(self.pods)
            time.sleep(0.1)
        return Result(self.pods, self.run_dir, timed_out, time.monotonic() - start, outcome)

    def _run_plain(self, start: float, trainers: list[SimPod]) -> tuple[bool, None]:
        """Start the training pods and wait for them (until each has exited, or said its run is complete and it
        waits: `[IDLE]`); whether the deadline stopped the run. A container that exits 0 where the kubelet restarts
        it anyway (restartPolicy Always: a StatefulSet) is started again once: what it does then is what the
        cluster sees for ever."""
        timed_out = False
        for sp in trainers:
            self.start(sp)
        while True:
            for sp in self.pods:
                if sp.proc is not None and sp.exit_code is None and sp.proc.poll() is not None:
                    sp.exit_code = sp.proc.returncode
                    sp.finished_at = time.monotonic() - start
                    if sp.exit_code == 0 and any(sp is t for t in trainers):
                        self._completed(sp)
            if all(sp.exit_code is not None or sp.idle for sp in trainers):
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
        return timed_out, None

    def _completed(self, sp: SimPod) -> None:
        """A training pod exited 0: where its controller restarts it (restartPolicy Always), start it again the first
        time, as the kubelet does at once."""
        w = sp.workload
        d = w.launcher.after_exit(w, self.bundle, PodExit(sp.pod.index, 0), RestartCount())
        if d.action != RESTART_CONTAINER:
            return
        sp.completions += 1
        if sp.completions > 1:
            return
        self.say(f"[sim] pod {sp.name} exited 0 -> {d.controller}: {d.why}  ({d.source}); the simulator starts it "
                 "again once to show what the cluster sees")
        sp.proc, sp.exit_code, sp.joined, sp.said_waiting = None, None, False, False
        self.start(sp)
