# Call 4: the final build (chained launches up to 8 queries; the host copies as on main):
# whole calls in the order main, branch, branch, main (40 timed calls a shape), the GPU
# kernel suite, the device page cache suite, the server suite on the GPU, racecheck of the
# float16 shapes with every launch chained. Everything lands in $OUT/call4.tar.gz.
D=$OUT/c4; . bench/results/h200-v24-runs/pdl/common.sh
echo "--- timing ($(date -u +%T))"
for s in base1:gpu-base new1:gpu new2:gpu base2:gpu-base; do
  IFS=: read l b <<< "$s"
  run40 1m_$l $b X=1 --n 1m --batch 1,2,8,16,64 --k 10,128,1024
  run40 5m_$l $b X=1 --n 5m --batch 1,8 --k 10,128,8192
done
echo "--- GPU suites ($(date -u +%T))"
timeout 250 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -6
timeout 120 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "devcache rc $?"; tail -1 $D/test_devcache.log
SIEVE_BUILD_DIR=$PWD/.deps/gpu/build SIEVE_TEST_DEVICE=cuda:0 timeout 150 .deps/gpu/build/tests/test_server \
  --jobs 4 --verbose=0 > $D/test_server_gpu.log 2>&1
echo "server rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_server_gpu.log | tail -4
echo "--- racecheck, float16, every launch chained ($(date -u +%T))"
SIEVE_CUDA_PDL=1 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 .deps/gpu/build/bench/sieve-bench \
  knn --n 70000 --dim 96 --batch 1,13,40,70 --k 1,100 --repeat 1 --warmup 0 --mat-repeat 1 --dtype float16 \
  --metric Euclid --rows-per-page 256 > $D/racecheck_f16.log 2>&1
echo "racecheck rc $?"; tail -1 $D/racecheck_f16.log
echo "--- done ($(date -u +%T))"
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
