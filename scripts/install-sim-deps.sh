#!/usr/bin/env bash
# What `make simulate` needs from the system: libnss_wrapper (pod DNS names) and etcd with the v2 API (the etcd
# rendezvous variant), from Debian's packages. Installed where this machine allows it (root and apt-get);
# elsewhere it says what is missing and succeeds: the simulation tests then skip, saying why.
set -u
need=()
compgen -G "/usr/lib/*/libnss_wrapper.so" >/dev/null || compgen -G "/usr/lib/libnss_wrapper.so" >/dev/null || need+=(libnss-wrapper)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
[ ${#need[@]} -eq 0 ] && { echo "simulate: libnss_wrapper and etcd are installed"; exit 0; }
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "simulate: missing ${need[*]} (install them with your package manager; make simulate needs libnss_wrapper)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends "${need[@]}" >/tmp/install-sim-deps.log 2>&1; then
  apt-get update -q >>/tmp/install-sim-deps.log 2>&1
  apt-get install -y -q --no-install-recommends "${need[@]}" >>/tmp/install-sim-deps.log 2>&1 \
    || { echo "simulate: could not install ${need[*]}: $(tail -1 /tmp/install-sim-deps.log)"; exit 0; }
fi
echo "simulate: installed ${need[*]}"
