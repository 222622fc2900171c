#!/usr/bin/env bash
# call 5: staged admissions by per-lane shared atomics (no votes): suites, exactness, A/B, sanitizers
. "$(dirname "$0")/../common.sh"
col() { grep -E '^[0-9]' | awk '{printf "%s/%s/%s exact=%s | ", $3,$4,$1,$10}'; echo; }
echo "=== test $(date -u +%T)"
OUT=$OUT bench/gpu/run.sh test 2>&1 | grep -E "Synthesis|FAIL|assert" | head
echo "=== exactness f16/bf16 staged tiles $(date -u +%T)"
for v in default tma64x128s tma128x256s; do
  env $( [ $v = default ] || echo SIEVE_CUDA_SCAN=$v ) $SB knn --n 300000 --dtype float16,bfloat16 --batch 17,64,65,128 --k 1,1024,8192 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | tee -a "$OUT/exact.log" | col
  for d in ties sorted_asc band dups; do
    env $( [ $v = default ] || echo SIEVE_CUDA_SCAN=$v ) $SB knn --n 65537 --dim 128 --data $d --metric Euclid --dtype float16 --batch 40,128 --k 1,1000,65537 --rows-per-page 256 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | tee -a "$OUT/exact.log" | col
  done
done
grep -c MISMATCH "$OUT/exact.log"
echo "=== A/B 5M float16 pinned $(date -u +%T)"
for r in 1 2; do for side in gpu-base gpu; do
  echo "--- $side round $r"
  LD_LIBRARY_PATH=.deps/$side/lib .deps/$side/build/bench/sieve-bench knn --n 5m --dtype float16 --batch 64,128,1024 --k 128,1024,8192 --repeat 10 --results pinned --no-materialized --json "$OUT/ab_${side}_$r.json" 2>&1 | grep -E '^[0-9]' | awk '{print $3,$4,$5,$NF}' | tr '\n' ';'; echo
done; done
echo "=== sanitize $(date -u +%T)"
OUT=$OUT timeout 280 bench/gpu/run.sh sanitize 2>&1 | tail -6
echo "=== end $(date -u +%T)"
