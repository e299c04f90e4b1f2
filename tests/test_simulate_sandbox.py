"""What confines a pod (policies/simulate/sandbox.py, confine.py), checked from inside a pod of a real simulation:
its user and capabilities, its own PID namespace and /proc, its own /tmp (TMPDIR in the run folder), no write outside
the run folder; and confine.py's separate user and exit status, directly."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from policies.simulate.host import NSS_WRAPPER_CANDIDATES, installed
from policies.simulate.sandbox import CONFINE, IMAGE_UID, Sandbox

pytestmark = pytest.mark.skipif(installed(NSS_WRAPPER_CANDIDATES) is None,
                                reason="libnss_wrapper is not installed (make setup installs Debian's libnss-wrapper)")

# (`$$` is the kubelet's escape for `$`: `$$$$` reaches the shell as `$$`.)
PROBE = ("echo uid=$(id -u); grep CapEff /proc/self/status; echo pid=$$$$; echo procs=$(ls /proc | grep -c '^[0-9]'); "
         "touch {outside}/x 2>/dev/null && echo outside=written || echo outside=refused; "
         "touch \"$TMPDIR/t\" && echo tmp=ok; touch {outside}/../sibling 2>/dev/null || echo parent=refused")


def run_pod(tmp_path, env=None):
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c"],
                                                  "args": [PROBE.format(outside=outside)]}]}}}}
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(job))
    proc = subprocess.run([sys.executable, "-m", "policies.simulate", str(path), "--deadline", "60", "--run-dir",
                           str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    said = dict(line.split("] ", 1)[1].split("=", 1) for line in proc.stdout.splitlines()
                if line.startswith("[probe-") and "=" in line)
    return proc, said, outside


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


def test_sim_sandbox_off_runs_pods_as_before(tmp_path):
    proc, said, outside = run_pod(tmp_path, {"SIM_SANDBOX": "off"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "NOT enforced: any confinement (SIM_SANDBOX=off)" in proc.stdout
    assert said["outside"] == "written"


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
    box = Sandbox.probe(Path(sys.executable).parent)
    line = box.line()
    assert "enforced here:" in line and "NOT enforced:" in line and "reads" in line and "the network" in line
    if os.geteuid() == 0:
        assert box.namespaces and ("a separate user" in line)
