#!/usr/bin/env bash
# Unpacks the bundle archive .deps/NAME.tar.xz (from bench/gpu/bundle.sh, carried to the GPU
# machine) into .deps/NAME/, unless that very archive is unpacked there already: a machine
# kept warm between device calls still holds the previous call's tree, which must not be
# run in place of a newer bundle. Run from the repository root; exits non-zero when the
# archive is missing or does not unpack.
# usage: bench/gpu/unpack.sh [NAME]   (default gpu)
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
set -uo pipefail
name=${1:-gpu}
arc=".deps/$name.tar.xz" dir=".deps/$name"
[ -f "$arc" ] || { echo "unpack.sh: no $arc (run bench/gpu/bundle.sh and carry it)" >&2; exit 1; }
sum=$(sha1sum < "$arc") || exit 1
[ "$(cat "$dir/.bundle-sha1" 2>/dev/null)" = "$sum" ] && exit 0
rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf "$arc" && echo "$sum" > "$dir/.bundle-sha1"
