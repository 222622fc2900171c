# Call 8: n = main (1f05d25) with the pageable queries' upload in 1 MiB pieces, each
# queued for the bus once staged (before: the whole batch staged, then one copy);
# b = main. ab b n n b twice, pageable (uploads of 1 MiB and more: B >= 342 at d = 768),
# exactness (Cosine: the prepared rows normalised from the uploaded floats); GPU kernel suite.
D=$OUT/c8; . bench/results/h200-v33-runs/common.sh
echo "--- exact ($(date -u +%T))"
exact up X=1 normal Cosine --n 1m --batch 341,342,500,1024 --k 10,128
for r in 1 2; do
  echo "--- round $r ($(date -u +%T))"
  ab m$r --n 1m --batch 128,512,1024 --k 10,128
  ab f$r --n 5m --batch 512,1024 --k 10,128
done
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call8.tar.gz -C $OUT c8 && rm -rf $D
