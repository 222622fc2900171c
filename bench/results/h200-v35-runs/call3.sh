# Call 3: n = main at 18166dd (the steps before the gate scan shortened), b = main before
# it. Kernel durations at 5M B = 1024 (the propose step's keys loaded eight a thread
# there too) and of the propose step by blocks a query (SIEVE_CUDA_PROPOSE_PARTS) at 1 and
# 16 queries; ab b n n b at 256 and 1,024 queries; then bench/gpu/validate.sh perf (the
# sweep beside torch and the end-to-end server run; $OUT/validate.tar.xz).
D=$OUT/c3; . bench/results/h200-v35-runs/common.sh
echo "--- kernel durations ($(date -u +%T))"
SB=$SBB kdur b_f1024 X=1 --n 5m --batch 1024 --k 128 --results pinned
kdur n_f1024 X=1 --n 5m --batch 1024 --k 128 --results pinned
for B in 1 16; do
  for P in 1 2 4 8; do kdur p${P}_b${B} SIEVE_CUDA_PROPOSE_PARTS=$P --n 1m --batch $B --k 128; done
done
echo "--- A/B ($(date -u +%T))"
ab m --n 1m --batch 256,1024 --k 10,128
ab f --n 5m --batch 256,1024 --k 10,128 --results pinned
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
echo "--- perf ($(date -u +%T))"
timeout 330 bash bench/gpu/validate.sh perf 2>&1 | tail -25
echo "--- done ($(date -u +%T))"
