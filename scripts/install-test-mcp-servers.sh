#!/usr/bin/env bash
# Installs the npm reference MCP servers that crates/coding-agent/tests/all/mcp_reference.rs
# runs through pi: @modelcontextprotocol/server-everything and
# @modelcontextprotocol/server-filesystem, pinned, from the npm registry, into
# ${PI_TEST_MCP_DIR:-~/.cache/pi-test-mcp-servers}. Idempotent and non-interactive: does nothing
# when those versions are installed there already. Needs node and npm (Node >= 18).
set -euo pipefail
EVERYTHING=2026.8.31
FILESYSTEM=2026.8.31
DIR="${PI_TEST_MCP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pi-test-mcp-servers}"
STAMP="$DIR/.installed-everything-$EVERYTHING-filesystem-$FILESYSTEM"
if [ -f "$STAMP" ] && [ -x "$DIR/node_modules/.bin/mcp-server-everything" ] && [ -x "$DIR/node_modules/.bin/mcp-server-filesystem" ]; then
    echo "install-test-mcp-servers: present in $DIR"
    exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "install-test-mcp-servers: npm not found; install Node.js and npm" >&2; exit 1; }
mkdir -p "$DIR"
cd "$DIR"
[ -f package.json ] || echo '{"name": "pi-test-mcp-servers", "private": true}' > package.json
rm -f .installed-*
npm install --no-audit --no-fund --no-progress --loglevel=error --save-exact \
    "@modelcontextprotocol/server-everything@$EVERYTHING" \
    "@modelcontextprotocol/server-filesystem@$FILESYSTEM"
touch "$STAMP"
echo "install-test-mcp-servers: installed in $DIR"
