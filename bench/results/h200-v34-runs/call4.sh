# Call 4: n = call 3's build with the split for speed only where every query can have two
# parts (nq <= SMs / 2; call 3 split queries of 67-131 query batches into parts of the
# mean keep: 5M B = 128 k = 8192 pinned +2.7%); b = main. GPU kernel suite and device page
# cache; exactness; ab b n n b, pinned and pageable.
D=$OUT/c4; . bench/results/h200-v34-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 330 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
timeout 60 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "test_devcache rc $?: $(tail -1 $D/test_devcache.log)"
echo "--- exact ($(date -u +%T))"
exact 1m X=1 normal Dot --n 1m --batch 1,16,66,67,128 --k 4096,8192,16384
exact 5m_pinned X=1 normal Euclid --n 5m --batch 8,64,128,1024 --k 8192,16384 --results pinned
echo "--- A/B ($(date -u +%T))"
ab fp --n 5m --batch 1,16,64,128,1024 --k 128,8192,16384 --results pinned
ab m --n 1m --batch 1,16,64,128 --k 128,8192,16384
ab fp2 --n 5m --batch 16,64,128 --k 1024,8192 --results pinned
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
