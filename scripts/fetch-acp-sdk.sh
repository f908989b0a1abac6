#!/usr/bin/env bash
# Fetches the official TypeScript ACP SDK (`@agentclientprotocol/sdk`, pinned) into a cache, for
# crates/coding-agent/tests/all/acp.rs, whose TypeScript-client test drives `pi --mode acp` with
# the SDK's `ClientSideConnection` (PI_ACP_SDK).
#
#   scripts/fetch-acp-sdk.sh          logs on stderr; prints the cache dir on stdout
#
# The printed dir holds `node_modules/@agentclientprotocol/sdk` (and its dependencies), so a
# script in that dir can `import` the package. Idempotent: cached under
# ${XDG_CACHE_HOME:-~/.cache}/pi-rust/acp-sdk-<version>; a second run only checks that the cache
# is complete. Uses `npm install` (the npm registry). Nothing is written into the repository.
set -euo pipefail

PACKAGE=@agentclientprotocol/sdk@2.4.0
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/pi-rust/acp-sdk-${PACKAGE##*@}"
log() { echo "fetch-acp-sdk: $*" >&2; }

command -v npm >/dev/null || { log "npm not found on PATH"; exit 1; }

complete() {
  [ -f "$CACHE/.complete" ] && [ -f "$CACHE/node_modules/@agentclientprotocol/sdk/package.json" ]
}

if complete; then
  log "$PACKAGE already in $CACHE"
else
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  printf '{\n  "name": "pi-acp-sdk-cache",\n  "private": true,\n  "type": "module"\n}\n' >"$CACHE/package.json"
  log "npm install $PACKAGE"
  (cd "$CACHE" && npm install "$PACKAGE" --no-audit --no-fund --silent >&2)
  [ -f "$CACHE/node_modules/@agentclientprotocol/sdk/package.json" ] || { log "the SDK is missing after npm install"; exit 1; }
  touch "$CACHE/.complete"
fi
echo "$CACHE"
