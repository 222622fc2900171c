# Call 1: n = main with (a) the query preparation's fmaf chain only where a metric reads it
# (Euclid: |q|^2, Cosine: the norm; none for Dot), (b) the sample selection's keys loaded
# eight a thread at once, (c) the sample scan on a deep cp.async pipeline (one CTA per SM,
# 8 / 6 stages) when its tiles fit on the GPU at once, and (d) behind SIEVE_CUDA_PROPOSE_ONE=1
# the propose step on one block a query (the group-maxima fast path) where that path
# applies; b = main. GPU kernel suite; exactness with and without (d); kernel durations;
# ab b n n b; abv of (d) and of (c) on n.
D=$OUT/c1; . bench/results/h200-v35-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- exact ($(date -u +%T))"
exact 1m X=1 normal Dot --n 1m --batch 1,7,64,100,128,300 --k 1,10,128,1024
exact 1m_ties X=1 ties Cosine --n 1m --batch 1,64,128 --k 10,1024
exact 1m_band_bf X=1 band Euclid --n 1m --dtype bfloat16 --batch 7,128 --k 10,128
exact 1m_one SIEVE_CUDA_PROPOSE_ONE=1 normal Dot --n 1m --batch 1,7,64,100,128,300 --k 1,10,128,1024,8192
exact 1m_ties_one SIEVE_CUDA_PROPOSE_ONE=1 ties Cosine --n 1m --batch 1,64,128 --k 10,1024
exact 1m_band_one SIEVE_CUDA_PROPOSE_ONE=1 band Euclid --n 1m --dtype bfloat16 --batch 7,128 --k 10,128
echo "--- kernel durations ($(date -u +%T))"
for B in 1 64 128; do
  SB=$SBB kdur b_b${B} X=1 --n 1m --batch $B --k 128
  kdur n_b${B} X=1 --n 1m --batch $B --k 128
  kdur o_b${B} SIEVE_CUDA_PROPOSE_ONE=1 --n 1m --batch $B --k 128
done
echo "--- A/B ($(date -u +%T))"
ab m --n 1m --batch 1,16,64,128 --k 10,128,1024
ab f --n 5m --batch 1,16,64,128 --k 128,1024 --results pinned
echo "--- abv on n ($(date -u +%T))"
abv one X=1 SIEVE_CUDA_PROPOSE_ONE=1 --n 1m --batch 1,16,64,128 --k 10,128,1024
abv deep X=1 SIEVE_CUDA_SAMPLE_DEEP=0 --n 1m --batch 1,16,64,128 --k 10,128
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
