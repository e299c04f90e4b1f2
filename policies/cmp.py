"""The Argo CD Config Management Plugin's two commands (argocd/cmp/plugin.yaml; docs/gitops.md): Argo CD renders an
Application's path through them, in a sidecar of argocd-repo-server, so an overlay the checks fail never reaches a
cluster, whether CI ran or not.

How Argo CD v3.5.1's cmp-server runs them (argoproj/argo-cd, tag v3.5.1):
- cmpserver/plugin/plugin.go:213-228: the files of the Application's repository are unpacked into a fresh folder;
  the commands run in `<that folder>/<the Application's path>` (runCommand, plugin.go:75-82: `cmd.Dir`, `cmd.Env`).
- plugin.go:252: their environment is the sidecar's own plus the request's: ARGOCD_APP_NAME, ARGOCD_APP_NAMESPACE,
  ARGOCD_APP_PROJECT_NAME, ARGOCD_APP_REVISION(_SHORT, _SHORT_8), ARGOCD_APP_SOURCE_REPO_URL, ARGOCD_APP_SOURCE_PATH,
  ARGOCD_APP_SOURCE_TARGET_REVISION (reposerver/repository/repository.go:1827-1841), KUBE_VERSION and
  KUBE_API_VERSIONS (repository.go:2279-2280), and each `spec.source.plugin.env` entry as ARGOCD_ENV_<name>
  (repository.go:2298-2303).
- plugin.go:253-258: init runs first, in the same folder; its output is dropped, a non-zero exit fails the generation.
- plugin.go:260-263, 129-132: a non-zero exit of generate is an error reading "`<command>` failed exit status N:
  <standard error>"; the controller makes it the Application's ComparisonError (controller/state.go:698), its sync
  status Unknown (state.go:1034-1035), so automated sync skips it (controller/appcontroller.go:2345-2349) and a manual
  sync stops with that error (controller/sync.go:163-170): nothing is applied.
- plugin.go:265: on exit 0, standard output split into YAML documents is the manifests; standard error is only logged
  (plugin.go:135-144).

`generate` renders the Application's path with the pinned kubectl's kustomize and the build options this package was
built with (gitops.yaml, policies/render/paths.py), runs `validate` on it exactly as `make validate PATHS=<path>` does, and
prints kustomize's output unchanged only when nothing failed; otherwise what failed goes to standard error, one
problem a line, then a `refused:` line (nothing else: info lines and the summary are for a render that passed), and
the exit is 1. `spec.source.plugin.env` `DDP_STRICT=true` fails on warnings too.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .render import gitops
from .render.loader import InputError, parse
from .render.paths import DATA

if TYPE_CHECKING:
    from .rules.kit import Environment

STRICT_ENV = "ARGOCD_ENV_DDP_STRICT"


def _where() -> tuple[Path, str]:
    """(the repository's root, the Application's path in it): the working folder is `<root>/<path>` where
    ARGOCD_APP_SOURCE_PATH says so; else (a command run by hand, or a manifest-generate-paths root Argo CD cut
    short) the working folder is both."""
    cwd = Path.cwd()
    parts = [p for p in Path(os.environ.get("ARGOCD_APP_SOURCE_PATH", "")).parts if p not in ("/", ".")]
    if parts and ".." not in parts and list(cwd.parts[-len(parts):]) == parts:
        return cwd.parents[len(parts) - 1], "/".join(parts)
    return cwd, "."


def _app() -> str:
    name, namespace = os.environ.get("ARGOCD_APP_NAME"), os.environ.get("ARGOCD_APP_NAMESPACE")
    if not name:
        return "this path"
    return f"Application {namespace + '/' if namespace else ''}{name}"


def _config_drift(root: Path) -> str | None:
    """Where the repository's gitops.yaml asks for another kustomize or other build options than this image renders
    with, why the plugin must not render (its output would not be what `make validate` checked in CI)."""
    theirs = root / "gitops.yaml"
    if not theirs.is_file() or theirs.resolve() == gitops.CONFIG.resolve():
        return None
    try:
        want = (gitops.kustomize_version(theirs), gitops.build_options(theirs))
    except gitops.ConfigError as exc:
        return str(exc)
    have = (gitops.kustomize_version(), gitops.build_options())
    if want == have:
        return None
    return (f"gitops.yaml asks for kustomize {want[0]} with build options {want[1]}; this plugin image renders with "
            f"{have[0]} and {have[1]}: rebuild and roll out the sidecar image (make image-cmp, docs/gitops.md)")


# Where the operator's policy is (argocd/cmp/operator-policy.yaml documents it): an environment variable of the
# sidecar, which an Application cannot set (Argo CD passes an Application's plugin env as ARGOCD_ENV_*), else the
# one baked into the image.
OPERATOR_POLICY_ENV = "DDP_OPERATOR_POLICY"
DEFAULT_OPERATOR_POLICY = DATA / "argocd" / "cmp" / "operator-policy.yaml"


def operator_policy(path: Path | None = None) -> Environment:
    """The operator's policy every overlay is checked under in the plugin (`path`, else the file the sidecar's
    DDP_OPERATOR_POLICY names, else the image's); a file that cannot be read or does not declare is one InputError
    (the plugin never renders without one)."""
    from .rules.environment import load

    named = path is not None
    path = path or Path(os.environ.get(OPERATOR_POLICY_ENV) or DEFAULT_OPERATOR_POLICY)
    env, problems = load(path)
    if env is None:
        why = problems[0].message if problems else "not an environment declaration"
        raise InputError(f"{path}: the operator's policy ({'--operator-policy' if named else OPERATOR_POLICY_ENV}): "
                         f"{why}")
    return env


def init() -> int:
    """Fail before anything renders when the sidecar cannot render as `make validate` does: no kubectl, a kubectl
    whose kustomize is not the pinned one, or a repository whose gitops.yaml pins other build settings."""
    root, path = _where()
    exe = gitops.kubectl()
    used = gitops.kubectl_kustomize_version(exe)
    pinned = gitops.kustomize_version()
    if used != pinned:
        raise InputError(f"{exe} embeds kustomize {used or '(unknown version)'}, gitops.yaml pins {pinned}: the "
                         "sidecar image is not the one built from this repository")
    drift = _config_drift(root)
    if drift:
        raise InputError(drift)
    operator = operator_policy()
    print(f"{_app()}: {path} in {root}; {gitops.summary()}; operator policy {operator.name} ({operator.source})",
          file=sys.stderr)
    return 0


def generate(check: Callable[..., tuple[int, str, list[Any]]]) -> int:
    """`check` is the command line's validate (policies/cli.py: check): the same verdict and report."""
    from .render.kustomization import kustomization_file
    from .render.render import KUSTOMIZE_FLAGS, run_bounded

    # Every render fresh: nothing is read back from a cache folder that outlives this Application's files.
    os.environ["POLICIES_NO_CACHE"] = "1"
    root, path = _where()
    os.chdir(root)
    if kustomization_file(Path(path)) is None:
        raise InputError(f"{path}: no kustomization.yaml: this plugin renders Kustomize overlays only")
    drift = _config_drift(root)
    if drift:
        raise InputError(drift)
    strict = os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes")
    # cmp-init said which kustomize renders: the report here is the checks' alone.
    rc, report, units = check([path], strict=strict, operator=operator_policy(), banner=False)
    if rc != 0:
        return _refuse(units, strict, f"{_app()} ({path}) fails the checks above; no manifests were printed, so "
                                      f"Argo CD syncs nothing (make validate PATHS={path} shows the whole report)")
    if not any(u.manifests for u in units):
        return _refuse(units, strict, f"{_app()} ({path}) renders no Kubernetes objects: with automated prune, "
                                      "Argo CD would delete every object the Application synced (ARGO001 says so "
                                      "of an Application's path); nothing was printed")
    run = run_bounded([gitops.kubectl(), "kustomize", *KUSTOMIZE_FLAGS, path])
    if run.failure or run.returncode != 0:
        why = run.failure or " ".join(run.stderr.split())[:400]
        raise InputError(f"{path}: kustomize failed on the second render: {why}")
    checked = [m.obj for u in units for m in u.manifests]
    printed = [m.obj for m in parse(run.stdout.decode("utf-8"), path)]
    if printed != checked:
        raise InputError(f"{path}: kustomize rendered other objects than the ones just checked; nothing is printed")
    sys.stderr.write(report)  # the warnings and the summary: Argo CD logs standard error of a command that succeeds
    sys.stdout.flush()
    sys.stdout.buffer.write(run.stdout)
    sys.stdout.flush()
    return 0


def _refuse(units: list[Any], strict: bool, why: str) -> int:
    """What failed and why on standard error, nothing on standard output, exit 1: Argo CD shows the error as the
    Application's ComparisonError and syncs nothing. Only what failed, one problem a line, errors first (warnings
    too under DDP_STRICT), then the one `refused:` line: no banner, info or summary between the operator and the
    reason (an accepted render's standard error, which Argo CD only logs, has the whole report)."""
    from .kube.objects import ERROR, WARNING
    from .report.report import text_line

    failing = (ERROR, WARNING) if strict else (ERROR,)
    rows = [(p, u) for u in units for p in u.problems if p.severity in failing]
    rows.sort(key=lambda r: (failing.index(r[0].severity), r[0].source, r[0].rule))
    for p, u in rows:
        print(text_line(p, u), file=sys.stderr)
    print(f"refused: {why}", file=sys.stderr)
    return 1
