"""Command line: `python -m policies.cli validate|plan|render|docs|tools [PATHS...]` (the Makefile's targets)."""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from .entry import guarded
from .loader import InputError, rel as _rel
from .paths import overlay_path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOT = REPO / "overlays"


def _paths(args: argparse.Namespace) -> list[str]:
    """PATHS as written, each overlay also as <env>/<launcher> (the OVERLAY form make scale takes)."""
    return [overlay_path(p) for p in args.paths]


def _validator(prefer: str):
    from .schema import make_validator

    return make_validator(prefer)


def cmd_validate(args: argparse.Namespace) -> int:
    from . import engine
    from .report import FORMATS, Run
    from .trace import trace_all

    from .render import share_renders

    start = time.perf_counter()
    share_renders()  # an overlay and the Argo CD Application that points at it are rendered once
    paths = _paths(args)
    banner = _kustomize_banner_ahead(paths)
    units = engine.collect(paths, DEFAULT_ROOT, env_file=args.env)
    # What was read lives until the process ends: out of the cyclic collector's sight, the schema and policy
    # stages do not walk it again at every collection (8.6 % fewer instructions in the policy stage, callgrind).
    gc.freeze()
    validator = None if args.schema == "none" else _validator(args.schema)
    if banner is not None and any(u.kind == "overlay" for u in units):
        _kustomize_banner(banner)  # which kustomize rendered; said only where one did (not for files or stdin)
    timings = engine.Timings()
    engine.validate(units, validator, timings)
    trace_all(units)
    for u in units:
        for p in [*u.problems, *u.suppressed]:
            p.source = _rel(p.source)
    schema_name = validator.name if validator else "skipped (--schema none)"
    run = Run(units, schema_name, time.perf_counter() - start, strict=args.strict)
    sys.stdout.write(FORMATS[args.format](run))
    return 1 if engine.failed(units, args.strict) else 0


def _kustomize_banner_ahead(paths: list[str]) -> Future[str] | None:
    """Where a folder is named (overlays may be rendered), ask kubectl for its kustomize version in a thread while
    the overlays render: `kubectl version` is a process of its own (0.1-0.2 s here) that need not wait for them."""
    if not any(os.path.isdir(p) for p in paths):
        return None
    from .gitops import summary

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(summary)
    finally:
        pool.shutdown(wait=False)


def _kustomize_banner(banner: Future[str]) -> None:
    from .gitops import ConfigError

    try:
        print(banner.result(), file=sys.stderr, flush=True)
    except (ConfigError, InputError) as exc:
        print(f"kustomize: {exc}", file=sys.stderr, flush=True)


def cmd_plan(args: argparse.Namespace) -> int:
    from . import engine, plan

    units = engine.collect(_paths(args), DEFAULT_ROOT)
    engine.validate(units, None)
    if args.format == "json":
        print(plan.to_json(units))
        return 1 if any(u.failed_input for u in units) else 0
    text, bad = plan.text(units, pods=args.pods)
    sys.stdout.write(text)
    return 1 if bad else 0


def cmd_render(args: argparse.Namespace) -> int:
    import yaml

    from . import engine

    units = engine.collect(_paths(args), DEFAULT_ROOT)
    rc = 0
    for u in units:
        if u.failed_input:
            print(u.problems[0].line(), file=sys.stderr)
            rc = 1
            continue
        print(f"# Source: {_rel(u.source)}")
        print(yaml.safe_dump_all([m.obj for m in u.manifests], sort_keys=False), end="")
        print("---")
    return rc


def cmd_docs(args: argparse.Namespace) -> int:
    from .docs import rules_markdown

    sys.stdout.write(rules_markdown())
    return 0


def _kubeconform_found() -> str:
    from .schema import find_kubeconform

    found = find_kubeconform()
    return str(found) if found else "not installed (make setup installs it where GitHub can be reached)"


def cmd_tools(args: argparse.Namespace) -> int:
    from .gitops import kubectl

    import subprocess

    out = subprocess.run([kubectl(), "version", "--client"], capture_output=True, text=True).stdout.split("\n")
    print(f"kubectl: {kubectl()} ({'; '.join(x.strip() for x in out if x.strip())})")
    print(f"schema validator for `make validate`: {_validator('builtin').name}; with SCHEMA=kubeconform: "
          f"{_kubeconform_found()}")
    from .simulate import NSS_WRAPPER_CANDIDATES, SOCKET_WRAPPER_CANDIDATES, installed, name_serializer

    import shutil

    swrap = installed(SOCKET_WRAPPER_CANDIDATES)
    if swrap is None:
        network = "MISSING libsocket_wrapper (pods share the host network)"
    elif name_serializer() is None:
        network = f"{swrap}, but no C compiler for policies/native/swrap_serial.c (pods share the host network)"
    else:
        network = str(swrap)
    print("make simulate: names "
          f"{installed(NSS_WRAPPER_CANDIDATES) or 'MISSING libnss_wrapper (make simulate cannot run)'}; network per pod "
          f"{network}; etcd {shutil.which('etcd') or 'MISSING (the etcd variant is skipped)'}")
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="policies", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="render, schema-validate and topology-check")
    v.add_argument("paths", nargs="*", help="overlay folders, manifest files, or - for standard input")
    v.add_argument("--format", choices=("text", "json", "sarif", "junit"), default="text",
                   help="text (default), json, sarif (GitHub code scanning) or junit (CI dashboards); on standard output")
    # The in-process validator by default: the same verdicts as kubeconform on every test input (tests/
    # test_kubeconform.py, with the real binary) at a fraction of its time (bench/HISTORY.md#make-bench-validate).
    v.add_argument("--schema", choices=("builtin", "kubeconform", "auto", "none"), default="builtin",
                   help="schema validator: the in-process jsonschema-rs one (builtin, the default), kubeconform, or "
                        "auto (kubeconform where installed, else builtin)")
    v.add_argument("--strict", action="store_true", help="warnings fail too")
    v.add_argument("--env", metavar="POLICY_YAML",
                   help="environment declaration for inputs that bring none (files, standard input)")
    v.set_defaults(func=cmd_validate)
    p = sub.add_parser("plan", help="each overlay's effective topology, its pods, or one JSON document")
    p.add_argument("paths", nargs="*")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (a table per overlay) or json (every workload, pod, container and env)")
    p.add_argument("--pods", action="store_true", help="with text: list every pod, its labels and each container's env")
    p.set_defaults(func=cmd_plan)
    r = sub.add_parser("render", help="print rendered manifests")
    r.add_argument("paths", nargs="*")
    r.set_defaults(func=cmd_render)
    d = sub.add_parser("docs", help="print docs/rules.md")
    d.set_defaults(func=cmd_docs)
    t = sub.add_parser("tools", help="say which kubectl and schema validator will run")
    t.set_defaults(func=cmd_tools)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(args, "paths"):
        args.paths = rejoin([p for raw in args.paths for p in split_paths(raw)])
    if args.func in (cmd_validate, cmd_plan, cmd_render):
        # Rendering starts now, in threads, while the rules, the launcher model and the schema validator are
        # imported (a third of a second of a cold run that kustomize's processes need not wait for).
        from .render import prefetch, share_renders

        if args.func is cmd_validate:
            share_renders()
        prefetch(_paths(args) or [str(DEFAULT_ROOT)])
    from .schema import ValidatorUnavailable

    return guarded(lambda: args.func(args), (InputError, ValidatorUnavailable))


def split_paths(raw: str) -> list[str]:
    """One argument as paths. A path that exists is taken whole, spaces and all (`make validate PATHS='"my
    file.yaml"'`, or the CLI with the name quoted). Otherwise a string with spaces in it is several paths (a caller
    that passes `"$PATHS"` as one word) when every one of them exists; else it is one path, reported as missing."""
    if os.path.lexists(raw):
        return [raw]
    parts = raw.split()
    if len(parts) > 1 and not all(p == "-" or os.path.lexists(p) for p in parts):
        return [raw]
    return parts



def rejoin(paths: list[str]) -> list[str]:
    """`make validate PATHS="my file.yaml"` reaches here as `my` and `file.yaml` (make hands PATHS to the shell
    unquoted): words that name nothing, but joined by one space name an existing path, are that path. Words that
    exist are never joined."""
    out: list[str] = []
    i = 0
    while i < len(paths):
        word = paths[i]
        if word != "-" and not os.path.lexists(word):
            for j in range(i + 1, len(paths)):
                joined = " ".join(paths[i:j + 1])
                if os.path.lexists(joined):
                    word, i = joined, j
                    break
        out.append(word)
        i += 1
    return out


if __name__ == "__main__":
    sys.exit(main())
