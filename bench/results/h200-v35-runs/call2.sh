# Call 2: n = call 1's build with the propose step on one block a query by default where
# clusters of 8 would put more than two blocks on an SM (34 queries and more) and the
# group-maxima fast path applies (SIEVE_CUDA_PROPOSE_PARTS overrides); b = main. GPU kernel
# suite, device page cache; exactness; kernel
# durations b / n; ab b n n b at 1M, 5M and 8,841,823 rows; memcheck and racecheck last.
D=$OUT/c2; . bench/results/h200-v35-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
timeout 60 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "test_devcache rc $?: $(tail -1 $D/test_devcache.log)"
echo "--- exact ($(date -u +%T))"
exact 1m X=1 normal Dot --n 1m --batch 1,16,33,34,64,100,128,263,300 --k 1,10,128,1024,4096
exact 1m_ties X=1 ties Cosine --n 1m --dtype bfloat16 --batch 34,128 --k 10,128,1024
exact 1m_f32 X=1 normal Dot --n 1m --dtype float32 --batch 64,128 --k 10,1024
exact 5m_euc X=1 normal Euclid --n 5m --batch 16,64,128 --k 10,1024 --results pinned
exact 1m_band X=1 band Euclid --n 1m --batch 40,128 --k 1,128,8192
echo "--- kernel durations ($(date -u +%T))"
for B in 16 34 64 128; do
  SB=$SBB kdur b_b${B} X=1 --n 1m --batch $B --k 10
  kdur n_b${B} X=1 --n 1m --batch $B --k 10
done
SB=$SBB kdur b_5m_b128 X=1 --n 5m --batch 128 --k 1024 --results pinned
kdur n_5m_b128 X=1 --n 5m --batch 128 --k 1024 --results pinned
echo "--- A/B ($(date -u +%T))"
ab m --n 1m --batch 1,16,32,64,128 --k 10,128,1024
ab m2 --n 1m --batch 1,16,32,64,128 --k 10,128,1024
ab f --n 5m --batch 1,16,64,128 --k 10,128,1024
ab fp --n 5m --batch 16,64,128 --k 128,1024 --results pinned
ab x --n 8841823 --batch 1,64 --k 10,128
echo "--- sanitizers ($(date -u +%T))"
SA="knn --n 70000 --dim 96 --batch 1,40 --k 10,300 --repeat 1 --warmup 0 --dtype float16 --metric Euclid --rows-per-page 256 --no-materialized"
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 3 $SB $SA > $D/sanitize_memcheck.log 2>&1
echo "memcheck rc $?: $(tail -1 $D/sanitize_memcheck.log)"
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $SB $SA > $D/sanitize_racecheck.log 2>&1
echo "racecheck rc $?: $(tail -1 $D/sanitize_racecheck.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $D
