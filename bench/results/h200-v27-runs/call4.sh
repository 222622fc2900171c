# Call 4: the context's kept host copy threads as loops that the calling thread starts at
# once and the threads join as they wake (common/sieve_pool.h, sieve_pool_for; default)
# against the copies before them (SIEVE_CUDA_HOSTCOPY=0), pageable arrays, whole calls
# alternating o p p o o p (5M) and o p p o (1M); the GPU kernel suite; then the sweep and
# end to end of bench/gpu/validate.sh perf on this build.
D=$OUT/c4; . bench/results/h200-v27-runs/common.sh
O=SIEVE_CUDA_HOSTCOPY=0
echo "--- timing 5M ($(date -u +%T))"
for s in o1:$O p1:X=1 p2:X=1 o2:$O o3:$O p3:X=1; do
  IFS=: read l v <<< "$s"
  run 5m_$l $v --n 5m --batch 16,64,128,1024 --k 128,8192
done
echo "--- timing 1M ($(date -u +%T))"
for s in o1:$O p1:X=1 p2:X=1 o2:$O; do
  IFS=: read l v <<< "$s"
  run 1m_$l $v --n 1m --batch 16,128,1024 --k 128,8192
done
echo "--- GPU suite ($(date -u +%T))"
timeout 230 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -8
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
echo "--- validate.sh perf ($(date -u +%T))"
timeout 280 bench/gpu/validate.sh perf 2>&1 | grep -E "^- |missed|met|within" | head -30
echo "--- done ($(date -u +%T))"
