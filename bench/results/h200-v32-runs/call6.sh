# Call 6: the build of main after e610b8e (the three kernel commits of calls 1-5; the
# proposal's rank as call 5's r build): GPU kernel suite and device page cache, exactness
# against the materialized path, then bench/gpu/validate.sh perf (the sweep beside torch and
# the end-to-end server run; $OUT/validate.tar.xz).
D=$OUT/c6; . bench/results/h200-v32-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 300 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
timeout 120 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "test_devcache rc $?: $(tail -1 $D/test_devcache.log)"
echo "--- exact ($(date -u +%T))"
for dd in normal ties band dups; do
  m=Dot; [ $dd = band ] && m=Cosine; [ $dd = dups ] && m=Euclid
  exact 1m_$dd X=1 $dd $m --n 1m --batch 1,16,64,128 --k 10,32,256,2048,16384
done
exact 5m_normal X=1 normal Dot --n 5m --batch 1,16,128 --k 32,2048,16384
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $D
echo "--- sweep ($(date -u +%T))"
timeout 330 bash bench/gpu/validate.sh perf 2>&1 | grep -E "^- |within|met|missed" | tail -40
