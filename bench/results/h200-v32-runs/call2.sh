# Call 2: the candidate (n): call 1's deferred tightening of the direct admissions, the
# tightening retried at 2k, 4k, ... below the step, and the proposal's sample rank by the
# Poisson bound (sieve__boundary_rank) on both backends; main (b). Exactness against the
# materialized path; A/B b n n b, results pinned; on n, the staged 64-query tile against
# the direct one (the default up to 8 queries, 16 at k <= 1024) at B = 1-16.
D=$OUT/c2; . bench/results/h200-v32-runs/common.sh
echo "--- exact ($(date -u +%T))"
for dd in normal ties band dups sorted_desc outlier; do
  m=Dot; [ $dd = band ] && m=Cosine; [ $dd = dups ] && m=Euclid
  exact 1m_$dd X=1 $dd $m --n 1m --batch 1,7,16,64,128 --k 1,10,32,128,1024,8192
done
exact 5m_normal X=1 normal Dot --n 5m --batch 1,16,128 --k 10,32,128,1024
exact 65537_ties X=1 ties Dot --n 65537 --batch 1,7,64 --k 1,10,128,1024,65537
exact 1m_bf16 X=1 normal Dot --dtype bfloat16 --n 1m --batch 16,128 --k 10,1024
echo "--- A/B, pinned ($(date -u +%T))"
ab m --results pinned --n 1m --batch 1,4,8,16 --k 10,128,1024,8192
ab s --results pinned --n 1m --batch 64,128,1024 --k 10,32,128,1024
ab f --results pinned --n 5m --batch 1,16,64,128,1024 --k 10,128,1024
ab h --results pinned --n 8841823 --batch 64 --k 10,128
ab w --results pinned --dtype bfloat16 --n 5m --batch 128,1024 --k 128,1024
echo "--- staged 64-query tile vs direct, build n ($(date -u +%T))"
abv d SIEVE_CUDA_SCAN=tma64x256s X=1 --results pinned --n 1m --batch 1,2,4,8,16 --k 128,256,512,1024,2048,8192
abv e SIEVE_CUDA_SCAN=tma64x256s X=1 --results pinned --n 5m --batch 1,2,4,8,16 --k 128,256,512,1024,2048,8192
abv g SIEVE_CUDA_SCAN=tma64x256s X=1 --results pinned --n 8841823 --batch 1,16 --k 128,1024,8192
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $D
