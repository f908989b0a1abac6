#!/usr/bin/env bash
# Fetches four real third-party pi packages at pinned versions (pi-aliases, pi-subagents,
# pi-mcp-adapter, pi-prompt-template-model) into a cache laid out as an agent directory's
# `npm/` folder after upstream 1.6's `pi install npm:<name>@<version>` of each, in that order,
# for crates/coding-agent/tests/all/real_packages.rs (PI_TEST_PACKAGES).
#
#   scripts/fetch-test-packages.sh          logs on stderr; prints the cache dir on stdout
#
# The printed dir holds:
#   npm/        the layout upstream's `pi install` leaves: a package.json named `pi-extensions`,
#               then one `npm install <name>@<version> --prefix npm --legacy-peer-deps
#               --no-audit --no-fund` per package (upstream's own arguments), so peer
#               dependencies such as the pi SDK are NOT installed: the host provides them.
#               Checked by hand against upstream 1.6's `pi install` on 2026-12-04: the same
#               node_modules folders.
#   npm-cache/  npm's cache after those installs, so that a test can run our `pi install`
#               with `npm_config_offline=true npm_config_cache=<dir>/npm-cache`: the real npm
#               and the real packages, without network.
# Idempotent: cached under ${XDG_CACHE_HOME:-~/.cache}/pi-rust/test-packages-v2-<pinned
# versions>; a second run only checks that the cache is complete. Uses `npm install` (the npm
# registry). Nothing is written into the repository.
set -euo pipefail

PACKAGES=(pi-aliases@1.0.7 pi-subagents@0.67.0 pi-mcp-adapter@2.36.0 pi-prompt-template-model@0.12.2)
KEY="$(IFS=_; echo "${PACKAGES[*]}" | tr '@' '-')"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/pi-rust/test-packages-v2-$KEY"
log() { echo "fetch-test-packages: $*" >&2; }

command -v npm >/dev/null || { log "npm not found on PATH"; exit 1; }

complete() {
  [ -f "$CACHE/.complete" ] || return 1
  [ -d "$CACHE/npm-cache" ] || return 1
  for p in "${PACKAGES[@]}"; do
    [ -f "$CACHE/npm/node_modules/${p%@*}/package.json" ] || return 1
  done
}

if complete; then
  log "packages already in $CACHE"
else
  rm -rf "$CACHE"
  mkdir -p "$CACHE/npm"
  printf '{\n  "name": "pi-extensions",\n  "private": true\n}\n' >"$CACHE/npm/package.json"
  printf '*\n!.gitignore\n' >"$CACHE/npm/.gitignore"
  for p in "${PACKAGES[@]}"; do
    log "npm install $p (as upstream's pi install does)"
    (cd "$CACHE" && npm install "$p" --prefix "$CACHE/npm" --legacy-peer-deps --no-audit \
      --no-fund --cache "$CACHE/npm-cache" --silent >&2)
  done
  for p in "${PACKAGES[@]}"; do
    [ -f "$CACHE/npm/node_modules/${p%@*}/package.json" ] || { log "${p%@*} missing after npm install"; exit 1; }
  done
  touch "$CACHE/.complete"
fi
echo "$CACHE"
