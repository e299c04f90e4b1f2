"""What confines a pod (policies/simulate/sandbox.py, confine.py), checked from inside a pod of a real simulation:
its user and capabilities, its own PID namespace and /proc, its own /tmp (TMPDIR in the run folder), no write outside
the run folder, no read outside what it needs, no connection out of its world's network; and confine.py's separate
user and exit status, directly."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from policies.render.offline import _namespace_prefix
from policies.simulate.host import NSS_WRAPPER_CANDIDATES, Network, installed
from policies.simulate.sandbox import CONFINE, IMAGE_UID, Sandbox

pytestmark = pytest.mark.skipif(installed(NSS_WRAPPER_CANDIDATES) is None,
                                reason="libnss_wrapper is not installed (make setup installs Debian's libnss-wrapper)")

# (`$$` is the kubelet's escape for `$`: `$$$$` reaches the shell as `$$`.)
PROBE = ("echo uid=$(id -u); grep CapEff /proc/self/status; echo pid=$$$$; echo procs=$(ls /proc | grep -c '^[0-9]'); "
         "touch {outside}/x 2>/dev/null && echo outside=written || echo outside=refused; "
         "touch \"$TMPDIR/t\" && echo tmp=ok; touch {outside}/../sibling 2>/dev/null || echo parent=refused; "
         "cat {outside}/secret >/dev/null 2>&1 && echo read=allowed || echo read=refused; "
         # socket_wrapper (LD_PRELOAD) would turn the connection into one to its socket folder: a real one here
         "env -u LD_PRELOAD python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)\" "
         "2>/dev/null && echo connect=allowed || echo connect=refused")


def landlock_abi() -> int | None:
    try:
        import landlock
        return int(landlock.landlock_abi_version())
    except Exception:  # no package, or a kernel without Landlock
        return None


def run_pod(tmp_path, env=None, prefix=()):
    """A pod that says what it could do; a file anyone may read and a listener on this machine's loopback outside
    its world (`listener` says whether the pod's connection reached it)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)
    (outside / "secret").write_text("not the pod's")
    (outside / "secret").chmod(0o644)
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        proc, said = _run_pod(tmp_path, outside, listener.getsockname()[1], env, prefix)
        listener.settimeout(0.1)
        try:
            listener.accept()[0].close()
            said["listener"] = "reached"
        except OSError:
            said["listener"] = "not reached"
    finally:
        listener.close()
    return proc, said, outside


def _run_pod(tmp_path, outside, port, env, prefix):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c"],
                                                  "args": [PROBE.format(outside=outside, port=port)]}]}}}}
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(job))
    proc = subprocess.run([*prefix, sys.executable, "-m", "policies.simulate", str(path), "--deadline", "60",
                           "--run-dir", str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    said = dict(line.split("] ", 1)[1].split("=", 1) for line in proc.stdout.splitlines()
                if line.startswith("[probe-") and "=" in line)
    return proc, said


@pytest.mark.skipif(os.geteuid() != 0, reason="the rows checked here are those of a machine where the simulator is root")
def test_from_inside_a_pod(tmp_path):
    proc, said, outside = run_pod(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "enforced here:" in proc.stdout
    assert said["outside"] == "refused" and not (outside / "x").exists()  # Landlock, not file modes: 0777
    assert said["parent"] == "refused"
    assert said["tmp"] == "ok"
    assert said["pid"] == "2"  # the command is pid 2 of the pod's own PID namespace, under its init
    assert int(said["procs"]) <= 8  # its own /proc: the init, the shell and what it runs (this machine: hundreds)
    assert "CapEff:\t0000000000000000" in proc.stdout  # a separate user or root without capability: none either way


def test_no_read_outside_and_no_network_out_of_the_world(tmp_path):
    """A pod reads no file outside what it needs (a file anyone may read, in a folder outside the run folder), and
    reaches no listener on this machine's loopback; where the kernel has neither, one line of the run says so."""
    proc, said, outside = run_pod(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    [line] = [line for line in proc.stdout.splitlines() if "NOT enforced:" in line]
    if _namespace_prefix() is not None:
        assert "a network namespace per world" in line.split("NOT enforced:")[0], line
        assert said["connect"] == "refused" and said["listener"] == "not reached", said
    else:
        assert "the network (no network namespace: " in line.split("NOT enforced:")[1], line
    if landlock_abi() is not None:
        assert "no read outside the run folder" in line.split("NOT enforced:")[0], line
        assert said["read"] == "refused", said
    else:
        assert "reads (Landlock: " in line.split("NOT enforced:")[1], line
    if _namespace_prefix() is None or landlock_abi() is None:
        pytest.skip("this machine allows no network namespace" if _namespace_prefix() is None else
                    "this kernel has no Landlock: reads are not confined")


# A kernel that refuses a network namespace: in a user namespace of its own that may hold none
# (user.max_net_namespaces=0 there), `unshare` fails as a seccomp profile would make it.
REFUSED = ("unshare", "--user", "--map-root-user", "sh", "-c",
           'echo 0 > /proc/sys/user/max_net_namespaces && exec "$@"', "sh")


def _can_refuse() -> bool:
    try:
        return subprocess.run([*REFUSED, "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.parametrize("how", ["kernel", "off"])
def test_without_a_network_namespace_one_line_says_so(tmp_path, how):
    """Where no namespace is made (the kernel refuses it, or POLICIES_NETWORK_NAMESPACE=off), the run still runs,
    and one line says the network is not confined and why; the pod then reaches the listener (so the test above can
    fail)."""
    if how == "kernel" and not _can_refuse():
        pytest.skip("this machine cannot make a user namespace that refuses network namespaces")
    proc, said, outside = (run_pod(tmp_path, prefix=REFUSED) if how == "kernel" else
                           run_pod(tmp_path, {"POLICIES_NETWORK_NAMESPACE": "off"}))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    said_network = [line for line in proc.stdout.splitlines() if "the network (no network namespace" in line]
    assert len(said_network) == 1, proc.stdout[-3000:]
    why = "unshare: No space left on device" if how == "kernel" else "POLICIES_NETWORK_NAMESPACE=off"
    assert f"the network (no network namespace: {why}; a pod can connect wherever this machine can)" in said_network[0]
    assert said["connect"] == "allowed" and said["listener"] == "reached", said


def test_sim_sandbox_off_runs_pods_as_before(tmp_path):
    proc, said, outside = run_pod(tmp_path, {"SIM_SANDBOX": "off"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "NOT enforced: any confinement (SIM_SANDBOX=off)" in proc.stdout
    assert said["outside"] == "written" and said["read"] == "allowed" and said["listener"] == "reached", said


def confine(config: dict, *command: str):
    config = {"parent": os.getpid(), "uid": None, "gid": None, "namespaces": True, "landlock": True, "write": [],
              "write_files": [], **config}
    return subprocess.run([sys.executable, "-I", str(CONFINE), json.dumps(config), "--", *command],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="a separate user needs root")
def test_a_separate_user_where_root(tmp_path):
    out = confine({"uid": IMAGE_UID, "gid": IMAGE_UID, "probe": True, "outside": str(tmp_path)})
    seen = json.loads(out.stdout)
    assert seen["uid"] == IMAGE_UID and seen["capabilities"] == "0000000000000000", seen


def test_the_exit_status_is_the_commands():
    assert confine({}, "/bin/sh", "-c", "exit 7").returncode == 7
    assert confine({}, "/bin/sh", "-c", "kill -9 $$").returncode == -9
    assert confine({"namespaces": False}, "/bin/sh", "-c", "kill -15 $$").returncode == -15


def test_the_probe_says_what_this_machine_enforces():
    network = Network()
    try:
        box = Sandbox.probe(Path(sys.executable).parent, network)
    finally:
        network.close()
    line = box.line()
    assert "enforced here:" in line and "NOT enforced:" in line
    assert ("no read outside" in line) != ("reads (Landlock: " in line)
    assert ("a network namespace per world" in line) != ("the network (no network namespace: " in line)
    if os.geteuid() == 0:
        assert box.namespaces and ("a separate user" in line)
