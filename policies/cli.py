"""Command line: `ddp-check validate|plan|render|docs|tools [PATHS...]`, also `python -m policies` (the Makefile's
targets call it so), and `cmp-init`/`cmp-generate`, the Argo CD Config Management Plugin's commands
(policies/cmp.py)."""
from __future__ import annotations

import argparse
import gc
import os
import shlex
import sys
import time
from typing import TYPE_CHECKING, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from .entry import guarded
from .render.files import rel as _rel
from .render.loader import InputError
from .render.paths import CHECKOUT, COMMAND, DATA, INSTALLED, overlay_path, version

if TYPE_CHECKING:
    from .report.engine import Unit
    from .rules.kit import Environment
    from .schema.validator import Validator

# No PATHS: the checkout's overlays; installed, the working folder (every overlay and manifest file below it).
DEFAULT_ROOT = CHECKOUT / "overlays" if CHECKOUT is not None else Path(".")


def _paths(args: argparse.Namespace) -> list[str]:
    """PATHS as written, each overlay also as <env>/<launcher> (the OVERLAY form make scale takes)."""
    return [overlay_path(p) for p in args.paths]


def _validator(prefer: str) -> Validator:
    from .schema import make_validator

    return make_validator(prefer)


def _operator(args: argparse.Namespace) -> Environment | None:
    """The operator's policy --operator-policy names (check as the Argo CD plugin does), else None."""
    if not getattr(args, "operator_policy", None):
        return None
    from .cmp import operator_policy

    return operator_policy(Path(args.operator_policy))


# validate's report formats (policies/report/report.py: FORMATS, the same names; tests/test_reports.py).
REPORT_FORMATS = ("text", "json", "sarif", "junit", "github", "markdown")


def cmd_validate(args: argparse.Namespace) -> int:
    rc, report, _ = check(_paths(args), args.format, args.strict, args.schema, args.env, _operator(args),
                          config=args.config, write=args.write, bundle=args.bundle)
    sys.stdout.write(report)
    return rc


def _report_file(value: str) -> tuple[str, str]:
    """--write FORMAT=PATH."""
    fmt, sep, path = value.partition("=")
    if not sep or fmt not in REPORT_FORMATS or not path:
        raise argparse.ArgumentTypeError(f"expected FORMAT=PATH, FORMAT one of {', '.join(REPORT_FORMATS)}: "
                                         f"{value!r}")
    return fmt, path


def _writable(write: Sequence[tuple[str, str]]) -> None:
    """Each --write target's folder exists and the target is no folder: said before the checks run, not after."""
    for fmt, path in write:
        target = Path(path)
        if target.is_dir():
            raise InputError(f"--write {fmt}={path}: is a folder")
        if not target.parent.is_dir():
            raise InputError(f"--write {fmt}={path}: no such folder: {target.parent}")


def check(paths: list[str], fmt: str = "text", strict: bool = False, schema: str = "builtin",
          env: str | None = None, operator: Environment | None = None, banner: bool = True, config: str | None = None,
          write: Sequence[tuple[str, str]] = (), bundle: bool = False) -> tuple[int, str, list[Unit]]:
    """`validate`: the exit code, the report in `fmt`, and the units checked (the Argo CD plugin prints what it
    checked, policies/cmp.py). `operator`: the operator's policy (an Environment) each unit is checked under,
    narrowed by the unit's own declaration (environment.tightened; the Argo CD plugin). `config`: the rule
    configuration file (--config), else `.ddp-check.yaml` in the working folder where there is one (rule_config).
    `write`: (format, path) pairs, more reports of the same run written to files (the GitHub Action's SARIF,
    annotations and summary). `bundle`: each folder's plain manifest files are one input (--bundle)."""
    from .report import engine
    from .report.report import FORMATS, Run
    from .render.trace import place

    from .render.render import share_renders

    from .report import rule_config

    _writable(write)
    start = time.perf_counter()
    settings = rule_config.find(config)  # a file it cannot read stops here, before anything renders
    share_renders()  # an overlay and the Argo CD Application that points at it are rendered once
    ahead = _kustomize_banner_ahead(paths) if banner else None
    units = engine.collect(paths, DEFAULT_ROOT, env_file=env, bundle=bundle)
    if operator is not None:
        from .rules.environment import tightened

        for u in units:
            if not u.failed_input:
                u.environment = tightened(u.environment, operator)
    # What was read lives until the process ends: out of the cyclic collector's sight, the schema and policy
    # stages do not walk it again at every collection (8.6 % fewer instructions in the policy stage, callgrind).
    gc.freeze()
    validator = None if schema == "none" else _validator(schema)
    if ahead is not None and any(u.kind == "overlay" for u in units):
        _kustomize_banner(ahead)  # which kustomize rendered; said only where one did (not for files or stdin)
    timings = engine.Timings()
    engine.validate(units, validator, timings)
    place(units)
    if settings is not None:
        rule_config.apply(settings, units)
    schema_name = validator.name if validator else "skipped (--schema none)"
    run = Run(units, schema_name, time.perf_counter() - start, strict=strict)
    for extra, path in write:
        try:
            Path(path).write_text(FORMATS[extra](run), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"--write {extra}={path}: {exc.strerror or exc}") from None
    return (1 if engine.failed(units, strict) else 0), FORMATS[fmt](run), units


def _kustomize_banner_ahead(paths: list[str]) -> Future[str] | None:
    """Where a folder is named (overlays may be rendered), ask kubectl for its kustomize version in a thread while
    the overlays render: `kubectl version` is a process of its own (0.1-0.2 s here) that need not wait for them."""
    if not any(os.path.isdir(p) for p in paths):
        return None
    from .render.gitops import summary

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(summary)
    finally:
        pool.shutdown(wait=False)


def _kustomize_banner(banner: Future[str]) -> None:
    from .render.gitops import ConfigError

    try:
        print(banner.result(), file=sys.stderr, flush=True)
    except (ConfigError, InputError) as exc:
        print(f"kustomize: {exc}", file=sys.stderr, flush=True)


def cmd_plan(args: argparse.Namespace) -> int:
    from .report import engine, plan

    units = engine.collect(_paths(args), DEFAULT_ROOT, env_file=args.env, bundle=args.bundle)
    engine.validate(units, None)
    if args.format == "json":
        print(plan.to_json(units))
        return 1 if any(u.failed_input for u in units) else 0
    text, bad = plan.text(units, pods=args.pods)
    sys.stdout.write(text)
    return 1 if bad else 0


def cmd_render(args: argparse.Namespace) -> int:
    import yaml

    from .report import engine

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
    if INSTALLED and not (args.blocks or args.check):  # made from the rules and their fixtures at build time; the fixtures are not in the wheel
        sys.stdout.write((DATA / "docs" / "rules.md").read_text(encoding="utf-8"))
        return 0
    from .report.docs import rules_markdown, update_blocks

    if args.blocks:
        for name in update_blocks(write=True):
            print(f"docs: {name}: generated blocks rewritten", file=sys.stderr)
        return 0
    if args.check:
        stale = update_blocks(write=False)
        for name in stale:
            print(f"docs: {name}: generated blocks out of date (run `make docs`)", file=sys.stderr)
        return 1 if stale else 0
    sys.stdout.write(rules_markdown())
    return 0


def cmd_changed(args: argparse.Namespace) -> int:
    """The pre-commit hook's command (.pre-commit-hooks.yaml): validate what the changed files affect."""
    from .changed import targets

    found = targets(args.paths, Path.cwd(), args.bundle)
    if not found:
        print("ddp-check: no overlay reads the changed files and none is a manifest: nothing to validate")
        return 0
    rc, report, _ = check(found, args.format, args.strict, args.schema, args.env, _operator(args),
                          config=args.config, write=args.write, bundle=args.bundle)
    sys.stdout.write(report)
    return rc


def cmd_cmp_init(args: argparse.Namespace) -> int:
    from .cmp import init

    return init()


def cmd_cmp_generate(args: argparse.Namespace) -> int:
    from .cmp import generate

    return generate(check)


def _kubeconform_found() -> str:
    from .schema import find_kubeconform

    found = find_kubeconform()
    if found:
        return str(found)
    return ("not installed (make setup installs it where GitHub can be reached)" if CHECKOUT is not None else
            "not installed (put kubeconform on PATH or name it in $KUBECONFORM)")


def cmd_tools(args: argparse.Namespace) -> int:
    from .render.gitops import kubectl

    import subprocess

    out = subprocess.run([kubectl(), "version", "--client"], capture_output=True, text=True).stdout.split("\n")
    print(f"kubectl: {kubectl()} ({'; '.join(x.strip() for x in out if x.strip())})")
    print(f"schema validator for `make validate`: {_validator('builtin').name}; with SCHEMA=kubeconform: "
          f"{_kubeconform_found()}")
    if INSTALLED:
        return 0  # make simulate is the checkout's
    from .simulate.host import NSS_WRAPPER_CANDIDATES, SOCKET_WRAPPER_CANDIDATES, installed, name_serializer

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


def _check_options(ap: argparse.ArgumentParser) -> None:
    """validate's options, for validate and changed."""
    ap.add_argument("--format", choices=REPORT_FORMATS, default="text",
                    help="text (default), json, sarif (GitHub code scanning), junit (CI dashboards), github (workflow "
                         "commands: an annotation per problem on the pull request's diff) or markdown (a job "
                         "summary); on standard output")
    ap.add_argument("--write", metavar="FORMAT=PATH", action="append", type=_report_file, default=[],
                    help="also write the report in FORMAT to PATH, from the same run (repeatable)")
    # The in-process validator by default: the same verdicts as kubeconform on every test input (tests/
    # test_kubeconform.py, with the real binary) at a fraction of its time (bench/HISTORY.md#make-bench-validate).
    ap.add_argument("--schema", choices=("builtin", "kubeconform", "auto", "none"), default="builtin",
                    help="schema validator: the in-process jsonschema-rs one (builtin, the default), kubeconform, or "
                         "auto (kubeconform where installed, else builtin)")
    ap.add_argument("--strict", action="store_true", help="warnings fail too")
    ap.add_argument("--env", metavar="POLICY_YAML",
                    help="environment declaration for inputs that bring none (files, standard input)")
    ap.add_argument("--config", metavar="FILE",
                    help="rule settings for paths: skip a rule or change its severity (default: .ddp-check.yaml in "
                         "the working folder, where there is one; docs/validation.md#repository-wide-rule-settings)")
    ap.add_argument("--operator-policy", metavar="POLICY_YAML",
                    help="check as the Argo CD plugin does: under this operator's policy, which each input's own "
                         "declaration can only narrow (argocd/cmp/operator-policy.yaml is the plugin's default)")


def _bundle_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--bundle", action="store_true",
                    help="read the plain manifest files of each folder as one input, as `kubectl apply -f <folder>` "
                         "applies them (a TrainJob and its runtime, a Namespace and its pods in files of their "
                         "own); without it each file is checked on its own, as kubeconform reads a folder")


class _Version(argparse.Action):
    """--version, read only when asked for (the version lives in pyproject.toml or the installed metadata)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"{COMMAND} {version()}")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__)
    ap.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="render, schema-validate and topology-check")
    v.add_argument("paths", nargs="*", help="overlay folders, manifest files, or - for standard input")
    _check_options(v)
    _bundle_option(v)
    v.set_defaults(func=cmd_validate)
    c = sub.add_parser("changed", help="validate the overlays below the working folder that read the given files "
                                       "and the given manifest files no kustomization reads (the pre-commit hook)")
    c.add_argument("paths", nargs="*", metavar="FILE", help="changed files, relative to the working folder")
    _check_options(c)
    _bundle_option(c)
    c.set_defaults(func=cmd_changed)
    p = sub.add_parser("plan", help="each overlay's effective topology, its pods, or one JSON document")
    p.add_argument("paths", nargs="*")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (a table per overlay) or json (every workload, pod, container and env)")
    p.add_argument("--pods", action="store_true", help="with text: list every pod, its labels and each container's env")
    p.add_argument("--env", metavar="POLICY_YAML", help="environment declaration for inputs that bring none (files, "
                                                        "standard input): what it declares of the cluster (Kueue) "
                                                        "decides which pods are created now")
    _bundle_option(p)
    p.set_defaults(func=cmd_plan)
    r = sub.add_parser("render", help="print rendered manifests")
    r.add_argument("paths", nargs="*")
    r.set_defaults(func=cmd_render)
    d = sub.add_parser("docs", help="print docs/rules.md (or rewrite the docs' generated blocks)")
    d.add_argument("--blocks", action="store_true",
                   help="rewrite the blocks of docs/validation.md and tests/conformance/README.md made from the "
                        "launcher registry, docs/gitops.md's Argo CD health table and argocd/argocd-cm.yaml's "
                        "resource customizations (from argocd/health/ and argocd/actions/)")
    d.add_argument("--check", action="store_true", help="exit 1 where such a block is out of date")
    d.set_defaults(func=cmd_docs)
    t = sub.add_parser("tools", help="say which kubectl and schema validator will run")
    t.set_defaults(func=cmd_tools)
    ci = sub.add_parser("cmp-init", help="Argo CD plugin init: say which kustomize renders; fail if it is not the "
                                         "pinned one")
    ci.set_defaults(func=cmd_cmp_init)
    cg = sub.add_parser("cmp-generate", help="Argo CD plugin generate: render the working folder, check it, print the "
                                             "manifests only when nothing failed (docs/gitops.md)")
    cg.set_defaults(func=cmd_cmp_generate)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(args, "paths"):
        args.paths = rejoin([p for raw in args.paths for p in split_paths(raw)])
    if args.func in (cmd_validate, cmd_plan, cmd_render):
        # Rendering starts now, in threads, while the rules, the launcher model and the schema validator are
        # imported (a third of a second of a cold run that kustomize's processes need not wait for).
        from .render.render import prefetch, share_renders

        if args.func is cmd_validate:
            share_renders()
        prefetch(_paths(args) or [str(DEFAULT_ROOT)], delivery=args.func is cmd_validate)
    from .schema import ValidatorUnavailable

    return guarded(lambda: args.func(args), (InputError, ValidatorUnavailable))


def split_paths(raw: str) -> list[str]:
    """One argument as paths. A path that exists is taken whole, spaces and all. Otherwise `make validate PATHS=...`
    hands the whole variable over as one word (the Makefile passes variables as data, never to the shell): its
    quotes are read as a shell would split words (shlex, which runs nothing: `'"my file.yaml" other.yaml'`), else
    words that name existing paths once joined by a space are joined (`my file.yaml other.yaml`). Where not every
    word then names something, it is one path, reported as missing."""
    if os.path.lexists(raw):
        return [raw]
    candidates: list[list[str]] = []
    if "'" in raw or '"' in raw:
        try:
            candidates.append(shlex.split(raw))
        except ValueError:
            pass  # unbalanced quotes: characters of a name
    candidates.append(rejoin(raw.split()))
    for words in candidates:
        if words and all(w == "-" or os.path.lexists(w) for w in words):
            return words
    parts = raw.split()
    return parts if len(parts) == 1 else [raw]


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
