# Call 3: the candidate (chained launches up to 8 queries; pageable queries and staged
# results copied by several host threads above 1 MB): the GPU kernel suite, the device
# page cache suite, the sanitizers; whole calls in the order main, branch, branch, main
# (40 timed calls a shape; B = 1024 20). Everything lands in $OUT/call3.tar.gz.
D=$OUT/c3; . bench/results/h200-v24-runs/pdl/common.sh
echo "--- timing ($(date -u +%T))"
for s in base1:gpu-base new1:gpu new2:gpu base2:gpu-base; do
  IFS=: read l b <<< "$s"
  run40 1m_$l $b X=1 --n 1m --batch 1,4,8,16,64,128 --k 10,128,1024
  run40 1mB1024_$l $b X=1 --n 1m --batch 1024 --k 10,128,1024
  run40 5m_$l $b X=1 --n 5m --batch 1,8,64,128 --k 10,128
  run40 5mB1024_$l $b X=1 --n 5m --batch 1024 --k 10,128
done
echo "--- GPU suites ($(date -u +%T))"
timeout 250 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -6
timeout 120 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "devcache rc $?"; tail -2 $D/test_devcache.log
echo "--- sanitizers, every launch chained ($(date -u +%T))"
SIEVE_CUDA_PDL=1 OUT=$D timeout 230 bench/gpu/run.sh sanitize 2>&1 | tail -6
echo "--- done ($(date -u +%T))"
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
