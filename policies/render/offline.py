"""What keeps a render to the files a change shows: kustomize never fetches, never runs another program, never reads
outside the overlay (docs/security.md).

- Remote references are refused before kustomize runs (`remote`): kustomize v5.8.1 fetches a file over HTTP where a
  path parses as an http(s) URL (api/internal/loader/fileloader.go:23-26 IsRemoteFile, 293-296 Load) and clones a
  repository with `git` where a root (a resource, base or component folder) parses as a repository spec
  (fileloader.go:152-165 New; api/internal/git/repospec.go NewRepoSpecFromURL), resources trying the file first
  (api/internal/target/kusttarget.go:418-430 accumulateResources). Argo CD would do the same on every render.
- Build options are an allow-list (`check_build_options`): gitops.yaml's `kustomize.buildOptions` and argocd-cm's
  `kustomize.buildOptions` (ARGO009) may hold only what changes nothing kustomize reads or runs. `--enable-helm`
  runs helm (or `--helm-command`), `--enable-alpha-plugins`/`--enable-exec` run programs, `--network`/`--mount`
  containers, `--load-restrictor=LoadRestrictionsNone` reads any file on the machine, `-o` writes files.
- kustomize runs sandboxed (`sandbox`): in a network namespace of its own with no interface up (`unshare --net`,
  as an unprivileged user namespace where the caller is not root), with a PATH that holds no program (git, helm and
  plugins cannot be found) and HTTP proxies pointed at a closed port. Where the kernel refuses a namespace, the
  rest still holds and `tools`/the validate banner say the network is not isolated.
"""
from __future__ import annotations

import functools
import os
import posixpath
import re
import shutil
import subprocess
import sys

# ---------------------------------------------------------------- build options

# Every argument gitops.yaml (and argocd-cm) may pass to `kustomize build`: the load restrictor at its default (no
# file outside the kustomization's folder tree). Argo CD splits argocd-cm's string on white space (strings.Fields,
# util/kustomize/kustomize.go:413 at v3.5.1): an argument with a space in it would reach Argo CD as two.
ALLOWED_BUILD_OPTIONS = ("--load-restrictor=LoadRestrictionsRootOnly",)
_ALLOWED_PAIRS = {("--load-restrictor", "LoadRestrictionsRootOnly")}
_WHY = {
    "--enable-helm": "runs helm (or the program --helm-command names) on the change's charts",
    "--helm-command": "names a program kustomize runs",
    "--enable-alpha-plugins": "runs plugin programs and containers the kustomization names",
    "--enable-exec": "runs programs the kustomization names",
    "--network": "gives plugin containers the network",
    "--network-name": "gives plugin containers the network",
    "--mount": "mounts host folders into plugin containers",
    "--env": "hands the environment to plugins",
    "-e": "hands the environment to plugins",
    "--as-current-user": "runs plugin containers as the user",
    "--load-restrictor": "reads files outside the kustomization's folder (/etc/passwd into a ConfigMap)",
    "--output": "writes files",
    "-o": "writes files",
}


def check_build_options(options: list[str]) -> str | None:
    """None where every argument is on the allow-list, else one line saying which is not and what it would do."""
    i = 0
    while i < len(options):
        opt = options[i]
        if not isinstance(opt, str) or not opt or any(c.isspace() for c in opt):
            return (f"build option {opt!r} is empty or holds white space (Argo CD splits the options on white space, "
                    "so it would build differently)")
        if opt in ALLOWED_BUILD_OPTIONS:
            i += 1
            continue
        if i + 1 < len(options) and (opt, options[i + 1]) in _ALLOWED_PAIRS:
            i += 2
            continue
        name = opt.split("=", 1)[0]
        why = _WHY.get(name, "is not on the allow-list")
        return (f"build option {opt} is not allowed: it {why}" if name in _WHY else f"build option {opt} {why}") + \
            f" (allowed: {', '.join(ALLOWED_BUILD_OPTIONS)})"
    return None


# ---------------------------------------------------------------- remote references, as kustomize v5.8.1 reads them

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_USER = re.compile(r"^([a-zA-Z][a-zA-Z0-9-]*)@")
_SCHEMES = ("ssh://", "https://", "http://", "file://")  # repospec.go extractScheme, in its order


def remote_file(path: str) -> bool:
    """fileloader.go IsRemoteFile: url.Parse gives the scheme http or https (Go lower-cases it). A URL Go's parser
    refuses is not remote there; refusing it here too is the safe side (it names no file either)."""
    m = _SCHEME.match(path)
    return m is not None and m.group(1).lower() in ("http", "https")


def _cut_prefix(s: str, prefix: str) -> tuple[str, bool]:
    if len(prefix) <= len(s) and s[:len(prefix)].lower() == prefix:
        return s[len(prefix):], True
    return s, False


def repo_spec(n: str) -> bool:
    """Whether repospec.go NewRepoSpecFromURL accepts `n` (then kustomize clones it with git): a line-by-line port
    of NewRepoSpecFromURL, extractHost and parsePathParts at kustomize/v5.8.1."""
    if n.startswith("/"):  # filepath.IsAbs
        return False
    n = n.split("?", 1)[0]
    n, _ = _cut_prefix(n, "git::")  # ignoreForcedGitProtocol
    scheme = ""
    for prefix in _SCHEMES:
        n, found = _cut_prefix(n, prefix)
        if found:
            scheme = prefix
            break
    username = ""
    if m := _USER.match(n):
        username = m.group(1) + "@"
        n = n[len(username):]
    lower = n.lower()
    std_github = lower.startswith("github.com/") or lower.startswith("github.com:")
    accept_scp = scheme == "" and (username != "" or std_github)
    if scheme == "" and not accept_scp:
        return False  # validateScheme: "failed to parse scheme"
    if scheme == "file://":
        host, rest = scheme, username + n
    else:
        sep = n.find("/")
        if accept_scp:
            colon = n.find(":")
            if sep == -1 or 0 < colon < sep:
                sep = colon
        host, rest = (n[:sep + 1], n[sep + 1:]) if sep >= 0 else (n, "")
        if std_github:
            host = "github.com:" if scheme.startswith("ssh://") or username else "github.com/"
        if host == "":
            return False
    # parsePathParts
    if (i := rest.find("_git/")) >= 0:
        repo_path, kust_root = rest[:i + 5] + rest[i + 5:].split("/")[0], "/".join(rest[i + 5:].split("/")[1:])
    elif (i := rest.find("//")) >= 0:
        repo_path, kust_root = rest[:i], rest[i + 2:]
    elif (i := rest.find(".git")) >= 0:
        repo_path, kust_root = rest[:i + 4], rest[i + 4:]
    elif scheme == "file://":
        repo_path, kust_root = rest, ""
    else:
        segments = rest.split("/")
        if len(segments) < 2:
            return False
        repo_path, kust_root = "/".join(segments[:2]), "/".join(segments[2:])
    if not repo_path:
        return False
    trimmed = kust_root[1:] if kust_root.startswith("/") else kust_root  # kustRootPathExitsRepo
    return posixpath.normpath(trimmed).split("/")[0] != ".."


def remote(ref: str, root: bool) -> str | None:
    """How kustomize would fetch `ref`: 'download' (HTTP), 'git' (a clone) or None (a local path). `root`: the field
    names a folder kustomize may load as a kustomization root (resources, bases, components, generators,
    transformers, validators), where a repository spec is cloned; elsewhere only an http(s) URL is remote."""
    if remote_file(ref):
        return "download"
    if root and repo_spec(ref):
        return "git"
    return None


# ---------------------------------------------------------------- the sandbox kustomize runs in

# Programs kustomize could start are looked up on PATH (git for a clone, helm for charts, plugins): none is found.
EMPTY_PATH = ""
# Go's HTTP client takes these from the environment; port 9 (discard) on loopback is closed here.
DEAD_PROXY = "http://127.0.0.1:9"


def environment(base: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k.upper() not in ("NO_PROXY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                                                "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS")}
    env.update(PATH=EMPTY_PATH, HTTP_PROXY=DEAD_PROXY, HTTPS_PROXY=DEAD_PROXY, http_proxy=DEAD_PROXY,
               https_proxy=DEAD_PROXY, NO_PROXY="", no_proxy="")
    return env


@functools.lru_cache(maxsize=None)
def _namespace_prefix() -> tuple[str, ...] | None:
    """The command that starts a program with no network: `unshare --net` (with `--map-root-user` where that is
    what lets this user make one), tried once per process; None where the kernel or the machine allows neither."""
    if not sys.platform.startswith("linux") or os.environ.get("POLICIES_NETWORK_NAMESPACE") == "off":
        return None
    exe = shutil.which("unshare")
    if exe is None:
        return None
    for prefix in ((exe, "--net", "--map-root-user"), (exe, "--net")):
        try:
            ok = subprocess.run([*prefix, "/bin/sh", "-c", "exit 0"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return prefix
    return None


def sandbox(cmd: list[str]) -> list[str]:
    """`cmd` (an absolute program path) to run with no network where the machine allows a namespace."""
    prefix = _namespace_prefix()
    return [*prefix, *cmd] if prefix else cmd


def isolation() -> str:
    """One phrase for the banner: how kustomize's network is cut."""
    prefix = _namespace_prefix()
    if prefix:
        return "no network (a network namespace of its own), no programs on PATH"
    return ("network NOT isolated (no network namespace on this machine): remote references refused before it runs, "
            "proxies pointed at a closed port, no programs on PATH")
