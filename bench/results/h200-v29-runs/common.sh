# Sourced by the call scripts in this folder (run on the GPU machine from the repository
# root, the build under test in .deps/gpu.tar.xz). Needs $D, the call's output folder.
# The helpers run, exact and kdur are those of ../h200-v28-runs/common.sh; abv runs one
# build with two settings alternating.
. bench/results/h200-v28-runs/common.sh
# abv LABEL ENV_A ENV_B ARGS...: the same build with ENV_A and ENV_B alternating: a b b a
abv() {
  local l=$1 ea=$2 eb=$3; shift 3
  run ${l}_a1 "$ea" "$@"; run ${l}_b1 "$eb" "$@"; run ${l}_b2 "$eb" "$@"; run ${l}_a2 "$ea" "$@"
}
