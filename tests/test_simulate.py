"""`make simulate`: every kind-cpu overlay trains to completion on this machine, and broken overlays fail within
their deadline with a diagnosis naming the problem; each mutation is also checked against `make validate`."""
from __future__ import annotations

import re

import copy
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_cli
from test_first_hour import alarming
from policies.report.engine import collect
from policies.simulate.host import NSS_WRAPPER_CANDIDATES, SOCKET_WRAPPER_CANDIDATES, installed, name_serializer

pytestmark = [
    pytest.mark.skipif(installed(NSS_WRAPPER_CANDIDATES) is None,
                       reason="libnss_wrapper is not installed (make setup installs Debian's libnss-wrapper)"),
]
# With libsocket_wrapper (make setup installs it) and a C compiler for policies/native/swrap_serial.c every pod has
# a network of its own; without, the pods share the host's.
SWRAP = installed(SOCKET_WRAPPER_CANDIDATES)
ISOLATED = SWRAP is not None and name_serializer() is not None
# The elastic variant (a world of 3 that shrinks and grows back) has a test of its own: tests/test_simulate_elastic.py.
KIND = sorted(p.parent.relative_to(REPO) for p in (REPO / "overlays/kind-cpu").glob("*/kustomization.yaml")
              if p.parent.name != "pytorchjob-elastic")


def simulate(target, tmp_path, deadline=150, *extra, env=None):
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "policies.simulate", str(target), "--deadline", str(deadline),
                           "--run-dir", str(tmp_path / "run"), *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=deadline + 120, env={**os.environ, **(env or {})})
    return proc, time.monotonic() - start


@pytest.mark.timeout(400)
@pytest.mark.parametrize("overlay", KIND, ids=str)
def test_kind_cpu_overlay_trains_to_completion(overlay, tmp_path):
    if "etcd" in str(overlay):
        if shutil.which("etcd") is None:
            pytest.skip("etcd is not installed (make setup installs Debian's etcd-server)")
        if importlib.util.find_spec("etcd") is None:
            pytest.skip("python-etcd is not installed in the venv")
    proc, _ = simulate(REPO / overlay, tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr
    assert "\nPASSED: logs in " in out and "world size reached: 4" in out
    if ISOLATED:  # the world formed with each pod at its own address (the etcd one through the relay)
        assert "network: each pod has its own address" in out and "127.0.0.12" in out
    assert "[DONE] world=4 epochs=3" in out
    report = re.search(r"^report: (\S+report\.html)$", out, re.M)  # make report's pictures of the run
    assert report and Path(report.group(1)).is_file() and (Path(report.group(1)).parent / "loss.png").is_file()
    # torch's store retries while pod 0 is not up yet stay in the pod log: at most one line per waiting pod
    assert "frame #" not in out and "No route to host" not in out, out[-3000:]
    # nothing alarming on a clean run: no torch or Python warning and no traceback reaches the terminal (torchrun's
    # "node_rank is only used for static rdzv_backend" did, for the c10d and etcd StatefulSets)
    assert alarming(out) == [], "\n".join(alarming(out))
    assert all(out.count(f"[{pod}] waiting for ") <= 1 for pod in re.findall(r"^simulate: pod (\S+) ", out, re.M))
    # The trainer really ran: checkpoints in the (mapped) output volume.
    assert list((tmp_path / "run").rglob("epoch-0003.pt")), "no checkpoint written"
    logs = list((tmp_path / "run/logs").glob("*.log"))
    assert len(logs) >= 2


def rendered(overlay: str):
    (unit,) = collect([str(REPO / overlay)], REPO / "overlays")
    return [copy.deepcopy(m.obj) for m in unit.manifests]


def first(objs, kind):
    return next(o for o in objs if o["kind"] == kind and "ddp-train" in o["metadata"]["name"])


def container(objs, kind):
    return first(objs, kind)["spec"]["template"]["spec"]["containers"][0]


def set_env(c, name, value=None, value_from=None):
    c["env"] = [e for e in c["env"] if e["name"] != name]
    c["env"].append({"name": name, "value": value} if value_from is None else {"name": name, "valueFrom": value_from})


def wrong_nnodes(objs):
    set_env(container(objs, "Job"), "NNODES", "3")


def wrong_master_addr(objs):
    c = container(objs, "Job")
    addr = next(e["value"] for e in c["env"] if e["name"] == "MASTER_ADDR")
    set_env(c, "MASTER_ADDR", addr.replace(".ddp-train", ".ddp-trainer"))  # a Service that does not exist


def master_addr_names_pod_1(objs):
    c = container(objs, "Job")
    addr = next(e["value"] for e in c["env"] if e["name"] == "MASTER_ADDR")
    set_env(c, "MASTER_ADDR", addr.replace("-0.", "-1.", 1))  # a pod of the job, but not the one with node rank 0


def rank_not_from_pod_index(objs):
    # c10d assigns ranks, so the StatefulSet passes no --node-rank; one given must still be an integer
    c = container(objs, "StatefulSet")
    c["args"].insert(c["args"].index("--rdzv-backend=c10d"), "--node-rank=$(NODE_RANK)")
    set_env(c, "NODE_RANK", value_from={"fieldRef": {"fieldPath": "metadata.name"}})


def service_port_differs(objs):
    svc = next(o for o in objs if o["kind"] == "Service")
    svc["spec"]["ports"] = [{"name": "rdzv", "port": 29400, "targetPort": 29400}]


def failure_policy_with_on_failure(objs):
    job = next(o for o in objs if o["kind"] == "Job")
    job["spec"]["podFailurePolicy"] = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "NotIn",
                                                                                      "values": [0]}}]}
    job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"


def selector_mismatch(objs):
    svc = next(o for o in objs if o["kind"] == "Service")
    svc["spec"]["selector"] = {"app.kubernetes.io/name": "someone-else"}


# mutation: (overlay, how, does the simulation fail?, the rule make validate reports, text the diagnosis shows,
#            its severity)
MUTATIONS = {
    # (what the pods themselves say depends on which timeout fires first on a loaded machine: any of these)
    "wrong-nnodes": ("overlays/kind-cpu/indexed-job", wrong_nnodes, True, "TOPO001",
                     ("2/3 clients joined", "wait timeout", "deadline reached")),
    "wrong-master-addr": ("overlays/kind-cpu/indexed-job", wrong_master_addr, True, "TOPO003",
                          ("Name or service not known", "deadline reached", "timed out")),
    # Pod 1 exists and resolves, but the store listens on pod 0 (node rank 0): only a network per pod shows it.
    "master-addr-names-pod-1": ("overlays/kind-cpu/indexed-job", master_addr_names_pod_1, ISOLATED, "TOPO003",
                                ("No route to host", "Connection refused", "deadline reached", "timed out")),
    "rank-not-from-pod-index": ("overlays/kind-cpu/statefulset", rank_not_from_pod_index, True, "TOPO009",
                                ("invalid int value",)),
    "service-selector-mismatch": ("overlays/kind-cpu/statefulset", selector_mismatch, True, "TOPO005",
                                  ("did not",)),
    # The API server refuses a podFailurePolicy beside restartPolicy OnFailure; the simulator is no API server, so
    # the pods train while make validate fails: the summary says so.
    "failure-policy-with-on-failure": ("overlays/kind-cpu/indexed-job", failure_policy_with_on_failure, False,
                                       "TOPO011", None),
    # Ports a headless Service declares take no part in DNS: the world forms, make validate only warns.
    "service-port-differs": ("overlays/kind-cpu/statefulset", service_port_differs, False, "TOPO006", None, "warning"),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_is_caught(name, tmp_path):
    overlay, mutate, sim_fails, rule, diagnosis, *severity = MUTATIONS[name]
    severity = severity[0] if severity else "error"
    objs = rendered(overlay)
    mutate(objs)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    validate = run_cli("validate", str(path))
    assert validate.returncode == (1 if severity == "error" else 0), validate.stdout
    assert f"{severity} {rule}" in validate.stdout, validate.stdout
    deadline = 45
    proc, seconds = simulate(path, tmp_path, deadline)
    if sim_fails:
        assert proc.returncode == 1, proc.stdout[-2000:]
        # The world ended by its deadline, every pod stopped: the simulator's own time (the trainer's report, written
        # after it, takes what a loaded machine makes it take; stopping the pods takes at most about 10 s).
        ran = float(re.search(r"^pods: .*; ([\d.]+) s$", proc.stdout, re.M).group(1))
        assert ran < deadline + 30, f"the run took {ran:.0f} s"
        assert "diagnosis:" in proc.stdout and f"error {rule}" in proc.stdout  # the static checks, in the diagnosis
        assert any(d in proc.stdout for d in diagnosis), proc.stdout[-3000:]
    elif severity == "error":  # the run trains, and its summary still shows what make validate reports
        assert proc.returncode == 0, proc.stdout[-2000:]
        assert "this machine cannot show:" in proc.stdout and f"error {rule}" in proc.stdout, proc.stdout[-2000:]
        assert "PASSED (the run only; make validate fails on the 1 above)" in proc.stdout, proc.stdout[-2000:]
    else:  # the run trains, as the warning says it can
        assert proc.returncode == 0 and "\nPASSED: " in proc.stdout, proc.stdout[-2000:]


@pytest.mark.timeout(300)
@pytest.mark.skipif(not ISOLATED, reason="libsocket_wrapper is not installed: there is only the host network")
def test_on_the_host_network_a_master_addr_naming_pod_1_trains(tmp_path):
    """Without a network per pod the store on pod 0 answers at pod 1's address too: what isolation adds."""
    objs = rendered("overlays/kind-cpu/indexed-job")
    master_addr_names_pod_1(objs)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    proc, _ = simulate(path, tmp_path, 60, env={"SIM_HOST_NETWORK": "1"})
    assert ("network: every pod shares the world's own loopback network" in proc.stdout or
            "network: every pod shares this machine's loopback network" in proc.stdout), proc.stdout[-2000:]
    assert "SIM_HOST_NETWORK=1" in proc.stdout and "127.0.1.2" in proc.stdout
    assert proc.returncode == 0 and "PASSED (the run only" in proc.stdout, proc.stdout[-2000:]


def test_gpu_overlay_is_refused_unless_scaled(tmp_path):
    proc, _ = simulate(REPO / "overlays/gke-t4/indexed-job", tmp_path, 60)
    assert proc.returncode == 2
    assert "requests 1 GPUs per pod" in proc.stderr and "SCALE_TO" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "policies.simulate", str(REPO / "overlays/64x8-h100/pytorchjob")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "64 pods" in proc.stderr


@pytest.mark.timeout(300)
def test_scaled_down_run_says_so(tmp_path):
    proc, _ = simulate(REPO / "overlays/gke-t4/indexed-job", tmp_path, 150, "--scale-to", "2")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "SCALED DOWN on request to 2 pods" in proc.stdout
    assert "nvidia.com/gpu removed" in proc.stdout and "DIST_BACKEND nccl -> gloo" in proc.stdout
    assert "world size reached: 2" in proc.stdout


# What pod 1's torchrun logged in a passing simulation of 64x8-h100/statefulset-lm (shortened): its workers had
# succeeded, then the exit barrier lost the store whose host, pod 0, had left (torch 2.13).
AFTER_SUCCESS = [
    "I1124 04:00:59.120000 14029 torch/distributed/elastic/agent/server/api.py:932] [default] worker group "
    "successfully finished. Waiting 300 seconds for other agents to finish.",
    "[W1124 04:00:59.638782784 TCPStore.cpp:106] [c10d] sendBytes failed on SocketImpl(fd=4, "
    "remote=[ddp-train-lm-001-0.ddp-train]:29500): Broken pipe",
    "Exception raised from sendBytes at /__w/pytorch/pytorch/torch/csrc/distributed/c10d/Utils.hpp:758 "
    "(most recent call first):",
    "E1124 04:00:59.170000 14029 torch/distributed/elastic/agent/server/api.py:1008] Error waiting on exit barrier.",
    "E1124 04:00:59.170000 14029 torch/distributed/elastic/agent/server/api.py:1008] Traceback (most recent call last):",
    "E1124 04:00:59.170000 14029 torch/distributed/elastic/agent/server/api.py:1008] torch.distributed."
    "DistNetworkError: Broken pipe",
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("succeeded", [True, False])
def test_what_torchrun_logs_after_its_workers_succeeded_is_one_line(tmp_path, succeeded):
    lines = AFTER_SUCCESS if succeeded else AFTER_SUCCESS[1:]
    # The lines reach the pod as a ConfigMap volume: a pod reads nothing outside its run folder (sandbox.py).
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "out"},
              "data": {"out.txt": "\n".join(lines) + "\n"}}
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "agent"},
        "spec": {"completionMode": "Indexed", "completions": 1, "parallelism": 1, "template": {"spec": {
            "restartPolicy": "Never", "volumes": [{"name": "out", "configMap": {"name": "out"}}],
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["cat", "/in/out.txt"],
                            "volumeMounts": [{"name": "out", "mountPath": "/in"}]}]}}},
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump_all([config, job]))
    proc, _ = simulate(path, tmp_path, 60)
    assert proc.returncode == 0, proc.stdout
    log = next((tmp_path / "run" / "logs").glob("agent-0-*.log")).read_text()
    assert "Error waiting on exit barrier" in log and "sendBytes failed" in log  # the pod log keeps everything
    if succeeded:
        assert alarming(proc.stdout) == [], proc.stdout
        (note,) = [ln for ln in proc.stdout.splitlines() if "after its workers had succeeded" in ln]
        assert "the rendezvous store was gone" in note and str(tmp_path / "run" / "logs") in note
    else:  # before the workers succeeded, what torch logs matters: it reaches the terminal
        assert "Error waiting on exit barrier" in proc.stdout and "sendBytes failed" in proc.stdout


@pytest.mark.timeout(120)
def test_a_pod_that_is_not_torchrun_runs_as_written(tmp_path):
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "hello"},
        "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c"],
                            "args": ["echo hello from $(JOB_COMPLETION_INDEX) on $(hostname)"]}]}}},
    }
    path = tmp_path / "hello.yaml"
    path.write_text(yaml.safe_dump(job))
    proc, _ = simulate(path, tmp_path, 60)
    assert proc.returncode == 0, proc.stdout
    # Pods are named as the Job controller's generateName does: `<job>-<index>-` and five random characters.
    assert re.search(r"^\[hello-0-[b-z2-9]{5}\] hello from 0 on hello-0$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^\[hello-1-[b-z2-9]{5}\] hello from 1 on hello-1$", proc.stdout, re.M), proc.stdout


def test_bad_input_is_one_line_naming_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    for target, expected in ((tmp_path / "missing", f"error: {tmp_path / 'missing'}: no such file or folder"),
                             (bad, f"error: {bad}:2: invalid YAML")):
        proc, _ = simulate(target, tmp_path, 30)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.startswith(expected) and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.timeout(120)
def test_processes_a_pod_left_in_other_sessions_are_stopped(tmp_path):
    """torchrun's workers run in sessions of their own and a worker blocked in a collective ignores SIGTERM: at the
    deadline every process of the pod goes, not only its process group."""
    marker = "317.25"  # a sleep no other process on this machine runs
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "stuck"},
        "spec": {"completionMode": "Indexed", "completions": 1, "parallelism": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c"],
                            "args": [f"setsid sh -c 'trap \"\" TERM; exec sleep {marker}' & sleep {marker}"]}]}}},
    }
    path = tmp_path / "stuck.yaml"
    path.write_text(yaml.safe_dump(job))
    proc, seconds = simulate(path, tmp_path, 3)
    assert proc.returncode == 1 and "deadline reached" in proc.stdout, proc.stdout
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout.split()
    assert not left, f"processes left behind: {left}"


BIND_PORT_0 = """
import socket, sys, time
go = float(sys.argv[1])
while time.time() < go:
    pass
s = socket.socket()
s.bind(("0.0.0.0", 0))
s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(0.5)
"""


@pytest.mark.skipif(not ISOLATED, reason="libsocket_wrapper or a C compiler is missing: there is no network per pod")
def test_processes_of_one_pod_binding_port_0_at_once_get_distinct_ports(tmp_path):
    """libsocket_wrapper alone can give two processes of one pod the same port when they bind port 0 at the same
    moment (measured: 5 of 30 rounds of two processes); swrap_serial makes the pick and the bind one step."""
    env = {**os.environ, "LD_PRELOAD": f"{name_serializer()} {SWRAP}", "SOCKET_WRAPPER_DEFAULT_IFACE": "11"}
    for round_ in range(8):
        net = tmp_path / f"net{round_}"
        net.mkdir()
        go = str(time.time() + 0.4)
        procs = [subprocess.Popen([sys.executable, "-c", BIND_PORT_0, go], stdout=subprocess.PIPE, text=True,
                                  env={**env, "SOCKET_WRAPPER_DIR": str(net)}) for _ in range(4)]
        ports = [p.communicate(timeout=30)[0].strip() for p in procs]
        assert all(p.isdigit() for p in ports) and len(set(ports)) == 4, ports


DUAL_STACK = r"""
import errno, socket, sys
port = int(sys.argv[1])
old = socket.socket()  # an earlier process of the pod on the IPv4 port: socket_wrapper leaves its file behind
old.bind(("0.0.0.0", port))
old.listen()
old.close()
store = socket.socket(socket.AF_INET6)  # torch's TCPStore (libuv) listens on "::"
store.bind(("::", port))
store.listen()
for family, host in ((socket.AF_INET, "127.0.0.11"), (socket.AF_INET6, "fd00::5357:5f0b")):
    client = socket.socket(family)
    try:
        client.connect((host, port))
        peer = store.accept()[0]
        client.sendall(b"x")
        print(host, "ok" if peer.recv(1) == b"x" else "no data", flush=True)
    except OSError as e:
        print(host, errno.errorcode.get(e.errno, e.errno), flush=True)
"""


@pytest.mark.skipif(not ISOLATED, reason="libsocket_wrapper or a C compiler is missing: there is no network per pod")
def test_a_listener_on_the_ipv6_wildcard_answers_ipv4_too(tmp_path):
    """Linux's "::" listener is dual-stack; socket_wrapper's is IPv6 only, and an IPv4 client met the file an earlier
    process left on the port (refused), retrying it until torch's timeout while the store listened on IPv6: the
    elastic world that re-formed stood still (docs/simulate.md). swrap_serial links the IPv4 name to the listener."""
    env = {**os.environ, "LD_PRELOAD": f"{name_serializer()} {SWRAP}", "SOCKET_WRAPPER_DEFAULT_IFACE": "11",
           "SOCKET_WRAPPER_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", DUAL_STACK, "5002"], env=env, capture_output=True, text=True,
                         timeout=30)
    assert out.stdout.split("\n")[:2] == ["127.0.0.11 ok", "fd00::5357:5f0b ok"], out.stdout + out.stderr


def test_pvc_seeding_copies_folders_and_refuses_bad_items(tmp_path):
    from policies.simulate import pvc
    from policies.simulate.host import SimulationError

    src = tmp_path / "models"
    (src / "tiny-lm").mkdir(parents=True)
    (src / "tiny-lm" / "config.json").write_text("{}")
    run_dir = tmp_path / "run"
    assert pvc.copy(run_dir, pvc.check([f"models-pvc={src}"], run_dir)) == [f"models-pvc <- {src}"]
    assert (run_dir / "pvc" / "models-pvc" / "tiny-lm" / "config.json").read_text() == "{}"
    for bad, why in (("models-pvc", "expected CLAIM=FOLDER"), (f"={src}", "expected CLAIM=FOLDER"),
                     (f"models-pvc={tmp_path / 'absent'}", "is not a folder")):
        with pytest.raises(SimulationError, match=why):
            pvc.check([bad], run_dir)


@pytest.mark.timeout(600)
def test_a_statefulset_that_exits_after_its_run_restarts_for_ever(tmp_path):
    """A StatefulSet restarts a container that exits 0 (restartPolicy Always): without AFTER_DONE=wait the trainer,
    started again, finds its run complete and exits 0 again, which in the cluster goes on for ever. The simulator
    starts it again once, as the kubelet does, and fails the run saying so; with the overlay's AFTER_DONE=wait the
    same run passes (test_kind_cpu_overlay_trains_to_completion)."""
    objs = rendered("overlays/kind-cpu/statefulset")
    for o in objs:
        if o["kind"] == "StatefulSet":
            env = o["spec"]["template"]["spec"]["containers"][0]["env"]
            env[:] = [e for e in env if e["name"] != "AFTER_DONE"]
    path = tmp_path / "no-wait.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    proc, _ = simulate(path, tmp_path)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    assert "exited 0 -> kubelet: restartPolicy Always: container restarted in place after it completed" in out
    assert "already complete" in out and "exit 0, started again, exit 0 again" in out, out[-3000:]
    assert "completed, was started again by its controller (restartPolicy Always) and completed again" in out


@pytest.mark.timeout(400)
def test_a_value_the_trainer_refuses_is_traced_to_its_manifest_setting(tmp_path):
    """Issue 23's DIST_BACKEND=glo in the environment's ConfigMap: every rank exits 2 on argparse's refusal, and the
    diagnosis names the setting (the ConfigMap key the flag's default came from), not 'outside the manifests'."""
    objs = rendered("overlays/kind-cpu/indexed-job")
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("ddp-env"))
    cm["data"]["DIST_BACKEND"] = "glo"
    path = tmp_path / "glo.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    proc, _ = simulate(path, tmp_path, 120)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr
    diagnosis = out[out.index("diagnosis:"):]
    assert ("the trainer refused --backend (invalid choice 'glo' (choose from auto, nccl, gloo)): "
            f"DIST_BACKEND='glo' comes from ConfigMap/{cm['metadata']['name']} data.DIST_BACKEND") in diagnosis, diagnosis
    assert diagnosis.count("the trainer refused --backend") == 1  # once for the world, not per pod
    assert "TRAINER001" in diagnosis and "outside the manifests" not in diagnosis
