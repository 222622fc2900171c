# Sourced by the scripts in this folder, which run on the GPU machine from the repository
# root with the bundle of the build under test carried in .deps/gpu.tar.xz (and, for the
# A/B runs, main's bundle in .deps/gpu-base.tar.xz): sets $OUT, unpacks the bundles, puts
# the build's libraries on the path and names $SB (its sieve-bench) and $NCU (Nsight Compute).
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
bench/gpu/unpack.sh gpu || exit 1
if [ -f .deps/gpu-base.tar.xz ]; then bench/gpu/unpack.sh gpu-base || exit 1; fi
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
SB=.deps/gpu/build/bench/sieve-bench
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
