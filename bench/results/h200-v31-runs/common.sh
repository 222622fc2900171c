# Sourced by the call scripts in this folder (run on the GPU machine from the repository
# root, the build under test in .deps/gpu.tar.xz, main's in .deps/gpu-base.tar.xz and, for
# three-way runs, the build before the streamed download in .deps/gpu-b0.tar.xz). Needs
# $D, the call's output folder. The helpers run, exact, kdur, ab, abv and abs are those of
# ../h200-v30-runs/common.sh; ab3 alternates three builds.
. bench/results/h200-v30-runs/common.sh
if [ -f .deps/gpu-b0.tar.xz ]; then bench/gpu/unpack.sh gpu-b0 || exit 1; fi
SB0=.deps/gpu-b0/build/bench/sieve-bench
# ab3 LABEL ARGS...: the three builds alternating o b n n b o (o: gpu-b0, b: gpu-base,
# n: the build under test)
ab3() {
  local l=$1; shift
  for s in o1:$SB0 b1:$SBB n1:$SBN n2:$SBN b2:$SBB o2:$SB0; do
    IFS=: read t bin <<< "$s"; SB=$bin run ${l}_$t X=1 "$@"
  done
  SB=$SBN
}
