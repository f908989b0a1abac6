#!/usr/bin/env bash
# Fetches upstream pi 1.6.0's example extensions (its npm package's examples/extensions) into a
# cache and installs the dependencies of examples/extensions/with-deps and
# custom-provider-anthropic, for the tests in crates/coding-agent/tests/all/extensions.rs and
# upstream_examples.rs that run them unchanged (PI_UPSTREAM_EXAMPLES).
#
#   scripts/fetch-upstream-examples.sh          logs on stderr; prints the examples dir on stdout
#
# Idempotent: cached under ${XDG_CACHE_HOME:-~/.cache}/pi-rust/upstream-examples-<version>; a
# second run only checks that the cache is complete. Uses `npm pack` (the package tarball from
# the npm registry, without its dependencies) and `npm install` in those two folders. Nothing is written
# into the repository.
set -euo pipefail

PI_VERSION=1.6.0
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/pi-rust/upstream-examples-$PI_VERSION"
DIR="$CACHE/package/examples/extensions"
log() { echo "fetch-upstream-examples: $*" >&2; }

command -v npm >/dev/null || { log "npm not found on PATH"; exit 1; }

if [ -f "$DIR/hello.ts" ] && [ -f "$CACHE/.complete" ]; then
  log "examples of pi $PI_VERSION already in $CACHE"
else
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  log "fetching @earendil-works/pi-coding-agent@$PI_VERSION from the npm registry"
  tgz="$(cd "$CACHE" && npm pack --silent "@earendil-works/pi-coding-agent@$PI_VERSION" | tail -n1)"
  tar -xzf "$CACHE/$tgz" -C "$CACHE"
  rm -f "$CACHE/$tgz"
  [ -f "$DIR/hello.ts" ] || { log "no examples/extensions in the package"; exit 1; }
fi
if [ ! -d "$DIR/with-deps/node_modules/ms" ]; then
  log "npm install in examples/extensions/with-deps"
  (cd "$DIR/with-deps" && npm install --no-audit --no-fund --ignore-scripts --silent >&2)
fi
if [ ! -d "$DIR/custom-provider-anthropic/node_modules/@anthropic-ai/sdk" ]; then
  log "npm install in examples/extensions/custom-provider-anthropic"
  (cd "$DIR/custom-provider-anthropic" && npm install --no-audit --no-fund --ignore-scripts --silent >&2)
fi
touch "$CACHE/.complete"
echo "$DIR"
