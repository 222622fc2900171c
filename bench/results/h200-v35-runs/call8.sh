# Call 8: n = main with the select writing up to 256 kept candidates by rank (each thread
# counts the staged candidates below its own) instead of the block radix sort
# (SIEVE_CUDA_SELECT_RANK=0 turns it off); b = main at 4bf849b. GPU kernel suite;
# exactness; select kernel durations b / n; ab b n n b at 1M and 5M.
D=$OUT/c8; . bench/results/h200-v35-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- exact ($(date -u +%T))"
exact 1m X=1 normal Dot --n 1m --batch 1,16,64,128,300 --k 1,2,10,100,128,200,256
exact 1m_ties X=1 ties Euclid --n 1m --batch 1,16,128 --k 1,10,128
exact 5m_band X=1 band Cosine --n 5m --dtype bfloat16 --batch 7,64 --k 10,128 --results pinned
echo "--- kernel durations ($(date -u +%T))"
for B in 1 16 128; do
  SB=$SBB kdur b_b${B} X=1 --n 1m --batch $B --k 10
  kdur n_b${B} X=1 --n 1m --batch $B --k 10
done
echo "--- A/B ($(date -u +%T))"
ab m --n 1m --batch 1,16,64,128 --k 10,128
ab f --n 5m --batch 1,16,128 --k 10,128 --results pinned
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
echo "--- done ($(date -u +%T))"
tar czf $OUT/call8.tar.gz -C $OUT c8 && rm -rf $D
