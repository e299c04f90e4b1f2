#!/usr/bin/env bash
# Install one pinned, checksum-verified binary from a release archive into $BIN, where the machine can download it.
#   scripts/install-release.sh NAME URL SHA256 [VERSION_FLAG] [FALLBACK]
# NAME is the binary inside the .tar.gz at URL; FALLBACK says what runs instead when it cannot be installed.
# Already on PATH (or in $BIN): says which and succeeds. Cannot download: says so and succeeds (FALLBACK).
# Checksum mismatch: fails, and installs nothing.
set -euo pipefail
name=${1:?name} url=${2:?url} sha=${3:?sha256} version_flag=${4:---version} fallback=${5:-}
: "${BIN:?}"
say_version() { "$1" "$version_flag" 2>/dev/null | head -1 || echo "unknown version"; }

if found=$(PATH="$BIN:$PATH" command -v "$name" 2>/dev/null); then
  echo "$name: found $found ($(say_version "$found"))"
  exit 0
fi
if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  echo "$name: not installed (no pinned checksum for $(uname -s)-$(uname -m))${fallback:+; $fallback}"
  exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if ! curl -fsSL --connect-timeout 5 --max-time 60 -o "$tmp/archive.tar.gz" "$url" 2>"$tmp/err"; then
  echo "$name: not installed (cannot download $url: $(tail -1 "$tmp/err"))${fallback:+; $fallback}"
  exit 0
fi
echo "${sha}  $tmp/archive.tar.gz" | sha256sum -c --quiet - >/dev/null 2>&1 \
  || { echo "$name: checksum mismatch for $url (expected $sha): not installed" >&2; exit 1; }
tar -xzf "$tmp/archive.tar.gz" -C "$tmp" "$name"
mkdir -p "$BIN"
mv -f "$tmp/$name" "$BIN/.$name.tmp" && mv -f "$BIN/.$name.tmp" "$BIN/$name"
echo "$name: installed $(say_version "$BIN/$name") into $BIN"
