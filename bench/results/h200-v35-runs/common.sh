# Sourced by the call scripts in this folder (run on the GPU machine from the repository
# root, the build under test in .deps/gpu.tar.xz, main's in .deps/gpu-base.tar.xz). Needs
# $D, the call's output folder. The helpers run, exact, kdur, ab (b n n b), abv (a b b a)
# and abs are those of ../h200-v30-runs/common.sh.
. bench/results/h200-v30-runs/common.sh
