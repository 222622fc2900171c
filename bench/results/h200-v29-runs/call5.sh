# Call 5: the sample size at large k (main's build, .deps/gpu-base): the default 8 k rows
# against 4 k and 6 k (--sample-rows), whole calls alternating d x x d, pinned results.
D=$OUT/c5; . bench/results/h200-v29-runs/common.sh
SB=.deps/gpu-base/build/bench/sieve-bench
sz() { # LABEL K ARGS...: default, 4k, 6k, 4k, 6k, default
  local l=$1 k=$2; shift 2
  run ${l}_d1 X=1 --k $k "$@"
  run ${l}_h1 X=1 --k $k --sample-rows $((4 * k)) "$@"
  run ${l}_t1 X=1 --k $k --sample-rows $((6 * k)) "$@"
  run ${l}_h2 X=1 --k $k --sample-rows $((4 * k)) "$@"
  run ${l}_t2 X=1 --k $k --sample-rows $((6 * k)) "$@"
  run ${l}_d2 X=1 --k $k "$@"
}
echo "--- ($(date -u +%T))"
sz k8192 8192 --n 5m --batch 16,64,128,1024 --results pinned
sz k16384 16384 --n 5m --batch 16,64,128,1024 --results pinned
sz m8192 8192 --n 1m --batch 64,128,1024 --results pinned
sz k4096 4096 --n 5m --batch 64,1024 --results pinned
echo "--- done ($(date -u +%T))"
tar czf $OUT/call5.tar.gz -C $OUT c5 && rm -rf $D
