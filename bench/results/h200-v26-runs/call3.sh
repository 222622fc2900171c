# Call 3: the 64-query staged tile with helpers (tma64x256h) against tma64x256s, whole calls
# alternating at 5M float16; then the sweep beside torch and the end-to-end run
# (bench/gpu/validate.sh perf) of the build whose default above 64 queries is tma128x256h.
D=$OUT/c3; . bench/results/h200-v26-runs/common.sh
echo "--- exact 64h ($(date -u +%T))"
exact h64 SIEVE_CUDA_SCAN=tma64x256h dups Euclid --n 300001 --dim 200 --batch 17,64 --k 1,100,8192 --rows-per-page 256
echo "--- timing ($(date -u +%T))"
for s in s1:tma64x256s h1:tma64x256h h2:tma64x256h s2:tma64x256s; do
  IFS=: read l v <<< "$s"
  run 5m64_$l SIEVE_CUDA_SCAN=$v --n 5m --batch 32,64 --k 128,1024,8192
done
tar czf $OUT/call3.tar.gz -C $OUT c3
echo "--- validate perf ($(date -u +%T))"
timeout 420 bench/gpu/validate.sh perf 2>&1 | tail -70
