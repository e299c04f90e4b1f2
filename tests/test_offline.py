"""`make validate` never opens a network connection nor runs a program other than kustomize, on any input
(policies/render/offline.py, docs/security.md): every remote form kustomize v5.8.1 accepts is refused before it runs, build
options are an allow-list, and kustomize itself runs in a network namespace with no program on PATH. Shown with a
logging server on loopback (the target of every remote reference and the HTTP proxy) and fake git and helm on PATH
that record being run."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import REPO
from policies.render import gitops, offline, render

REPOSPEC_CASES = json.loads((REPO / "tests/fixtures/kustomize/repospec_v5.8.1.json").read_text())


@pytest.mark.parametrize("url", REPOSPEC_CASES["accepted"][:40] + REPOSPEC_CASES["accepted"][-40:])
def test_repo_specs_kustomize_clones_are_remote(url):
    assert offline.repo_spec(url) and offline.remote(url, root=True)


def test_every_upstream_repo_spec_case_agrees():
    """kustomize v5.8.1 repospec_test.go: every URL its tests accept is a clone here, every one they refuse is not."""
    assert [u for u in REPOSPEC_CASES["accepted"] if not offline.repo_spec(u)] == []
    assert [u for u in REPOSPEC_CASES["refused"] if offline.repo_spec(u)] == []
    assert len(REPOSPEC_CASES["accepted"]) > 500 and len(REPOSPEC_CASES["refused"]) == 14


@pytest.mark.parametrize("ref, root, expected", [
    ("https://example.com/x.yaml", False, "download"),
    ("HTTP://example.com/x.yaml", False, "download"),
    ("git::https://gitlab.com/org/repo", True, "git"),  # url.Parse: the scheme is "git", so a clone, not a download
    ("git::https://gitlab.com/org/repo", False, None),
    ("ssh://git@host/org/repo.git", True, "git"),
    ("git@github.com:org/repo", True, "git"),
    ("github.com/org/repo/path?ref=v1", True, "git"),
    ("file:///srv/repo.git", True, "git"),
    ("github.com/org/repo", False, None),  # a patch path is read as a file: a folder named github.com
    ("../../base/pytorchjob", True, None),
    ("patches/job.yaml", False, None),
    ("src/github.com/org/repo/path", True, None),
])
def test_remote_forms(ref, root, expected):
    assert offline.remote(ref, root) == expected


@pytest.mark.parametrize("options, ok", [
    ([], True),
    (["--load-restrictor=LoadRestrictionsRootOnly"], True),
    (["--load-restrictor", "LoadRestrictionsRootOnly"], True),
    (["--load-restrictor=LoadRestrictionsNone"], False),
    (["--load-restrictor", "LoadRestrictionsNone"], False),
    (["--enable-helm"], False),
    (["--helm-command=./x.sh"], False),
    (["--enable-alpha-plugins"], False),
    (["--enable-exec"], False),
    (["--network"], False),
    (["--mount=type=bind,src=/,dst=/x"], False),
    (["-o", "/tmp/out"], False),
    (["--load-restrictor LoadRestrictionsRootOnly"], False),  # one argument here, two for Argo CD
    (["--stack-trace"], False),
])
def test_build_options_allow_list(options, ok):
    assert (offline.check_build_options(options) is None) == ok


def test_gitops_yaml_with_an_unsafe_option_is_one_line(tmp_path):
    path = tmp_path / "gitops.yaml"
    path.write_text("kustomize:\n  version: v5.8.1\n  buildOptions: [--enable-helm, --helm-command=./run.sh]\n")
    with pytest.raises(gitops.ConfigError) as exc:
        gitops.load(path)
    assert "--enable-helm is not allowed: it runs helm" in str(exc.value) and "\n" not in str(exc.value)


# ---------------------------------------------------------------- the end-to-end proof


class Witness:
    """A TCP listener on loopback that records every connection (and answers HTTP with a ConfigMap), and fake git
    and helm that record being run."""

    def __init__(self, tmp: Path) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.bin = tmp / "fakebin"
        self.bin.mkdir()
        self.ran = tmp / "programs-run.log"
        for name in ("git", "helm", "kustomize", "ssh", "curl"):
            exe = self.bin / name
            exe.write_text(f"#!/bin/sh\necho {name} \"$@\" >> {self.ran}\nexit 1\n")
            exe.chmod(0o755)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                self.connections.append(data[:200])
                body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\n"
                try:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                except OSError:
                    pass

    def programs(self) -> list[str]:
        return self.ran.read_text().splitlines() if self.ran.exists() else []

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def witness(tmp_path):
    w = Witness(tmp_path)
    yield w
    w.close()


def hostile_overlays(root: Path, port: int) -> list[Path]:
    """One overlay per way a kustomization can reach out, every URL at the witness."""
    at = f"127.0.0.1:{port}"
    bare = root / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n"
    cases = {
        "http-resource": f"resources:\n  - http://{at}/cm.yaml\n",
        "https-upper": f"resources:\n  - HTTPS://{at}/cm.yaml\n",
        "git-forced": f"resources:\n  - git::http://{at}/org/repo.git\n",
        "ssh": f"resources:\n  - ssh://git@{at}/org/repo.git\n",
        "scp-component": "components:\n  - git@127.0.0.1:org/repo.git\n",
        "github-short": "resources:\n  - github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.8.1\n",
        "file-clone": f"resources:\n  - file://{bare}\n",
        "patch-url": f"resources: [cm.yaml]\npatches:\n  - path: http://{at}/patch.yaml\n",
        "generator-file": f"configMapGenerator:\n  - name: g\n    files:\n      - k=http://{at}/data\n",
        "openapi": f"resources: [cm.yaml]\nopenapi:\n  path: http://{at}/schema.json\n",
        "crds": f"resources: [cm.yaml]\ncrds:\n  - http://{at}/crd.json\n",
        "helm": "helmCharts:\n  - name: chart\n    version: 0.1.0\n    repo: http://" + at + "\n",
        "nested": "resources:\n  - ../nested-base\n",
        # Plugin configurations (issue 32 item 1): a generator's or transformer's config file, or the config inline,
        # whose files kustomize loads: fetched, and the answer landed in the rendered ConfigMap, exit 0.
        "generator-config": "generators:\n  - gen.yaml\n",
        "generator-inline": ("generators:\n  - |\n    apiVersion: builtin\n    kind: ConfigMapGenerator\n"
                             f"    metadata: {{name: g}}\n    files: [k=http://{at}/data]\n"),
        "transformer-config": "resources: [cm.yaml]\ntransformers:\n  - patch.yaml\n",
        "helm-generator": "generators:\n  - helm.yaml\n",
    }
    extra = {
        "generator-config": {"gen.yaml": "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: g}\n"
                                         f"files: [k=http://{at}/data]\n"},
        "transformer-config": {"patch.yaml": "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: t}\n"
                                             f"path: http://{at}/patch.yaml\ntarget: {{kind: ConfigMap}}\n"},
        "helm-generator": {"helm.yaml": "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata: "
                                        f"{{name: h}}\nname: chart\nrepo: http://{at}\n"},
    }
    base = root / "nested-base"
    base.mkdir()
    (base / "kustomization.yaml").write_text(f"resources:\n  - http://{at}/cm.yaml\n")
    out = []
    for name, text in cases.items():
        d = root / name
        d.mkdir()
        (d / "kustomization.yaml").write_text(text)
        (d / "cm.yaml").write_text(cm)
        for file, content in extra.get(name, {}).items():
            (d / file).write_text(content)
        out.append(d)
    return out


def test_make_validate_opens_no_connection_and_runs_no_other_program(tmp_path, witness):
    """The issue's proof: make validate over every remote form, with the witness as target and proxy and fake git,
    helm, ssh and curl first on PATH. Nothing connects, nothing runs; every overlay is one INPUT error naming the
    field. Before the refusal and the sandbox, kustomize fetched from the witness and ran the fake git."""
    folders = hostile_overlays(tmp_path, witness.port)
    proxy = f"http://127.0.0.1:{witness.port}"
    env = dict(os.environ, PATH=f"{witness.bin}{os.pathsep}{os.environ['PATH']}", HTTP_PROXY=proxy,
               HTTPS_PROXY=proxy, http_proxy=proxy, https_proxy=proxy, POLICIES_NO_CACHE="1")
    env.pop("MAKEFLAGS", None)
    proc = subprocess.run(["make", "-s", "--no-print-directory", "validate",
                           f"PATHS={' '.join(str(f) for f in folders)}"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr  # make's own code for a failed recipe
    errors = [line for line in proc.stdout.splitlines() if line.startswith("error INPUT")]
    assert len(errors) == len(folders), proc.stdout
    assert all("is remote: kustomize would" in e or "kustomize would run helm" in e for e in errors), errors
    assert "nested-base/kustomization.yaml: resources[0]" in proc.stdout
    assert witness.connections == [] and witness.programs() == []


def test_kustomize_itself_runs_with_no_network_and_no_programs(tmp_path, witness):
    """Below the refusal: kustomize run directly (as render does) on remote references still reaches nothing. Go's
    HTTP client never proxies loopback, so without the namespace kustomize would fetch from the witness; git is not
    found on the empty PATH, so the fake one never runs."""
    if offline._namespace_prefix() is None:
        pytest.skip("this machine allows no network namespace (unshare --net): only the refusal before kustomize "
                    "runs (the test above) and the empty PATH hold here; tools/the validate banner say so")
    folders = hostile_overlays(tmp_path, witness.port)
    os.environ["PATH"], saved = f"{witness.bin}{os.pathsep}{os.environ['PATH']}", os.environ["PATH"]
    try:
        for folder in folders:
            run = render.run_bounded([render.kubectl(), "kustomize", str(folder)], timeout=60)
            assert run.returncode != 0 or b"fetched" not in run.stdout, folder
    finally:
        os.environ["PATH"] = saved
    assert witness.connections == [] and witness.programs() == []


def test_without_the_namespace_kustomize_would_reach_loopback(tmp_path, witness, monkeypatch):
    """The witness works: the same kustomize, outside the namespace, does connect (so the test above could fail)."""
    folders = hostile_overlays(tmp_path, witness.port)
    proc = subprocess.run([render.kubectl(), "kustomize", str(folders[0])], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PATH=f"{witness.bin}{os.pathsep}{os.environ['PATH']}"))
    assert witness.connections and "fetched" in proc.stdout
    subprocess.run([render.kubectl(), "kustomize", str(tmp_path / "file-clone")], capture_output=True, timeout=60,
                   env=dict(os.environ, PATH=f"{witness.bin}{os.pathsep}{os.environ['PATH']}"))
    assert any(p.startswith("git ") for p in witness.programs())


def test_plugin_configurations_would_fetch_without_the_refusal(tmp_path, witness):
    """The plugin-configuration cases are real: kustomize itself, outside the sandbox, fetches the witness's answer
    into the rendered ConfigMap (the refusal above is what keeps make validate from it)."""
    folders = {f.name: f for f in hostile_overlays(tmp_path, witness.port)}
    for name in ("generator-config", "generator-inline", "transformer-config"):
        before = len(witness.connections)
        subprocess.run([render.kubectl(), "kustomize", str(folders[name])], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, PATH=f"{witness.bin}{os.pathsep}{os.environ['PATH']}"))
        assert len(witness.connections) > before, name
    for name in ("generator-config", "generator-inline", "transformer-config", "helm-generator"):
        got = render.render(folders[name])
        assert got.error and ("is remote: kustomize would download it" in got.error or "would run helm" in got.error), \
            (name, got.error)
        assert f"{name}/kustomization.yaml: " in got.error, got.error


def test_unsafe_options_never_reach_kustomize(tmp_path):
    """`--enable-helm --helm-command=<script in the change>` ran the script during make validate; options from
    another checkout (make diff's base) are checked the same way."""
    marker = tmp_path / "ran"
    script = tmp_path / "helm.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    overlay = tmp_path / "o"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("helmCharts:\n  - name: c\n    version: 0.1.0\n")
    got = render.render(overlay, options=["--enable-helm", f"--helm-command={script}"])
    assert got.error and "--enable-helm is not allowed" in got.error
    (overlay / "kustomization.yaml").write_text("configMapGenerator:\n  - name: p\n    files: [/etc/passwd]\n")
    got = render.render(overlay, options=["--load-restrictor=LoadRestrictionsNone"])
    assert got.error and "LoadRestrictionsNone is not allowed" in got.error and not marker.exists()


def test_the_banner_says_how_kustomize_is_cut_off():
    proc = subprocess.run([sys.executable, "-m", "policies.render.gitops"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    assert offline.isolation() in proc.stdout
