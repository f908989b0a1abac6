#!/usr/bin/env bash
# Fetches four real third-party pi packages at pinned versions (pi-aliases, pi-subagents,
# pi-mcp-adapter, pi-prompt-template-model) into a cache laid out as an agent directory's
# `npm/` folder after upstream's `pi install npm:<name>` of each (package.json "pi-extensions"
# with the four as dependencies, node_modules/), for crates/coding-agent/tests/all/
# real_packages.rs (PI_TEST_PACKAGES).
#
#   scripts/fetch-test-packages.sh          logs on stderr; prints the cache dir on stdout
#
# The printed dir holds `npm/` (link or copy it as <agent dir>/npm). Idempotent: cached under
# ${XDG_CACHE_HOME:-~/.cache}/pi-rust/test-packages-<pinned versions>; a second run only
# checks that the cache is complete. Uses `npm install` (the npm registry). Nothing is written
# into the repository.
set -euo pipefail

PACKAGES=(pi-aliases@1.0.7 pi-subagents@0.67.0 pi-mcp-adapter@2.36.0 pi-prompt-template-model@0.12.2)
KEY="$(IFS=_; echo "${PACKAGES[*]}" | tr '@' '-')"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/pi-rust/test-packages-$KEY"
log() { echo "fetch-test-packages: $*" >&2; }

command -v npm >/dev/null || { log "npm not found on PATH"; exit 1; }

complete() {
  [ -f "$CACHE/.complete" ] || return 1
  for p in "${PACKAGES[@]}"; do
    [ -f "$CACHE/npm/node_modules/${p%@*}/package.json" ] || return 1
  done
}

if complete; then
  log "packages already in $CACHE"
else
  rm -rf "$CACHE"
  mkdir -p "$CACHE/npm"
  deps=""
  for p in "${PACKAGES[@]}"; do
    deps="$deps${deps:+,}\"${p%@*}\": \"${p#*@}\""
  done
  printf '{\n  "name": "pi-extensions",\n  "private": true,\n  "dependencies": {%s}\n}\n' "$deps" >"$CACHE/npm/package.json"
  printf '*\n!.gitignore\n' >"$CACHE/npm/.gitignore"
  log "npm install ${PACKAGES[*]}"
  (cd "$CACHE/npm" && npm install --no-audit --no-fund --ignore-scripts --silent >&2)
  for p in "${PACKAGES[@]}"; do
    [ -f "$CACHE/npm/node_modules/${p%@*}/package.json" ] || { log "${p%@*} missing after npm install"; exit 1; }
  done
  touch "$CACHE/.complete"
fi
echo "$CACHE"
