#!/usr/bin/env bash
# Install a pinned, checksum-verified kubeconform into $BIN where the machine can download it.
# Where it cannot, say so and succeed: `make validate` then uses the in-process validator over the same schemas.
set -euo pipefail
: "${KUBECONFORM_VERSION:?}" "${KUBECONFORM_SHA256:?}" "${BIN:?}"

if command -v kubeconform >/dev/null 2>&1; then
  echo "kubeconform: found $(command -v kubeconform) ($(kubeconform -v 2>/dev/null || echo unknown version))"
  exit 0
fi
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) asset=kubeconform-linux-amd64.tar.gz ;;
  *) echo "kubeconform: not installed (no pinned checksum for $(uname -s)-$(uname -m)); the in-process validator will be used"; exit 0 ;;
esac
url="https://github.com/yannh/kubeconform/releases/download/${KUBECONFORM_VERSION}/${asset}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if ! curl -fsSL --connect-timeout 5 --max-time 60 -o "$tmp/$asset" "$url" 2>"$tmp/err"; then
  echo "kubeconform: not installed (cannot download $url: $(tail -1 "$tmp/err")); the in-process validator will be used"
  exit 0
fi
echo "${KUBECONFORM_SHA256}  $tmp/$asset" | sha256sum -c --quiet - || { echo "kubeconform: checksum mismatch for $url" >&2; exit 1; }
tar -xzf "$tmp/$asset" -C "$tmp" kubeconform
mkdir -p "$BIN"
mv -f "$tmp/kubeconform" "$BIN/kubeconform.tmp" && mv -f "$BIN/kubeconform.tmp" "$BIN/kubeconform"
echo "kubeconform: installed $("$BIN/kubeconform" -v) into $BIN"
