"""Hostile input to the validator (issue 15): YAML alias bombs and deep nesting, kustomize fed a bomb, symlink loops,
binary on standard input, paths with spaces, and what is said on standard error. Each is one line naming the file,
within bounded memory and time, and the other inputs are still checked."""
from __future__ import annotations

import json
import os
import pty
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from policies.render import files, render
from policies.render.loader import InputError, check_bounds

SERVICE = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n"
MEMORY_LIMIT = 1_500_000_000  # address space for one CLI run; the unbounded alias bomb needed 24 GB


def laughs(levels: int = 9, fanout: int = 9, pad: int = 0, where: str = "metadata.annotations") -> str:
    """The billion laughs as a ConfigMap: `levels` anchors, each a list of `fanout` aliases to the one before,
    under `metadata.annotations` (issue 15's bomb: 537 bytes at 9 x 9) or `data`, after `pad` plain keys."""
    head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n"
    head += "  annotations:\n" if where == "metadata.annotations" else "data:\n"
    indent = "    " if where == "metadata.annotations" else "  "
    lines = [f"{indent}p{i}: v" for i in range(pad)]
    lines.append(f"{indent}l0: &a0 [" + ",".join(['"lol"'] * fanout) + "]")
    lines += [f"{indent}l{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fanout) + "]" for i in range(1, levels)]
    return head + "\n".join(lines) + "\n"


def limited_cli(*args: str, stdin: bytes | None = None, cwd: Path = REPO, timeout: float = 120,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI under an address-space limit (as `prlimit --as` would set it)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    proc = subprocess.run([sys.executable, "-m", "policies.cli", *args], cwd=cwd, input=stdin, capture_output=True,
                          timeout=timeout, preexec_fn=limit, env=env)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def problem_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in proc.stdout + proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]
    return [ln for ln in proc.stdout.splitlines() if ln.startswith(("error ", "warning "))]


# ---------------------------------------------------------------- 1. what one document may expand to

def test_the_issue_alias_bomb_is_one_line_naming_the_file(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(laughs())
    assert len(bomb.read_bytes()) < 600
    proc = limited_cli("validate", "--schema", "builtin", str(bomb), str(REPO / "tests/fixtures/upstream/"
                                                                         "runs-as-written/pytorchjob-simple.yaml"))
    [line] = [ln for ln in problem_lines(proc) if ln.startswith("error")]
    assert line.startswith(f"error INPUT {bomb}:") and "excessive aliasing" in line, line
    assert proc.returncode == 1 and "2 files" in proc.stdout.splitlines()[-1]


def test_a_bomb_on_standard_input_too():
    proc = limited_cli("validate", "--schema", "builtin", "-", stdin=laughs(where="data").encode())
    [line] = problem_lines(proc)
    assert line.startswith("error INPUT <stdin>:") and "excessive aliasing" in line


@pytest.mark.parametrize("levels, fanout, accepted", [(3, 10, True), (4, 10, False), (2, 40, True), (3, 40, False)])
def test_go_yamls_alias_rule_in_process(levels, fanout, accepted):
    """go-yaml's rule: past 100 aliased and 1,000 decoded nodes, at most 99 % may come from aliases."""
    text = laughs(levels, fanout, where="data")
    if accepted:
        check_bounds(text, "x.yaml")
    else:
        with pytest.raises(InputError, match=r"^x\.yaml:\d+: document 1: excessive aliasing"):
            check_bounds(text, "x.yaml")


def _kubeconform() -> Path | None:
    env = os.environ.get("KUBECONFORM_TEST_BIN")
    candidates = ([Path(env)] if env else []) + [REPO / "bin" / "kubeconform"]
    if shutil.which("kubeconform"):
        candidates.append(Path(shutil.which("kubeconform")))  # type: ignore[arg-type]
    candidates += [base / "shared" / "tools" / "kubeconform" for base in (REPO.parent, REPO.parent.parent)]
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


@pytest.mark.skipif(_kubeconform() is None, reason="no kubeconform binary to compare with (KUBECONFORM_TEST_BIN)")
def test_refuses_exactly_what_kubeconforms_yaml_reader_refuses(tmp_path):
    """Differential: documents around go-yaml's alias limit (small and large, aliases before and after plain
    nodes), each given to kubeconform (sigs.k8s.io/yaml's go-yaml) and to the loader: the same ones are refused."""
    cases = [(lv, fo, pad, where) for lv in (2, 3, 4, 5) for fo in (3, 6, 10, 21, 33) for pad in (0, 400, 3000)
             for where in ("data", "metadata.annotations")]
    files = []
    for i, (lv, fo, pad, where) in enumerate(cases):
        f = tmp_path / f"c{i:03d}.yaml"
        f.write_text(laughs(lv, fo, pad, where))
        files.append(f)
    out = subprocess.run([str(_kubeconform()), "-output", "json", "-skip", "ConfigMap", *map(str, files)],
                         capture_output=True, text=True, timeout=300).stdout
    refused_there = {Path(r["filename"]).name for r in json.loads(out)["resources"]
                     if "excessive aliasing" in r.get("msg", "")}
    refused_here = set()
    for f in files:
        try:
            check_bounds(f.read_text(), f.name)
        except InputError as exc:
            assert "excessive aliasing" in str(exc)
            refused_here.add(f.name)
    assert refused_there and len(refused_there) < len(files)
    assert refused_here == refused_there


@pytest.mark.parametrize("text, expect", [
    ("[" * 100_000 + "]" * 100_000, "nests deeper than 256 levels"),
    ("- " * 50_000 + "x\n", "nests deeper than 256 levels"),
    ("".join(f"{' ' * 2 * i}k:\n" for i in range(300)), "nests deeper than 256 levels"),
    ('{"a":' * 20_000 + "1" + "}" * 20_000, "nests deeper than 256 levels"),
    ("a: &d " + "[" * 200 + "]" * 200 + "\nb: " + "[" * 100 + "*d" + "]" * 100 + "\n",
     "alias *d makes it nest deeper than 256 levels"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: &x\n  a: *x\n", "anchor 'x' contains an alias to itself"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  s: &s " + "x" * (1 << 20) + "\n  t: [" +
     ",".join(["*s"] * 3) + "]\n", "expands to more than 3 MiB of text"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  s: " + "x" * (4 << 20) + "\n",
     "holds more than 3 MiB of text"),
])
def test_depth_self_reference_and_size_are_one_line(tmp_path, text, expect):
    """Before the bounds: libyaml's composer crashed the interpreter (SIGSEGV) at 100,000 levels, a self-referencing
    anchor was an endless object, an aliased megabyte scalar grew without limit."""
    f = tmp_path / ("deep.json" if text.startswith('{"a"') else "in.yaml")
    f.write_text(text)
    proc = limited_cli("validate", "--schema", "builtin", str(f), timeout=60)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-500:])
    [line] = problem_lines(proc)
    assert line.startswith(f"error INPUT {f}") and expect in line, line


def test_an_endless_input_stops_at_the_size_bound():
    proc = limited_cli("validate", "--schema", "builtin", "/dev/zero", timeout=60)
    [line] = problem_lines(proc)
    assert line == "error INPUT /dev/zero: larger than 32 MiB, the most one input may be (split it)"


def test_a_large_regular_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    f = tmp_path / "big.yaml"
    f.write_text(SERVICE + "#" * 2000 + "\n")
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 1000)
    with pytest.raises(InputError, match="big.yaml: larger than"):
        files.read(str(f))


# ---------------------------------------------------------------- 1b. kustomize fed a bomb

def test_kustomize_on_a_bomb_is_bounded_and_one_line(tmp_path, monkeypatch):
    """kustomize expands aliases as it reads: unbounded it died with a Go stack dump after taking gigabytes. Its
    memory limit is lowered here only to keep the test quick; the message names the overlay and the file."""
    overlay = tmp_path / "bombed"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources:\n- bomb.yaml\n")
    (overlay / "bomb.yaml").write_text(laughs())
    monkeypatch.setattr(render, "KUSTOMIZE_MEMORY_BYTES", 256 * 1024 * 1024)
    monkeypatch.setenv("POLICIES_NO_CACHE", "1")
    got = render.render(overlay)
    assert got.error is not None and "\n" not in got.error and "goroutine" not in got.error
    assert got.error.startswith(f"{overlay / 'kustomization.yaml'}: kustomize ran out of memory"), got.error
    assert f"{overlay / 'bomb.yaml'}:9: document 1: excessive aliasing" in got.error


def test_kustomize_time_and_output_are_bounded(tmp_path, monkeypatch):
    slow = render.run_bounded([sys.executable, "-c", "import time; time.sleep(30)"], timeout=1)
    assert slow.failure == "kustomize did not finish within 1 s"
    monkeypatch.setattr(render, "MAX_INPUT_BYTES", 1000)
    loud = render.run_bounded([sys.executable, "-c", "import sys; sys.stdout.write('x' * 100000)"])
    assert loud.failure and "larger than" in loud.failure and len(loud.stdout) <= 1000
    crash = render.run_bounded([sys.executable, "-c", "import sys; sys.stderr.write('panic: boom\\n\\ngoroutine 1 "
                                "[running]:\\nmain.main()\\n'); sys.exit(2)"])
    assert crash.failure == "kustomize crashed: panic: boom"


# ---------------------------------------------------------------- 2. symlink loops

def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for d in ("base", "components"):
        shutil.copytree(REPO / d, root / d)
    for o in ("kind-cpu/indexed-job", "gke-t4/statefulset"):
        shutil.copytree(REPO / "overlays" / o, root / "overlays" / o)
    shutil.copy(REPO / "gitops.yaml", root)
    (root / "overlays/kind-cpu/loop.yaml").symlink_to("loop.yaml")
    (root / "overlays/kind-cpu/dangling.yaml").symlink_to("nowhere.yaml")
    (root / "overlays/kind-cpu/x").mkdir()
    (root / "overlays/kind-cpu/x/kustomization.yaml").symlink_to("kustomization.yaml")
    (root / "overlays/kind-cpu/indexed-job/loop.yaml").symlink_to("loop.yaml")
    return root


def test_symlink_loops_are_one_line_each_and_the_rest_is_validated(tmp_path):
    root = _tree(tmp_path)
    proc = run_cli("validate", "--schema", "builtin", str(root / "overlays"))
    lines = problem_lines(proc)
    assert sorted(lines) == sorted([
        f"error INPUT {root}/overlays/kind-cpu/loop.yaml: a symlink loop (a link that leads back to itself): remove "
        "or fix the link",
        f"error INPUT {root}/overlays/kind-cpu/x/kustomization.yaml: a symlink loop (a link that leads back to "
        "itself): remove or fix the link",
        f"error INPUT {root}/overlays/kind-cpu/dangling.yaml: a symlink to nowhere.yaml, which does not exist"])
    assert proc.returncode == 1 and proc.stdout.splitlines()[-1].startswith("FAILED: 2 rendered folders, 3 files")


def test_symlink_loops_in_plan(tmp_path):
    root = _tree(tmp_path)
    proc = run_cli("plan", str(root / "overlays"))
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.returncode == 1
    assert "cannot plan: a symlink loop (a link that leads back to itself)" in proc.stdout
    assert proc.stdout.count("| Job/") == 1 and proc.stdout.count("| StatefulSet/") == 1  # both overlays planned


def test_symlink_loop_in_the_changed_files(tmp_path):
    root = _tree(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "policies.changed", "--root", str(root),
                           "overlays/kind-cpu/indexed-job/loop.yaml", "overlays/kind-cpu/loop.yaml",
                           "overlays/gke-t4/statefulset/kustomization.yaml"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "overlays/gke-t4/statefulset overlays/kind-cpu/indexed-job" in proc.stderr
    # overlays/kind-cpu/loop.yaml is a plain manifest beside the overlays, which make validate reads (and reports as
    # one line): the hook does too.
    assert "overlays/kind-cpu/loop.yaml: a symlink loop" in proc.stdout
    assert proc.returncode == 1 and proc.stdout.splitlines()[-1].startswith("FAILED: 2 rendered folders")


def test_a_kustomization_that_lists_a_symlink_loop(tmp_path):
    root = _tree(tmp_path)
    k = root / "overlays/kind-cpu/indexed-job/kustomization.yaml"
    k.write_text(k.read_text().replace("resources:\n  - ", "resources:\n  - loop.yaml\n  - ", 1))
    proc = run_cli("validate", "--schema", "builtin", str(root / "overlays/kind-cpu/indexed-job"),
                   str(root / "overlays/gke-t4/statefulset"))
    [line] = problem_lines(proc)
    assert line == (f"error INPUT {k}: kustomize failed: {root}/overlays/kind-cpu/indexed-job/loop.yaml: a symlink "
                    "loop (a link that leads back to itself): remove or fix the link")
    assert "2 rendered folders" in proc.stdout.splitlines()[-1]


# ---------------------------------------------------------------- 3. bytes that are not UTF-8

@pytest.mark.parametrize("data", [bytes(range(256)) * 8, b"apiVersion: v1\nkind: \xff\xfe\n",
                                  b"\xef\xbb\xbf\xc3\x28"])
def test_binary_on_standard_input_is_one_line(data):
    proc = limited_cli("validate", "--schema", "builtin", "-", stdin=data)
    [line] = problem_lines(proc)
    assert line.startswith("error INPUT <stdin>: not UTF-8 text (byte 0x"), line


def test_binary_on_standard_input_under_the_c_locale():
    """Under LC_ALL=C Python reads standard input with surrogateescape: printing it failed (UnicodeEncodeError)."""
    env = dict(os.environ, LC_ALL="C", LANG="C", PYTHONUTF8="0")
    proc = limited_cli("validate", "--schema", "builtin", "-", stdin=b"kind: \x80\x81\n", env=env)
    [line] = problem_lines(proc)
    assert line == "error INPUT <stdin>: not UTF-8 text (byte 0x80 at offset 6): a manifest is UTF-8 YAML or JSON"


def test_a_non_utf8_file_names_the_byte(tmp_path):
    f = tmp_path / "latin1.yaml"
    f.write_bytes(SERVICE.replace("web", "caf\xe9").encode("latin-1"))
    [line] = problem_lines(run_cli("validate", str(f)))
    offset = SERVICE.index("web") + 3
    assert line == f"error INPUT {f}: not UTF-8 text (byte 0xe9 at offset {offset}): a manifest is UTF-8 YAML or JSON"


# ---------------------------------------------------------------- 4. paths with spaces

def test_a_path_with_a_space_on_the_command_line(tmp_path):
    f = tmp_path / "my file.yaml"
    f.write_text(SERVICE)
    proc = run_cli("validate", "--schema", "builtin", str(f))
    assert proc.returncode == 0 and proc.stdout.startswith("OK: 1 file, 1 object"), proc.stdout
    missing = run_cli("validate", str(tmp_path / "no such.yaml"))
    assert problem_lines(missing) == [f"error INPUT {tmp_path / 'no such.yaml'}: no such file or folder"]


@pytest.mark.parametrize("paths", ['"{f}"', "{f}", "'{f}' {other}"])
def test_a_path_with_a_space_through_make(tmp_path, paths):
    if not (REPO / ".venv/bin/python").exists() or shutil.which("make") is None:
        pytest.skip("needs make and the repository's .venv (make setup)")
    f = tmp_path / "my file.yaml"
    f.write_text(SERVICE)
    other = tmp_path / "other.yaml"
    other.write_text(SERVICE.replace("web", "api"))
    proc = subprocess.run(["make", "-s", "validate", "PATHS=" + paths.format(f=f, other=other)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK: 2 files" if "{other}" in paths else "OK: 1 file,"), proc.stdout


# ---------------------------------------------------------------- 5. what is said on standard error

def test_no_kustomize_banner_for_files_and_standard_input(tmp_path):
    f = tmp_path / "svc.yaml"
    f.write_text(SERVICE)
    files = run_cli("validate", "--schema", "builtin", str(f), "-", stdin=SERVICE)
    assert files.returncode == 0 and files.stderr == ""
    overlay = run_cli("validate", "--schema", "builtin", str(REPO / "overlays/kind-cpu/indexed-job"))
    assert overlay.stderr.startswith("kustomize v") and "build options" in overlay.stderr
    if (REPO / ".venv/bin/python").exists() and shutil.which("make"):
        made = subprocess.run(["make", "-s", "validate", f"PATHS={f}"], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
        assert made.returncode == 0 and made.stderr == "", made.stderr


def test_standard_input_on_a_terminal_says_it_is_waiting():
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "policies.cli", "validate", "--schema", "builtin", "-"],
                                cwd=REPO, stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(follower)
        os.write(leader, SERVICE.replace("\n", "\r").encode() + b"\r\x04")
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(leader)
    assert err.splitlines()[0] == "reading manifests from standard input (end with Ctrl-D)"
    assert proc.returncode == 0 and out.startswith("OK: 1 file, 1 object"), (out, err)
    piped = run_cli("validate", "--schema", "builtin", "-", stdin=SERVICE)
    assert piped.stderr == ""


# ---------------------------------------------------------------- 6. nothing points outside the repository

def test_nothing_the_product_needs_points_at_the_shared_folder():
    """The README, docs, code, Makefile and messages (the SCHEMA-MISSING hint) name only paths inside the
    repository; tests may use ../shared/tools, and fixtures cite where they came from."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    offenders = []
    for name in tracked:
        if name.startswith("tests/"):
            continue
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        offenders += [f"{name}:{i}" for i, line in enumerate(text.splitlines(), 1) if "../shared" in line]
    assert offenders == []


def test_kustomize_runs_without_go_collecting_until_its_memory_limit(monkeypatch) -> None:
    """Renders are short-lived: Go's collector stays off until GOMEMLIMIT, half the memory bound (render.py says
    why); a GOGC or GOMEMLIMIT the user set is passed through untouched."""
    from policies.render import render

    show = ["/bin/sh", "-c", 'echo "$GOGC $GOMEMLIMIT"']
    for name in render.KUSTOMIZE_GO_ENV:
        monkeypatch.delenv(name, raising=False)
    assert render.run_bounded(show).stdout.decode().split() == ["off", "512MiB"]
    monkeypatch.setenv("GOGC", "100")
    assert render.run_bounded(show).stdout.decode().split() == ["100"]


# ---------------------------------------------------------------- counts a manifest states, not pods anyone lists

HUGE = 2_147_483_647  # int32's maximum, what the CRDs allow for replicas
MPIJOB = f"""apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {{name: pi}}
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: l
            image: mpioperator/mpi-pi:openmpi
            command: [mpirun, -np, "4", -H, "pi-worker-0:1,pi-worker-7:1", python, train.py]
    Worker:
      replicas: {HUGE}
      template:
        spec:
          containers: [{{name: w, image: mpioperator/mpi-pi:openmpi}}]
"""


def test_a_huge_worker_count_is_never_listed_host_by_host(tmp_path):
    """mpirun's hosts were once every worker's name in a list: 2**31-1 workers (a mutation in test_no_internal_error)
    took the test run past 24 GB and the machine's OOM killer ended CI. Bounded memory, and the hosts still read."""
    path = tmp_path / "mpijob.yaml"
    path.write_text(MPIJOB)
    proc = limited_cli("validate", "--schema", "builtin", str(path), timeout=300)
    problem_lines(proc)
    assert "INTERNAL" not in proc.stdout and "MemoryError" not in proc.stdout, proc.stdout[-2000:]
    assert "pi-worker-7" not in proc.stdout  # a pod of this job: not reported as a stranger
