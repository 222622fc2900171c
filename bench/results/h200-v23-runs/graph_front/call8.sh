# Call 8: the speculative search's front as a CUDA graph (.deps/gpu.tar.xz) against main with
# the speculative select (.deps/gpu-base.tar.xz): the new GPU test, the GPU kernel suite,
# memcheck over repeated calls (so the graphs are captured and replayed), then whole calls
# in the order main, branch, branch, main. Everything lands in $OUT/call8.tar.gz.
D=$OUT/c8; . bench/results/h200-v23-runs/spec_select/common.sh
echo "--- graph test ($(date -u +%T))"
timeout 120 .deps/gpu/build/tests/test_knn_cuda --filter 'knn_cuda/graph*' --verbose=0 > $D/graph_test.log 2>&1
echo "rc $?"; grep -E "FAIL|assert|Synthesis" $D/graph_test.log | head -8
gpu_suite
echo "--- memcheck ($(date -u +%T))"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 .deps/gpu/build/bench/sieve-bench knn --n 70000 --dim 96 \
  --batch 1,13,70 --k 1,100 --repeat 3 --warmup 0 --mat-repeat 1 --dtype float16 --metric Euclid \
  --rows-per-page 256 --json $D/memcheck.json > $D/memcheck.log 2>&1
echo "memcheck exit $?"; tail -1 $D/memcheck.log
echo "--- timing ($(date -u +%T))"
for s in base1:gpu-base graph1:gpu graph2:gpu base2:gpu-base; do
  run 1m_${s%%:*} ${s#*:} X=1 --n 1m --batch 1,16,64,128 --k 10,128,1024
  run 1mpin_${s%%:*} ${s#*:} X=1 --n 1m --batch 1,16,64,128 --k 10,128,1024 --results pinned
  run 5m_${s%%:*} ${s#*:} X=1 --n 5m --batch 1,16,64 --k 10,128
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call8.tar.gz -C $OUT c8 && rm -rf $D
