# Call 3: the context's kept host copy threads (common/sieve_pool.h; default) against the
# copies before them (SIEVE_CUDA_HOSTCOPY=0: the query and staged-result copies on the
# calling thread, the chunked download's threads started per call), pageable arrays,
# whole calls alternating o p p o o p; then the GPU kernel suite (its pinned/pageable test
# compares both forms bit for bit).
D=$OUT/c3; . bench/results/h200-v27-runs/common.sh
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
echo "--- done ($(date -u +%T))"
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
