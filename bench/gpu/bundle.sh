#!/usr/bin/env bash
# Builds sieve here (Release, CUDA for sm_90a + PTX) and bundles the binaries the GPU machine
# runs, with the shared libraries they need that a bare CUDA image lacks, into .deps/gpu/
# (ignored by git; name it in the device tool's carry list).
# usage: bench/gpu/bundle.sh [build dir]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build-gpu}"
cd "$root"
scripts/build.sh "$build" -DCMAKE_BUILD_TYPE=Release -DSIEVE_CUDA=ON >/dev/null
out="$root/.deps/gpu"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=()
for b in bench/sieve-bench tests/test_knn_cuda server/sieve-server client/sieve tests/test_server; do
  [ -x "$build/$b" ] && bins+=("$build/$b")
done
cp "${bins[@]}" "$out/bin/"
# every shared library except the C runtime and the C++ runtime the image has
for b in "${bins[@]}"; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|libnsl|libutil|libanl|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
du -sh "$out"
