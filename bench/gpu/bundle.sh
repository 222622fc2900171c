#!/usr/bin/env bash
# Builds sieve here (Release, CUDA for sm_90a + PTX) and bundles what the GPU machine runs
# into .deps/gpu/ and the archive .deps/gpu.tar.xz (ignored by git; name the archive in the
# device tool's carry list; bench/gpu/run.sh unpacks it):
#   .deps/gpu/build/<dir>/<program>  the programs, in the build tree's layout (the server
#                                    tests find sieve-server through SIEVE_BUILD_DIR)
#   .deps/gpu/lib/                   shared libraries a bare CUDA image lacks
# usage: bench/gpu/bundle.sh [build dir]
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build-gpu}"
cd "$root"
mkdir -p "$build"
scripts/build.sh "$build" -DCMAKE_BUILD_TYPE=Release -DSIEVE_CUDA=ON >/dev/null
out="$root/.deps/gpu"
rm -rf "$out"
mkdir -p "$out/build" "$out/lib"
progs=(bench/sieve-bench bench/sieve-loadgen bench/sieve-bench-store server/sieve-server
       client/sieve datasets/sieve-datagen tests/test_knn_cuda tests/test_indexer_cuda
       tests/test_kernels_indexer_cpu tests/test_sparse_attn_cuda tests/test_kernels_sparse_attn_cpu
       tests/test_attention_cuda tests/test_kernels_attention_cpu tests/test_block_sparse_cuda
       tests/test_kernels_block_sparse_cpu tests/test_devcache tests/test_server)
copied=()
for p in "${progs[@]}"; do
  if [ -x "$build/$p" ]; then
    mkdir -p "$out/build/$(dirname "$p")"
    cp "$build/$p" "$out/build/$p"
    copied+=("$build/$p")
  fi
done
# every shared library except the C and C++ runtimes the image has
for b in "${copied[@]}"; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|libnsl|libutil|libanl|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
# the device tool carries at most 64 MiB: ship one xz archive (OpenBLAS alone is 36 MB)
tar -C "$out" -cJf "$root/.deps/gpu.tar.xz" build lib
du -sh "$out" "$root/.deps/gpu.tar.xz"
