"""scripts/install-release.sh, which `make setup` uses for kubeconform and actionlint: a pinned archive whose sha256
does not match installs nothing and fails; one that cannot be downloaded is reported and set-up goes on; one that
matches is installed atomically into $BIN. Served from file:// URLs (curl reads them as it reads https)."""
from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import REPO

SCRIPT = REPO / "scripts/install-release.sh"
NAME = "ddp-fake-tool"


def archive(tmp_path: Path) -> tuple[str, str]:
    body = b"#!/bin/sh\necho 'ddp-fake-tool 9.9.9'\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(NAME)
        info.size, info.mode = len(body), 0o755
        tar.addfile(info, io.BytesIO(body))
    path = tmp_path / "tool.tar.gz"
    path.write_bytes(buf.getvalue())
    return path.as_uri(), hashlib.sha256(buf.getvalue()).hexdigest()


def install(tmp_path: Path, url: str, sha: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BIN": str(tmp_path / "bin"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["bash", str(SCRIPT), NAME, url, sha, "--version", "the fallback runs"], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(autouse=True)
def linux_x86_64():
    if os.uname().sysname != "Linux" or os.uname().machine != "x86_64":
        pytest.skip("the installer pins checksums for Linux x86_64 only")


def test_a_matching_checksum_installs_the_binary(tmp_path):
    url, sha = archive(tmp_path)
    proc = install(tmp_path, url, sha)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{NAME}: installed ddp-fake-tool 9.9.9 into {tmp_path / 'bin'}"
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == [NAME]  # no temp file left
    again = install(tmp_path, url, sha)  # already there: found, not downloaded again
    assert again.returncode == 0 and again.stdout.startswith(f"{NAME}: found {tmp_path / 'bin' / NAME}")


def test_a_checksum_mismatch_installs_nothing_and_fails(tmp_path):
    url, sha = archive(tmp_path)
    proc = install(tmp_path, url, "0" * 64)
    assert proc.returncode == 1
    assert f"{NAME}: checksum mismatch for {url}" in proc.stderr
    assert not (tmp_path / "bin").exists()


def test_no_download_is_reported_and_setup_goes_on(tmp_path):
    proc = install(tmp_path, (tmp_path / "missing.tar.gz").as_uri(), "0" * 64)
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"{NAME}: not installed (cannot download ")
    assert proc.stdout.rstrip().endswith("; the fallback runs")
    assert not (tmp_path / "bin").exists()
