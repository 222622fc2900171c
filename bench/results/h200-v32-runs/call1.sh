# Call 1: the direct admissions' tightening deferred to the end of the tile and run by the
# whole warp (n: the build under test), the same plus a retry at 2k, 4k, ... below the step
# (r: -DSIEVE_TIGHTEN_RETRY), main (b). Exactness of n and r against the materialized path
# at the direct and staged shapes; A/B/C r b n n b r, results pinned; on n, the staged
# 64-query tile against the direct one at B = 8 and 16.
D=$OUT/c1; . bench/results/h200-v32-runs/common.sh
echo "--- exact ($(date -u +%T))"
for v in n r; do
  [ $v = r ] && SB=$SBR || SB=$SBN
  for dd in normal ties band dups; do
    m=Dot; [ $dd = band ] && m=Cosine; [ $dd = dups ] && m=Euclid
    exact ${v}_1m_$dd X=1 $dd $m --n 1m --batch 1,7,16,64 --k 1,10,128,1024,8192
  done
  exact ${v}_5m_normal X=1 normal Dot --n 5m --batch 1,16,64 --k 10,128,1024
  exact ${v}_65537_ties X=1 ties Dot --n 65537 --batch 1,7 --k 1,10,128,1024,65537
done
SB=$SBN
echo "--- A/B/C, pinned ($(date -u +%T))"
ab3r m --results pinned --n 1m --batch 1,4,8,16 --k 10,128,1024,8192
ab3r f --results pinned --n 5m --batch 1,8,16 --k 10,128,1024,8192
ab3r s --results pinned --n 1m --batch 64,128,1024 --k 10,32,128
ab3r g --results pinned --n 5m --batch 64,1024 --k 10,128
echo "--- staged 64-query tile vs direct, build n ($(date -u +%T))"
abv d SIEVE_CUDA_SCAN=tma64x256s X=1 --results pinned --n 1m --batch 4,8,16 --k 128,1024,8192
abv e SIEVE_CUDA_SCAN=tma64x256s X=1 --results pinned --n 5m --batch 4,8,16 --k 128,1024,8192
echo "--- kernel durations, build n ($(date -u +%T))"
for k in 128 1024 8192; do kdur n1m_b1_k$k X=1 --results pinned --n 1m --batch 1 --k $k; done
for k in 128 1024; do
  kdur n1m_b16_k$k X=1 --results pinned --n 1m --batch 16 --k $k
  SB=$SBB kdur b1m_b16_k$k X=1 --results pinned --n 1m --batch 16 --k $k
done
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
