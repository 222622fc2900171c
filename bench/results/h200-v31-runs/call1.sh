# Call 1: the streamed downloads on a pool of their own (every other host copy on the pool
# of 8 that wakes its sleepers with one broadcast, as before the streamed download) against
# main (6f8d57a) and the build before the streamed download (bc6cc4e), o b n n b o, at the
# staged and mid-size pageable shapes the sweep after v28 found slower, and two streamed
# ones; the GPU kernel and device page cache suites on the build under test.
D=$OUT/c1; . bench/results/h200-v31-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 240 .deps/gpu/build/tests/test_knn_cuda -j1 --verbose=0 > $D/test_knn_cuda.log 2>&1
tail -1 $D/test_knn_cuda.log
timeout 120 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
tail -1 $D/test_devcache.log
echo "--- A/B/C ($(date -u +%T))"
ab3 m --n 1m --batch 16,64,128 --k 1024,4096,8192
ab3 f --n 5m --batch 16,64 --k 4096,8192
ab3 h --n 8841823 --batch 64 --k 8192
ab3 s --n 1m --batch 128,1024 --k 16384
echo "--- done ($(date -u +%T))"
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
