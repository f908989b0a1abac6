#!/usr/bin/env bash
# Installs the system packages needed to build llama.cpp through the `llama-cpp-2` crate
# (crate `pi-local`): a C/C++ toolchain, cmake (llama.cpp's build), libclang (bindgen for the
# FFI bindings) and pkg-config. Idempotent and non-interactive; meant for a fresh Debian/Ubuntu
# machine run as root (CI calls it from .ci/run). Does nothing when everything is present.
set -euo pipefail

PACKAGES=(build-essential cmake clang libclang-dev pkg-config)

missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-build-deps: all present (${PACKAGES[*]})"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-build-deps: apt-get not found; install these by hand: ${missing[*]}" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install-build-deps: run as root (missing: ${missing[*]})" >&2
        exit 1
    fi
fi

echo "install-build-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
