#!/usr/bin/env bash
# Debian's `prometheus` for tests/test_trainer_prometheus.py (it scrapes a trainer run and checks every query of the
# committed Grafana dashboard). Installed where this machine allows it (apt-get, as root or through password-less
# sudo); elsewhere it says so and succeeds: that test then skips, saying why.
set -u
command -v prometheus >/dev/null 2>&1 && { echo "prometheus: installed ($(prometheus --version 2>&1 | head -1))"; exit 0; }
as_root=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then as_root=(sudo -n DEBIAN_FRONTEND=noninteractive); fi
fi
if { [ "$(id -u)" != 0 ] && [ ${#as_root[@]} -eq 0 ]; } || ! command -v apt-get >/dev/null 2>&1; then
  echo "prometheus: not installed (install Debian's prometheus package; the dashboard test skips without it)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends prometheus >"$log" 2>&1; then
  "${as_root[@]}" apt-get update -q >>"$log" 2>&1
  "${as_root[@]}" apt-get install -y -q --no-install-recommends prometheus >>"$log" 2>&1 \
    || { echo "prometheus: could not install: $(tail -1 "$log")"; rm -f "$log"; exit 0; }
fi
rm -f "$log"
echo "prometheus: installed"
