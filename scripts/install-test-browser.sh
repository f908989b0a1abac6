#!/usr/bin/env bash
# Installs Debian's `chromium` for the headless-browser test of the HTML export
# (crates/coding-agent/tests/all/export_html.rs). Idempotent and non-interactive; does nothing
# when a chromium binary is already on PATH (or PI_TEST_CHROMIUM names one).
set -euo pipefail
if [ -n "${PI_TEST_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    echo "install-test-browser: chromium present"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-browser: apt-get not found; install chromium by hand" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install-test-browser: run as root to install chromium" >&2
        exit 1
    fi
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
