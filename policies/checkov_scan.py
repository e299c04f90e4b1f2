"""`make lint`'s scanner: checkov on every rendered overlay (or PATHS), so a user's own scan agrees with our rules.

Every failed check is an error unless the object carries checkov's own skip annotation with a reason,
`checkov.io/skip<N>: <CHECK_ID>=<reason>`; a skip without a reason (checkov records "No comment provided") is an
error too. checkov runs from its own virtual environment (.venv-checkov, requirements-checkov.txt); a missing
checkov is an error that says how to install it, never a silent pass. docs/rules.md#checkov lists the skips.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .report import engine
from .entry import guarded
from .render.files import rel

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOT = REPO / "overlays"
CHECKOV_VERSION = "3.3.30"  # requirements-checkov.txt
NO_REASON = "No comment provided"  # what checkov records for a skip annotation without `=<reason>`
TIMEOUT_S = 600


class ScanError(Exception):
    """checkov missing, failing to run, or answering something unreadable."""


@dataclass(frozen=True)
class Finding:
    source: str  # the overlay folder or file
    resource: str  # checkov's Kind.namespace.name
    check_id: str
    check_name: str
    reason: str | None  # the skip's reason; None for a failed check

    def line(self) -> str:
        where = f"{rel(self.source)}: {self.resource}"
        if self.reason is None:
            return (f"error CHECKOV {where}: {self.check_id} {self.check_name} (fix: change the object, or where the "
                    f"design says otherwise add the annotation checkov.io/skip<N>: \"{self.check_id}=<reason>\")")
        return (f"error CHECKOV {where}: {self.check_id} skipped without a reason (fix: write the annotation as "
                f"checkov.io/skip<N>: \"{self.check_id}=<reason>\")")


def find_checkov() -> str | None:
    """$CHECKOV, else the tool venv make setup creates, else checkov on PATH."""
    for candidate in (os.environ.get("CHECKOV"), str(REPO / ".venv-checkov" / "bin" / "checkov")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("checkov")


def run_checkov(checkov: str, folder: Path) -> list[dict[str, Any]]:
    """checkov's JSON reports for the kubernetes framework over `folder` (a list, one per framework)."""
    cmd = [checkov, "--directory", str(folder), "--framework", "kubernetes", "--output", "json", "--skip-download"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ScanError(f"checkov took more than {TIMEOUT_S} s") from None
    except OSError as e:
        raise ScanError(f"cannot run {checkov}: {e.strerror or e}") from None
    # checkov exits 1 when a check failed: the JSON says which; anything else without JSON is a failure to run.
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        raise ScanError(f"checkov exited {proc.returncode} without a report: {last[:300]}") from None
    reports = data if isinstance(data, list) else [data]
    if not all(isinstance(r, dict) for r in reports):
        raise ScanError("checkov's report is not the JSON it documents")
    return reports


def scan(paths: list[str], checkov: str) -> tuple[list[str], list[Finding], dict[str, int], list[str]]:
    """(sources scanned, findings, checkov's summary totals, input errors)."""
    units = engine.collect(paths, DEFAULT_ROOT)
    errors = [u.problems[0].line() for u in units if u.failed_input]
    units = [u for u in units if not u.failed_input]
    findings: list[Finding] = []
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    with tempfile.TemporaryDirectory(prefix="checkov-") as tmp:
        sources: dict[str, str] = {}
        for i, u in enumerate(units):
            name = f"{i:03d}.yaml"
            sources[f"/{name}"] = u.source
            Path(tmp, name).write_text(yaml.safe_dump_all([m.obj for m in u.manifests], sort_keys=False))
        if units:
            for report in run_checkov(checkov, Path(tmp)):
                summary = report.get("summary") or {}
                for key in totals:
                    totals[key] += int(summary.get(key) or 0)
                results = report.get("results") or {}
                for kind in ("failed_checks", "skipped_checks"):
                    for r in results.get(kind) or []:
                        reason = None
                        if kind == "skipped_checks":
                            reason = str((r.get("check_result") or {}).get("suppress_comment") or "").strip()
                            if reason and reason != NO_REASON:
                                continue  # skipped with a reason: what the design says
                        source = sources.get(str(r.get("file_path")), str(r.get("file_path")))
                        findings.append(Finding(source, str(r.get("resource")), str(r.get("check_id")),
                                                str(r.get("check_name")), reason))
    findings.sort(key=lambda f: (f.source, f.resource, f.check_id))
    return [u.source for u in units], findings, totals, errors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m policies.checkov_scan", description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*", help="overlay folders or manifest files (default: every overlay)")
    args = p.parse_args(argv)

    def body() -> int:
        checkov = find_checkov()
        if checkov is None:
            raise ScanError(f"checkov not found: `make setup` installs checkov {CHECKOV_VERSION} in .venv-checkov "
                            "(or set CHECKOV=<path>)")
        from .cli import rejoin, split_paths  # `make lint PATHS="a b"` arrives as one word, as make validate's does

        paths = rejoin([q for raw in args.paths for q in split_paths(raw)])
        sources, findings, totals, errors = scan(paths, checkov)
        for line in errors + [f.line() for f in findings]:
            print(line)
        bad = len(errors) + len(findings)
        unexplained = sum(1 for f in findings if f.reason is not None)
        print(f"checkov: {len(sources)} sources, {totals['passed']} checks passed, {totals['skipped'] - unexplained} "
              f"skipped with a reason, {totals['failed'] + unexplained} failed or skipped without one; {bad} problem(s)")
        return 1 if bad else 0

    return guarded(body, (ScanError,))


if __name__ == "__main__":
    sys.exit(main())
