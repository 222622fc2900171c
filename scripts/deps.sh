#!/usr/bin/env bash
# Installs the Debian packages sieve needs to build, test and run, when any is missing.
# Idempotent: does nothing when everything is present. Uses sudo when not root.
set -euo pipefail

PKGS=(build-essential cmake pkg-config
      libmicrohttpd-dev libjansson-dev liblmdb-dev lmdb-utils libcriterion-dev
      libcurl4-openssl-dev libopenblas-dev python3 python3-venv python3-numpy
      libfaiss-dev python3-faiss python3-matplotlib curl)
[ "${SIEVE_DEPS_EXTRA:-}" ] && read -r -a extra <<<"$SIEVE_DEPS_EXTRA" && PKGS+=("${extra[@]}")

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "sieve: installing missing Debian packages: ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
