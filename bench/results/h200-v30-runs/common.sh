# Sourced by the call scripts in this folder (run on the GPU machine from the repository
# root, the build under test in .deps/gpu.tar.xz). Needs $D, the call's output folder.
# The helpers run, exact, kdur, ab and abv are those of ../h200-v29-runs/common.sh; abs
# runs one build with an explicit sample size and the default alternating.
. bench/results/h200-v29-runs/common.sh
# abs LABEL ROWS ARGS...: --sample-rows ROWS (o) and the default sample (n) alternating:
# o n n o
abs() {
  local l=$1 s=$2; shift 2
  run ${l}_o1 X=1 --sample-rows $s "$@"; run ${l}_n1 X=1 "$@"
  run ${l}_n2 X=1 "$@"; run ${l}_o2 X=1 --sample-rows $s "$@"
}
