# Call 7: n = main with the sample selection's two staging loops merged into one (the
# group maxima under the block's flag; a review mend the duplicates check found), b = main
# at 3ff6ad5. GPU kernel suite (with the sample selection test), device page cache,
# exactness, kernel durations of the propose step b / n.
D=$OUT/c7; . bench/results/h200-v35-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
timeout 60 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "test_devcache rc $?: $(tail -1 $D/test_devcache.log)"
echo "--- exact ($(date -u +%T))"
exact 1m X=1 normal Dot --n 1m --batch 1,16,34,128,300 --k 10,1024
exact 5m X=1 ties Euclid --n 5m --batch 1,64 --k 128,8192 --results pinned
echo "--- kernel durations ($(date -u +%T))"
for B in 1 16 64; do
  SB=$SBB kdur b_b${B} X=1 --n 1m --batch $B --k 128
  kdur n_b${B} X=1 --n 1m --batch $B --k 128
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
