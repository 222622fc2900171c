# Sourced by the call scripts in this folder (run on the GPU machine from the repository
# root, the build under test in .deps/gpu.tar.xz, main's in .deps/gpu-base.tar.xz and, for
# three-way runs, a second candidate in .deps/gpu-r.tar.xz). Needs $D, the call's output
# folder. The helpers run, exact, kdur, ab, abv and abs are those of
# ../h200-v30-runs/common.sh; ab3r alternates three builds.
. bench/results/h200-v30-runs/common.sh
if [ -f .deps/gpu-r.tar.xz ]; then bench/gpu/unpack.sh gpu-r || exit 1; fi
SBR=.deps/gpu-r/build/bench/sieve-bench
# ab3r LABEL ARGS...: the three builds alternating r b n n b r (r: gpu-r, b: gpu-base,
# n: the build under test)
ab3r() {
  local l=$1; shift
  for s in r1:$SBR b1:$SBB n1:$SBN n2:$SBN b2:$SBB r2:$SBR; do
    IFS=: read t bin <<< "$s"; SB=$bin run ${l}_$t X=1 "$@"
  done
  SB=$SBN
}
