"""The committed Grafana dashboard against a real Prometheus: Debian's `prometheus` (make setup installs it where
it can) scrapes a simulated kind-cpu run (`python -m policies.simulate` of overlays/kind-cpu/indexed-job with
METRICS_PORT=9400 in its ddp-env: 2 pods x 2 processes, each pod at its own address), and every PromQL expression
of components/monitoring/ddp-train-dashboard.json must return data for that run through Prometheus's HTTP API.

Under libsocket_wrapper a pod's listening socket is a Unix socket in the simulator's network folder
(`sim-net-*`, named T<iface><port>), not a TCP port: Prometheus is a Go program (its own syscalls, no libc), so
LD_PRELOAD cannot put it into that network. The test relays a loopback TCP port to each rank's socket there, as
a wrapped client would connect (its Unix socket bound to a name socket_wrapper reads as 127.0.0.10:<port>).
Without libsocket_wrapper the pods share one loopback network and the second pod's ranks could not bind 9400 and
9401: the simulated test skips, saying so, and a plain 2-process torchrun on loopback is scraped instead (that
test skips, saying so, where the simulated one runs)."""

from __future__ import annotations

import itertools
import json
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
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from policies.simulate import host as simulate
from tests.test_trainer_telemetry import free_port_pair
from tests.trainer_helpers import ROOT, clean_env, free_port, torchrun_cmd

DASHBOARD = ROOT / "components" / "monitoring" / "ddp-train-dashboard.json"
PROMETHEUS = shutil.which("prometheus") or ("/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)
# A CPU run has no GPU: these series exist only on CUDA devices (trainer/telemetry.py); named, so nothing else skips.
GPU_ONLY = ("trainer_gpu_memory_allocated_bytes", "trainer_gpu_memory_peak_bytes")


def dashboard_queries(run_id: str) -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"].replace("$run_id", run_id)))
    return out


def query(base: str, expr: str) -> list:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def test_dashboard_queries_have_data_from_a_scraped_run(tmp_path):
    """The fallback where pods cannot have addresses of their own: a plain 2-process torchrun on loopback."""
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (make setup installs Debian's `prometheus` where apt-get can run)")
    if simulate.socket_wrapper() is not None and simulate.name_serializer() is not None:
        pytest.skip("libsocket_wrapper is installed: the simulated kind-cpu run below is scraped instead")
    port = free_port_pair()
    web = free_port()
    run_id = "prom-run"
    (tmp_path / "prometheus.yml").write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "ddp-train", "static_configs": [
            {"targets": [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]}]}]}))
    with open(tmp_path / "prometheus.log", "w") as log:
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}"],
                                stdout=subprocess.DEVNULL, stderr=log)
    cmd = torchrun_cmd(["--task", "synthetic", "--epochs", "400", "--samples", "4096", "--batch-size", "128",
                        "--log-interval", "4", "--out-dir", str(tmp_path / "out"), "--run-id", run_id], nproc=2)
    trainer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env=clean_env(METRICS_PORT=str(port)), start_new_session=True)
    base = f"http://127.0.0.1:{web}"
    queries = dashboard_queries(run_id)
    missing: dict[str, str] = {title + ": " + expr: expr for title, expr in queries
                               if not any(g in expr for g in GPU_ONLY)}
    try:
        deadline = time.monotonic() + 180
        while missing and time.monotonic() < deadline and trainer.poll() is None:
            time.sleep(1)
            for key, expr in list(missing.items()):
                try:
                    if query(base, expr):
                        del missing[key]
                except OSError:
                    break  # Prometheus not ready yet
        running = trainer.poll() is None
        up = query(base, 'up{job="ddp-train"}')
    finally:
        if trainer.poll() is None:
            os.killpg(trainer.pid, signal.SIGTERM)
        out, err = trainer.communicate(timeout=120)
        prom.terminate()
        prom.wait(timeout=30)
    assert running, f"the run ended before every query had data:\n{err[-2000:]}"
    assert not missing, f"dashboard queries without data: {sorted(missing)}"
    assert sorted(s["value"][1] for s in up) == ["1", "1"]  # both ranks' endpoints scraped
    skipped = [expr for _, expr in queries if any(g in expr for g in GPU_ONLY)]
    assert len(skipped) == len(GPU_ONLY)  # only the GPU panels went unchecked, and they are said to
    print(f"checked {len(queries) - len(skipped)} dashboard queries; not checked on CPU: {skipped}")


SIM_OVERLAY = ROOT / "overlays" / "kind-cpu" / "indexed-job"
SIM_RUN_ID = "prom-sim"
# The trainer's arguments appended to the overlay's (argparse keeps the last): long enough to be scraped; the test
# stops the run as soon as every query has data.
SIM_ARGS = ["--epochs=400", "--samples=4096", "--batch-size=128", "--log-interval=4", f"--run-id={SIM_RUN_ID}"]
OBSERVER_IFACE = 10  # 127.0.0.10: below the pods' addresses (simulate.FIRST_IFACE on)


def metrics_overlay(folder, port: int):
    """A kustomization over the kind-cpu overlay that only sets METRICS_PORT and a longer run."""
    folder.mkdir()
    args = "".join(f"      - {{op: add, path: /spec/template/spec/containers/0/args/-, value: '{a}'}}\n"
                   for a in SIM_ARGS)
    (folder / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(SIM_OVERLAY, folder)}\n"  # kustomize takes no absolute root
        "patches:\n"
        "  - target: {kind: ConfigMap, name: ddp-env}\n"
        f"    patch: |-\n      - {{op: add, path: /data/METRICS_PORT, value: '{port}'}}\n"
        "  - target: {group: batch, kind: Job}\n"
        "    patch: |-\n" + args)
    return folder


def relay(net, iface: int, port: int, client_ports) -> socket.socket:
    """A loopback TCP listener that reaches port `port` of the pod at socket_wrapper interface `iface` (close it to
    stop): the simulator's relay (policies/simulate/host.py), the other way round."""
    listener = socket.create_server(("127.0.0.1", 0))

    def connect() -> socket.socket:
        target = next((net / f"{fam}{iface:02X}{port:04X}" for fam in "TX"
                       if (net / f"{fam}{iface:02X}{port:04X}").exists()), None)
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if target is None:
                raise OSError("not listening yet")
            # socket_wrapper's accept reads the peer's address from its socket's name: give it one.
            upstream.bind(str(net / f"T{OBSERVER_IFACE:02X}{next(client_ports):04X}"))
            upstream.connect(str(target))
        except OSError:
            upstream.close()
            raise
        return upstream

    simulate.relay(listener, connect)
    return listener


def test_dashboard_queries_have_data_from_a_simulated_kind_cpu_run(tmp_path):
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (make setup installs Debian's `prometheus` where apt-get can run)")
    if simulate.socket_wrapper() is None or simulate.name_serializer() is None:
        pytest.skip("libsocket_wrapper is not installed (or SIM_HOST_NETWORK=1, or no C compiler for its name "
                    "serializer): the simulated pods would share one loopback network, and the second pod's ranks "
                    "could not serve METRICS_PORT 9400 and 9401")
    overlay = metrics_overlay(tmp_path / "overlay", 9400)
    # The simulator's network folder goes under TMPDIR: a short one (a Unix socket's path has at most 107 bytes),
    # where the test finds it.
    short_tmp = Path(tempfile.mkdtemp(prefix="prom-sim-"))
    web = free_port()
    sim = subprocess.Popen([sys.executable,
                            "-m", "policies.simulate", str(overlay), "--deadline", "300",
                            "--run-dir", str(tmp_path / "run")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                           env={**clean_env(), "TMPDIR": str(short_tmp)}, start_new_session=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(sim.stdout), daemon=True).start()
    prom = None
    relays: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 240
        pods: list[str] = []
        while time.monotonic() < deadline and sim.poll() is None:
            pods = [m.group(1) for line in list(lines)
                    if (m := re.match(r"simulate: pod \S+ \((127\.0\.0\.\d+), trainer", line))]
            nets = list(short_tmp.glob("sim-net-*"))
            if len(pods) == 2 and nets:
                break
            time.sleep(0.5)
        assert len(pods) == 2 and nets, "the simulation did not start its two pods:\n" + "".join(lines)[-3000:]
        client_ports = itertools.count(20000)
        relays = [relay(nets[0], int(ip.rsplit(".", 1)[1]), 9400 + r, client_ports) for ip in pods for r in (0, 1)]
        targets = [f"127.0.0.1:{r.getsockname()[1]}" for r in relays]
        (tmp_path / "prometheus.yml").write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "ddp-train", "static_configs": [{"targets": targets}]}]}))
        with open(tmp_path / "prometheus.log", "w") as log:
            prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                     f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                     f"--web.listen-address=127.0.0.1:{web}"], stdout=subprocess.DEVNULL, stderr=log)
        base = f"http://127.0.0.1:{web}"
        queries = dashboard_queries(SIM_RUN_ID)
        missing = {title + ": " + expr: expr for title, expr in queries if not any(g in expr for g in GPU_ONLY)}
        # and every rank's own step time (a rank's series appears at its first stop vote)
        missing["every rank"] = f'count(trainer_step_seconds{{run_id="{SIM_RUN_ID}"}}) == 4'
        while missing and time.monotonic() < deadline and sim.poll() is None:
            time.sleep(1)
            for key, expr in list(missing.items()):
                try:
                    if query(base, expr):
                        del missing[key]
                except OSError:
                    break  # Prometheus not ready yet
        running = sim.poll() is None
        up = query(base, 'up{job="ddp-train"}')
        ranks = query(base, f'trainer_step_seconds{{run_id="{SIM_RUN_ID}"}}')
    finally:
        if sim.poll() is None:
            os.killpg(sim.pid, signal.SIGTERM)  # the simulator stops every pod on the way out
        sim.wait(timeout=120)
        sim.stdout.close()
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=30)
        for r in relays:
            r.close()
        time.sleep(0.5)  # the relays' threads close their sockets
        shutil.rmtree(short_tmp, ignore_errors=True)
    assert running, "the simulated run ended before every query had data:\n" + "".join(lines)[-3000:]
    assert not missing, f"dashboard queries without data: {sorted(missing)}"
    assert sorted(s["value"][1] for s in up) == ["1"] * 4, up  # 2 pods x 2 local ranks, each its own endpoint
    assert sorted({s["metric"].get("rank") for s in ranks}) == ["0", "1", "2", "3"], ranks  # every rank's step time
