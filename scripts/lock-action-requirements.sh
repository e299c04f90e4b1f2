#!/usr/bin/env bash
# Regenerate action-requirements.txt, the hash-pinned lock the GitHub Action installs from (action.yml,
# docs/install.md#the-lock): every runtime dependency of the package (requirements.txt) and its build backend
# (requirements-build.txt), with hatchling's own dependencies at requirements-dev.txt's versions (the offline
# wheelhouse's), and the sha256 of every file PyPI holds for each version.
# pip-tools runs from a throwaway virtualenv; pip's configuration files and PIP_* variables are set aside so that
# pypi.org is the only index read and the hashes are PyPI's (not a mirror's or a local wheel folder's).
# The pip-compile line below is the one the lock's header records (tests/test_action.py compares them).
set -euo pipefail
cd "$(dirname "$0")/.."
PIP_TOOLS_VERSION=7.6.2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for v in $(env | grep -o '^PIP_[A-Z_]*'); do unset "$v"; done
export PIP_CONFIG_FILE=/dev/null
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check --index-url https://pypi.org/simple \
  "pip-tools==$PIP_TOOLS_VERSION"
"$tmp/venv/bin/pip-compile" --quiet --allow-unsafe --constraint=requirements-dev.txt --generate-hashes --index-url=https://pypi.org/simple --no-emit-index-url --output-file=action-requirements.txt --strip-extras requirements-build.txt requirements.txt
