"""The GitHub Action (action.yml, composite) other repositories use, linted as the workflows are
(tests/test_workflows.py: GitHub's schema offline, actionlint where installed, pinned actions, no expression inside a
script), and its scripts run for real with bash against the installed package: the install from the hash-pinned lock
(action-requirements.txt, offline from the wheelhouse), the check with its annotations and job summary, the word on a
SARIF upload that was skipped or refused, and the verdict."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from conftest import REPO
from package_helpers import Installed, offline_env, outside_checkout
from test_workflows import _zizmor, actionlint, checker

ACTION = REPO / "action.yml"
DOC = yaml.safe_load(ACTION.read_text())
STEPS = DOC["runs"]["steps"]
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
LOCK = REPO / "action-requirements.txt"


def test_action_matches_the_github_schema_offline():
    cmd = checker()
    if cmd is None:
        pytest.skip("check-jsonschema is not installed (requirements-dev.txt; run make setup)")
    proc = subprocess.run([*cmd, "--builtin-schema", "vendor.github-actions", str(ACTION)], capture_output=True,
                          text=True, env=dict(os.environ, **OFFLINE), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_schema_lint_catches_a_broken_action(tmp_path):
    cmd = checker()
    if cmd is None:
        pytest.skip("check-jsonschema is not installed (requirements-dev.txt; run make setup)")
    bad = tmp_path / "action.yml"
    bad.write_text("name: x\ndescription: y\nruns:\n  using: composite\n  step:\n    - run: echo\n")
    proc = subprocess.run([*cmd, "--builtin-schema", "vendor.github-actions", str(bad)], capture_output=True,
                          text=True, env=dict(os.environ, **OFFLINE), timeout=120)
    assert proc.returncode == 1


def test_inputs_paths_environment_format_and_sarif_upload():
    assert DOC["runs"]["using"] == "composite"
    inputs = DOC["inputs"]
    assert {"paths", "environment", "format", "strict", "upload-sarif"} <= set(inputs)
    assert all(isinstance(i["default"], str) for i in inputs.values())
    from policies.cli import parser

    validate = next(a for a in parser()._subparsers._group_actions[0].choices["validate"]._actions
                    if a.dest == "format")
    assert inputs["format"]["default"] in validate.choices
    assert all(c in inputs["format"]["description"] for c in validate.choices)
    upload = [s for s in STEPS if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    assert len(upload) == 1 and upload[0]["with"]["sarif_file"] == "${{ steps.check.outputs.sarif-file }}"
    upload_doc = inputs["upload-sarif"]["description"]
    assert "fork" in upload_doc and "never a failed job" in upload_doc


def test_steps_are_pinned_and_scripts_hold_no_expression():
    lines = [line for line in ACTION.read_text().splitlines() if re.match(r"^\s*(- )?uses:", line)]
    used = [s["uses"] for s in STEPS if "uses" in s]
    assert len(lines) == len(used) >= 2
    for ref, line in zip(used, lines):
        assert re.match(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$", ref), ref
        assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), line
    for step in STEPS:
        if "run" in step:
            assert step["shell"] == "bash"  # a composite step must name its shell
            # Inputs reach a script through env only: an expression inside it is code injection.
            assert "${{" not in step["run"], step["run"]


def test_actionlint_checks_a_workflow_that_uses_the_action(tmp_path):
    exe = actionlint()
    project = tmp_path / "project"
    (project / ".github" / "workflows").mkdir(parents=True)
    (project / "action.yml").write_text(ACTION.read_text())
    (project / ".github" / "workflows" / "check.yaml").write_text(
        "name: check\non: pull_request\npermissions: {contents: read, security-events: write}\njobs:\n"
        "  check:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n"
        "      - uses: ./\n        with:\n          paths: overlays\n          format: text\n")
    proc = subprocess.run([exe, "-no-color"], cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _script(step_id_or_name: str) -> tuple[str, dict[str, str]]:
    step = next(s for s in STEPS if step_id_or_name in (s.get("id"), s.get("name")))
    return step["run"], step.get("env", {})


@pytest.mark.slow
def test_the_action_scripts_check_and_fail_as_the_step_would(installed: Installed, tmp_path):
    """The Check and Verdict scripts run with bash as the runner runs them: RUNNER_TEMP holds the virtualenv the
    install step makes (here the package installed from the wheel), inputs arrive as the step's env, the job summary
    is a file of GITHUB_STEP_SUMMARY. A problem is an annotation on its file and line (workflow commands on standard
    output), and the summary holds the table; the verdict is ddp-check's exit code."""
    runner_temp = outside_checkout(tmp_path / "runner-temp")
    runner_temp.mkdir()
    (runner_temp / "ddp-check").symlink_to(installed.venv)
    work = tmp_path / "workspace"
    (work / "deploy").mkdir(parents=True)
    (work / "jobs").mkdir()
    corpus = REPO / "tests" / "corpus"
    (work / "deploy" / "good.yaml").write_text((corpus / "pytorchjob" / "kueue-sample-pytorchjob.yaml").read_text())
    broken = corpus / "appwrapper" / "appwrapper-wrapped-failing-pytorch-job.yaml"
    (work / "broken.yaml").write_text(broken.read_text())
    (work / "jobs" / "broken, too.yaml").write_text(broken.read_text())  # a comma: escaped in the annotation
    check, _ = _script("check")
    verdict, _ = _script("Verdict")

    def run(paths: str, strict: str = "false", fmt: str = "text", env_file: str = "",
            bundle: str = "false") -> dict[str, str]:
        n = len(list(tmp_path.glob("output-*")))
        out, summary = tmp_path / f"output-{n}", tmp_path / f"summary-{n}.md"
        summary.write_text("earlier step's summary\n")
        env = installed.env(RUNNER_TEMP=str(runner_temp), GITHUB_OUTPUT=str(out), GITHUB_STEP_SUMMARY=str(summary),
                            GITHUB_WORKSPACE=str(work), PATHS=paths, POLICY_ENV=env_file, FORMAT=fmt, STRICT=strict,
                            BUNDLE=bundle)
        proc = subprocess.run(["bash", "-e", "-c", check], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr  # the step itself passes: the verdict comes last
        outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
        outputs["log"] = proc.stdout
        outputs["stderr"] = proc.stderr
        outputs["summary"] = summary.read_text()
        assert outputs["summary"].startswith("earlier step's summary\n###")  # appended to, never overwritten
        final = subprocess.run(["bash", "-e", "-c", verdict], env=dict(os.environ, CODE=outputs["exit-code"]),
                               timeout=60)
        outputs["verdict"] = str(final.returncode)
        return outputs

    def annotations(log: str, level: str) -> list[tuple[str, int, str, str]]:
        found = re.findall(rf"^::{level} file=([^,]*),line=(\d+),title=([^:]*)::(.*)$", log, re.M)
        return [(f, int(n), t, m) for f, n, t, m in found]

    good = run("deploy")
    assert good["exit-code"] == "0" and good["verdict"] == "0" and "OK: 1 file" in good["log"]
    assert not re.search(r"^::error", good["log"], re.M)
    assert "### ddp-check passed" in good["summary"] and "**0 errors**" in good["summary"]
    sarif = json.loads(Path(good["sarif-file"]).read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"]
    both = run("deploy\nbroken.yaml\njobs")  # new lines separate paths, as a YAML block input gives them
    assert both["exit-code"] == "1" and both["verdict"] == "1" and "error IMG003 broken.yaml" in both["log"]
    errors = [r for r in json.loads(Path(both["sarif-file"]).read_text())["runs"][0]["results"]
              if r["level"] == "error"]
    assert [e["ruleId"] for e in errors] == ["IMG003", "IMG003"]
    assert {e["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for e in errors} == \
        {"broken.yaml", "jobs/broken, too.yaml"}
    # One ::error annotation per error, on SARIF's file and line: the line of the one-word command.
    flagged = annotations(both["log"], "error")
    assert sorted((f, n, t) for f, n, t, _ in flagged) == [
        ("broken.yaml", 40, "IMG003"), ("jobs/broken%2C too.yaml", 40, "IMG003")]
    assert (work / "broken.yaml").read_text().splitlines()[39].strip() == "- sleep 10; exit 1"
    assert all(e["locations"][0]["physicalLocation"]["region"]["startLine"] == 40 for e in errors)
    assert "command[0] is 'sleep 10; exit 1'" in flagged[0][3]
    assert annotations(both["log"], "warning") and annotations(both["log"], "notice")
    table = [line for line in both["summary"].splitlines() if line.startswith("| ")]
    assert table[0] == "| severity | rule | object | file:line | message |"
    assert any(line.startswith("| error | IMG003 | AppWrapper/sample-failing-pytorch-job spec.components\\[0\\]")
               and "| broken.yaml:40 |" in line for line in table)
    assert "### ddp-check failed" in both["summary"] and "**2 errors**" in both["summary"]
    assert len(table) - 1 == len(re.findall(r"^::(error|warning|notice) ", both["log"], re.M))
    # The log's report as annotations: printed once, not twice.
    as_github = run("broken.yaml", fmt="github")
    assert len(annotations(as_github["log"], "error")) == 1 and as_github["verdict"] == "1"
    strict = run("deploy", strict="true")
    assert strict["exit-code"] == "1" and strict["verdict"] == "1"
    assert annotations(strict["log"], "error") and not annotations(strict["log"], "warning")
    # bundle: a folder's files as one input; the Namespace in one file holds the pod in the other to its level
    (work / "split").mkdir()
    (work / "split" / "namespace.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: train\n"
                                                   "  labels: {pod-security.kubernetes.io/enforce: baseline}\n")
    (work / "split" / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: train}\n"
                                             "spec:\n  hostPID: true\n  containers: [{name: c, image: 'busybox:1.37'}]\n")
    assert run("split")["exit-code"] == "0"
    together = run("split", bundle="true")
    assert together["exit-code"] == "1" and ("split/pod.yaml", 4, "SEC010") in [
        (f, n, t) for f, n, t, _ in annotations(together["log"], "error")]
    # Bad input: no report, no SARIF file to upload; an annotation and the summary say so, the verdict is 2.
    bad = run("deploy", env_file="no-such-policy.yaml")
    assert bad["exit-code"] == "2" and bad["verdict"] == "2" and "sarif-file" not in bad
    assert "no-such-policy.yaml" in bad["stderr"]
    assert re.search(r"^::error title=ddp-check::ddp-check validate stopped with exit code 2 ", bad["log"], re.M)
    assert "### ddp-check could not check" in bad["summary"]


def test_a_refused_or_impossible_upload_never_fails_the_job():
    """The upload is not tried on a pull request from a fork (a read-only token), and one that fails does not fail
    the job (continue-on-error); the verdict reads ddp-check's exit code alone, after both."""
    names = [s.get("id") or s.get("name") or s["uses"].split("@")[0] for s in STEPS]
    upload = STEPS[names.index("upload")]
    assert upload["continue-on-error"] is True
    condition = upload["if"]
    assert "inputs.upload-sarif == 'true'" in condition and "steps.check.outputs.sarif-file != ''" in condition
    assert ("!(github.event.pull_request && github.event_name != 'pull_request_target' && "
            "github.event.pull_request.head.repo.full_name != github.repository)") in condition
    outcome = STEPS[names.index("SARIF upload outcome")]
    assert names.index("upload") < names.index("SARIF upload outcome") < names.index("Verdict") == len(STEPS) - 1
    assert "steps.upload.outcome != 'success'" in outcome["if"] and "continue-on-error" not in outcome
    verdict = STEPS[-1]
    assert verdict["env"] == {"CODE": "${{ steps.check.outputs.exit-code }}"} and "if" not in verdict


@pytest.mark.parametrize("facts, says", [
    ({"OUTCOME": "skipped", "SARIF": "/tmp/r.sarif", "EVENT": "pull_request", "HEAD_REPO": "someone/fork",
      "REPO": "org/repo", "VISIBILITY": "public"},
     "not tried: this pull_request event comes from a fork (someone/fork)"),
    ({"OUTCOME": "skipped", "SARIF": "/tmp/r.sarif", "EVENT": "pull_request", "HEAD_REPO": "",
      "REPO": "org/repo", "VISIBILITY": "public"}, "from a fork (a deleted repository)"),
    ({"OUTCOME": "failure", "SARIF": "/tmp/r.sarif", "EVENT": "push", "HEAD_REPO": "", "REPO": "org/repo",
      "VISIBILITY": "private"}, "code scanning refused it (the upload step's error above says how); org/repo is "
                                "private, where code scanning needs GitHub Code Security"),
    ({"OUTCOME": "failure", "SARIF": "/tmp/r.sarif", "EVENT": "push", "HEAD_REPO": "", "REPO": "org/repo",
      "VISIBILITY": "public"}, "code scanning refused it (the upload step's error above says how); other causes"),
    ({"OUTCOME": "skipped", "SARIF": "", "EVENT": "push", "HEAD_REPO": "", "REPO": "org/repo", "VISIBILITY": "public"},
     "ddp-check wrote no SARIF report"),
])
def test_the_log_says_why_the_sarif_report_was_not_uploaded(facts, says):
    script, env = _script("SARIF upload outcome")
    assert set(env) == set(facts)
    proc = subprocess.run(["bash", "-e", "-c", script], env=dict(os.environ, **facts), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("::warning title=ddp-check SARIF upload::"), proc.stdout
    assert says in lines[0]
    assert "private" not in lines[0] if facts["VISIBILITY"] == "public" else True


# --- annotations and the summary: the report formats ----------------------------------------------------------


def test_workflow_command_escaping():
    from policies.report.report import github_data, github_property

    assert github_data("50% of\r\nworkers: a,b") == "50%25 of%0D%0Aworkers: a,b"
    assert github_property("dir,x/a:b%.yaml\n") == "dir%2Cx/a%3Ab%25.yaml%0A"
    assert github_data("%0A") == "%250A"  # the text's own escapes stay text


def test_a_problem_as_an_annotation_on_its_line(tmp_path, monkeypatch):
    from policies.report.engine import Unit
    from policies.kube.objects import ERROR, INFO, WARNING, Problem
    from policies.report.report import github_line

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    odd = tmp_path / "jobs, v1" / "a:b.yaml"
    odd.parent.mkdir()
    odd.write_text("kind: x\n")
    unit = Unit(source=str(odd), kind="file")
    p = Problem("IMG003", "100% wrong:\nsecond line", str(odd), obj="Job/x", field="spec", hint="fix it",
                location=(str(odd), 7))
    assert github_line(p, unit) == ("::error file=jobs%2C v1/a%3Ab.yaml,line=7,title=IMG003::Job/x spec: 100%25 "
                                    "wrong:%0Asecond line (fix: fix it)")
    p.severity, p.location = WARNING, None  # not traced: the file itself, line 1
    assert github_line(p, unit).startswith("::warning file=jobs%2C v1/a%3Ab.yaml,line=1,title=IMG003::")
    assert github_line(p, unit, strict=True).startswith("::error file=")  # under --strict a warning fails
    p.severity = INFO
    assert github_line(p, unit).startswith("::notice file=")
    stdin = Unit(source="<stdin>", kind="file")
    assert github_line(Problem("INPUT", "bad", "<stdin>", severity=ERROR), stdin) == "::error title=INPUT::bad"


def test_the_summary_escapes_table_cells_and_caps_the_rows(monkeypatch, tmp_path):
    from policies.report import report
    from policies.report.engine import Unit
    from policies.kube.objects import Problem
    from policies.report.report import Run, markdown_cell, to_markdown

    assert markdown_cell("a | b\nc <script> *x* [l](u) `c` &amp;") == \
        r"a \| b c \<script\> \*x\* \[l\](u) \`c\` &amp;amp;"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.setattr(report, "MARKDOWN_ROWS", 3)
    unit = Unit(source="deploy/x.yaml", kind="file")
    unit.problems = [Problem("R1", f"message {i} | piped", "deploy/x.yaml", obj=f"Job/j{i}",
                             location=("deploy/x.yaml", i + 1)) for i in range(5)]
    out = to_markdown(Run([unit], "builtin", 0.1))
    assert out.startswith("### ddp-check failed\n\n**5 errors**, **0 warnings**")
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert table[0] == "| severity | rule | object | file:line | message |" and len(table) == 4
    assert table[1] == r"| error | R1 | Job/j0 | deploy/x.yaml:1 | message 0 \| piped |"
    assert out.rstrip().endswith("2 more findings not shown here (the first 3 are): the step's log and the SARIF "
                                 "report hold them all.")
    assert to_markdown(Run([Unit(source="deploy/y.yaml", kind="file")], "builtin", 0.1)).startswith(
        "### ddp-check passed\n\n**0 errors**")


def test_zizmor_audits_the_action():
    """The action is audited as the workflows are (make lint): nothing of medium severity or above."""
    proc = _zizmor(["action.yml"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings" in proc.stdout


def test_the_cli_formats_are_the_reporters():
    from policies.cli import REPORT_FORMATS
    from policies.report.report import FORMATS

    assert REPORT_FORMATS == tuple(FORMATS)


# --- the lock the action installs from ------------------------------------------------------------------------


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#;\\]+)", line)
        if m:
            out[_name(m.group(1))] = m.group(2)
    return out


def _closure(roots: list[str]) -> set[str]:
    """The names of the roots and of everything they require here (installed metadata, markers evaluated)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in roots]
    while todo:
        req = todo.pop()
        if _name(req.name) in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(_name(req.name))
        todo += [Requirement(r) for r in metadata.requires(req.name) or []]
    return seen


def test_the_lock_pins_every_dependency_and_the_build_backend_with_hashes():
    """action-requirements.txt holds requirements.txt's pins (pyproject.toml's dependencies), the build backend's
    (pyproject.toml's build-system), what they require at requirements-dev.txt's versions (the wheelhouse's), and
    nothing else; every entry with its sha256 hashes."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    lock = _pins(LOCK)
    runtime = {_name(d.split("==")[0]): d.split("==")[1] for d in pyproject["project"]["dependencies"]}
    backend = {_name(d.split("==")[0]): d.split("==")[1] for d in pyproject["build-system"]["requires"]}
    assert runtime == _pins(REPO / "requirements.txt") and backend == _pins(REPO / "requirements-build.txt")
    assert {k: lock.get(k) for k in {**runtime, **backend}} == {**runtime, **backend}
    dev = _pins(REPO / "requirements-dev.txt")
    assert {k: v for k, v in lock.items() if k in dev} == {k: dev[k] for k in lock if k in dev}
    assert set(lock) == _closure([*pyproject["project"]["dependencies"], *pyproject["build-system"]["requires"]])
    entries = [e for e in re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text()) if re.match(r"[A-Za-z0-9]", e)]
    assert len(entries) == len(lock)
    for entry in entries:
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", entry), entry


def test_the_lock_header_is_the_script_that_makes_it():
    script = (REPO / "scripts" / "lock-action-requirements.sh").read_text()
    command = re.search(r"^#    (pip-compile .*)$", LOCK.read_text(), re.M).group(1)
    ran = re.search(r'"\$tmp/venv/bin/pip-compile" --quiet (.*)$', script, re.M).group(1)
    assert command == f"pip-compile {ran}"
    assert "--generate-hashes" in ran and "--index-url=https://pypi.org/simple" in ran


def test_the_pip_cache_key_is_the_lock_hash(tmp_path):
    script, env = _script("pip-cache")
    assert env["LOCK"] == "${{ github.action_path }}/action-requirements.txt"
    out = tmp_path / "output"
    proc = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, LOCK=str(LOCK), PYTHON_VERSION="3.11.9", GITHUB_OUTPUT=str(out),
                                   RUNNER_OS="Linux", RUNNER_ARCH="X64",
                                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"))
    assert proc.returncode == 0, proc.stderr
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert outputs["key"] == f"ddp-check-pip-Linux-X64-py3.11.9-{hashlib.sha256(LOCK.read_bytes()).hexdigest()}"
    assert outputs["dir"]
    cache = next(s for s in STEPS if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"] == {"path": "${{ steps.pip-cache.outputs.dir }}", "key": "${{ steps.pip-cache.outputs.key }}"}


@pytest.mark.slow
def test_the_install_step_installs_the_lock_with_hashes_offline(tmp_path):
    """The Install step as the runner runs it, with pip reading the wheelhouse only: every file's hash checked
    against the lock, the package built from the action's folder with the locked backend, nothing else installed."""
    script, env = _script("Install ddp-check")
    assert "--require-hashes --no-deps --only-binary=:all: -r \"$ACTION_PATH/action-requirements.txt\"" in script
    assert "--no-deps --no-build-isolation --no-index \"$ACTION_PATH\"" in script
    runner_temp = outside_checkout(tmp_path / "runner-temp")
    runner_temp.mkdir()
    base = Path(getattr(sys, "_base_executable", sys.executable)).parent
    proc = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, timeout=600,
                          env=offline_env(RUNNER_TEMP=str(runner_temp), ACTION_PATH=str(REPO),
                                          PATH=f"{base}{os.pathsep}/usr/bin{os.pathsep}/bin"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    venv = runner_temp / "ddp-check"
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], capture_output=True,
                            text=True, env=offline_env(), timeout=120)
    got = {_name(d["name"]): d["version"] for d in json.loads(listed.stdout)}
    assert got.pop("ddp-k8s-gitops") == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    got.pop("pip", None)
    got.pop("setuptools", None)  # a venv's own, on older Pythons
    assert got == _pins(LOCK)
    checked = subprocess.run([str(venv / "bin" / "ddp-check"), "validate", "-"], input="kind: ConfigMap\n"
                             "apiVersion: v1\nmetadata: {name: x}\n", capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_wrong_hash_is_refused_offline(tmp_path):
    """--require-hashes means it: the lock's entry for PyYAML fetches its wheel from the wheelhouse; the same entry
    with one hash changed (all of them, so no file matches) fetches nothing."""
    entry = re.search(r"^pyyaml==.*?(?=^\S)", LOCK.read_text(), re.M | re.S).group(0)

    def download(text: str, name: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / name).write_text(text)
        return subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes",
                               "--only-binary=:all:", "-d", str(tmp_path / f"{name}.d"), "-r", str(tmp_path / name)],
                              capture_output=True, text=True, env=offline_env(), timeout=300)

    good = download(entry, "good.txt")
    assert good.returncode == 0, good.stderr
    bad = download(re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, entry), "bad.txt")
    assert bad.returncode != 0 and "DO NOT MATCH THE HASHES" in bad.stderr, bad.stderr
    assert not list((tmp_path / "bad.txt.d").glob("*.whl"))
