#!/usr/bin/env bash
# Fills the extension SDK cache: upstream pi 1.6.0's npm package @earendil-works/pi-coding-agent
# with its dependencies (pi-ai, pi-agent-core, pi-tui, typebox), whose modules the extension host
# resolves extension imports to (crates/coding-agent/src/extensions/sdk.rs). `pi` fills the same
# cache itself at the first start with an extension; this script does it ahead, for CI and the
# tests (PI_SDK_DIR).
#
#   scripts/fetch-upstream-sdk.sh          logs on stderr; prints the SDK dir on stdout
#
# Idempotent: the cache is $PI_SDK_DIR or ${XDG_CACHE_HOME:-~/.cache}/pi-rust/sdk-<version>
# (pi's default); a second run only checks its `.complete` marker. Filled as pi fills it: under
# the lock directory <dir>.lock, `npm install` into <dir>.partial, the marker written, then the
# folder renamed. Nothing is written into the repository.
set -euo pipefail

PI_VERSION=1.6.0
PKG=@earendil-works/pi-coding-agent
DIR="${PI_SDK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pi-rust/sdk-$PI_VERSION}"
log() { echo "fetch-upstream-sdk: $*" >&2; }
complete() { [ -f "$DIR/.complete" ] && [ -f "$DIR/node_modules/$PKG/package.json" ]; }

if complete; then
  log "SDK of pi $PI_VERSION already in $DIR"
  echo "$DIR"
  exit 0
fi
command -v npm >/dev/null || { log "npm not found on PATH"; exit 1; }
mkdir -p "$(dirname "$DIR")"
# The lock pi takes too (a directory; a holder keeps its mtime fresh; stale after 60 s).
for _ in $(seq 1 2640); do
  if mkdir "$DIR.lock" 2>/dev/null; then break; fi
  if [ -n "$(find "$DIR.lock" -maxdepth 0 -mmin +1 2>/dev/null)" ]; then rmdir "$DIR.lock" 2>/dev/null || true; fi
  sleep 0.25
done
[ -d "$DIR.lock" ] || { log "cannot take the lock $DIR.lock"; exit 1; }
( while sleep 20; do touch "$DIR.lock" 2>/dev/null || exit 0; done ) &
keeper=$!
trap 'kill "$keeper" 2>/dev/null || true; rmdir "$DIR.lock" 2>/dev/null || true' EXIT
if ! complete; then
  rm -rf "$DIR.partial"
  log "installing $PKG@$PI_VERSION into $DIR (npm install)"
  npm install "$PKG@$PI_VERSION" --prefix "$DIR.partial" --legacy-peer-deps --no-audit --no-fund \
    --omit=dev --ignore-scripts --loglevel=error >&2
  [ -f "$DIR.partial/node_modules/$PKG/package.json" ] || { log "$PKG missing after npm install"; exit 1; }
  echo "$PKG@$PI_VERSION" > "$DIR.partial/.complete"
  rm -rf "$DIR"
  mv "$DIR.partial" "$DIR"
fi
echo "$DIR"
