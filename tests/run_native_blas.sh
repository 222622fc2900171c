#!/usr/bin/env bash
# Runs one test program on the OpenBLAS kernels sieve-server and sieve-bench select: where
# OpenBLAS falls back to its generic x86-64 kernels, sieve_cpu_blas_fixup (kernels/cpu/
# threads.c) restarts those programs with OPENBLAS_CORETYPE=SkylakeX (AVX-512 F/BW/VL) or
# Haswell (AVX2 + FMA). Test programs do not restart themselves, so without this their sgemm
# is not the one the server runs (a key that depended on a tile's size showed only with the
# SkylakeX kernels). An OPENBLAS_CORETYPE already set is kept.
# usage: tests/run_native_blas.sh PROGRAM [ARGS...]
set -u
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ "$(uname -m)" = x86_64 ] && [ -r /proc/cpuinfo ]; then
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { [[ "$flags" == *" $1 "* ]]; }
  if has avx512f && has avx512bw && has avx512vl; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif has avx2 && has fma; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
exec "$@"
