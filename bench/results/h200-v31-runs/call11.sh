# Call 11: the build of call 10 (tighten_warp). compute-sanitizer memcheck on run.sh
# sanitize's shapes; racecheck on the same shapes without the materialized path (its
# kernels are unchanged; the fused path's staged tiles are B = 40 and 70); the server suite
# on the GPU; 5M B = 1024 k = 10 / 128 pageable against main, b n n b.
D=$OUT/c11; . bench/results/h200-v31-runs/common.sh
B=.deps/gpu/build
san() {
  local l=$1 tool=$2; shift 2
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 $B/bench/sieve-bench knn "$@" \
    > $D/sanitize_$l.log 2>&1
  echo "$l ($tool) rc $?: $(grep -c ' yes ' $D/sanitize_$l.log) yes; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $D/sanitize_$l.log)"
}
echo "--- sanitize ($(date -u +%T))"
san memcheck memcheck --n 70000 --dim 96 --batch 1,13,40,70 --k 1,100 --repeat 1 --warmup 0 \
  --mat-repeat 1 --dtype float16,float32 --metric Euclid --rows-per-page 256
san racecheck racecheck --n 70000 --dim 96 --batch 1,13,40,70 --k 1,100 --repeat 1 --warmup 0 \
  --no-materialized --dtype float16,float32 --metric Euclid --rows-per-page 256
echo "--- server ($(date -u +%T))"
SIEVE_BUILD_DIR=$B SIEVE_TEST_DEVICE=cuda:0 timeout 100 $B/tests/test_server --jobs 4 --verbose=0 \
  > $D/test_server_gpu.log 2>&1; tail -1 $D/test_server_gpu.log
echo "--- A/B ($(date -u +%T))"
ab g --n 5m --batch 1024 --k 10,128
echo "--- done ($(date -u +%T))"
tar czf $OUT/call11.tar.gz -C $OUT c11 && rm -rf $D
