# Call 4: n = main (79857d9) with the host copies in one loop over 64 KiB pieces
# (sieve_pool_memcpyv: the staged download's rows, scores and counts in one loop; a copy
# goes to the pool from 128 KiB instead of 512 KiB, so the queries' upload from 43 queries);
# b = main. ab b n n b, pageable (the path the change touches); GPU kernel suite;
# exactness at the staged shapes.
D=$OUT/c4; . bench/results/h200-v33-runs/common.sh
echo "--- exact ($(date -u +%T))"
exact 1m X=1 normal Dot --n 1m --batch 16,64,128,1024 --k 128,1024,8192
echo "--- A/B, pageable ($(date -u +%T))"
ab m --n 1m --batch 16,64,128,256,1024 --k 10,128,1024,8192
ab f --n 5m --batch 16,64,128,1024 --k 128,1024,8192
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
