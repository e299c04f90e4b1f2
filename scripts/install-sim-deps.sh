#!/usr/bin/env bash
# What `make simulate` needs from the system: libnss_wrapper (pod DNS names), libsocket_wrapper (a network per
# pod) and etcd with the v2 API (the etcd rendezvous variant), from Debian's packages. Installed where this machine
# allows it (apt-get, as root or through password-less sudo, as on GitHub's runners); elsewhere it says what is
# missing and succeeds: the simulation tests then skip, saying why.
set -u
need=()
compgen -G "/usr/lib/*/libnss_wrapper.so" >/dev/null || compgen -G "/usr/lib/libnss_wrapper.so" >/dev/null || need+=(libnss-wrapper)
compgen -G "/usr/lib/*/libsocket_wrapper.so" >/dev/null || compgen -G "/usr/lib/libsocket_wrapper.so" >/dev/null || need+=(libsocket-wrapper)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
[ ${#need[@]} -eq 0 ] && { echo "simulate: libnss_wrapper, libsocket_wrapper and etcd are installed"; exit 0; }
# As root, or through sudo where it needs no password (GitHub's runners); never a password prompt.
as_root=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then as_root=(sudo -n DEBIAN_FRONTEND=noninteractive); fi
fi
if { [ "$(id -u)" != 0 ] && [ ${#as_root[@]} -eq 0 ]; } || ! command -v apt-get >/dev/null 2>&1; then
  echo "simulate: missing ${need[*]} (install them with your package manager; make simulate needs libnss_wrapper)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends "${need[@]}" >"$log" 2>&1; then
  "${as_root[@]}" apt-get update -q >>"$log" 2>&1
  "${as_root[@]}" apt-get install -y -q --no-install-recommends "${need[@]}" >>"$log" 2>&1 \
    || { echo "simulate: could not install ${need[*]}: $(tail -1 "$log")"; rm -f "$log"; exit 0; }
fi
rm -f "$log"
echo "simulate: installed ${need[*]}"
