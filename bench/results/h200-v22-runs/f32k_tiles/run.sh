#!/usr/bin/env bash
# call 2: k-major cp.async float32 tile variants (SIEVE_CUDA_SCAN=k1..k5): exactness, then 5M timings
. "$(dirname "$0")/../common.sh"
col() { grep -E '^[0-9]' | awk '{printf "%s/%s/%s exact=%s fused=%s | ", $3,$4,$1,$10,$5}'; echo; }
echo "=== exactness $(date -u +%T)"
for v in k1 k2 k3 k4 k5; do
  echo "-- $v"; SIEVE_CUDA_SCAN=$v $SB knn --n 300000 --dtype float32 --batch 33,64,65,128 --k 1,128,1024 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | tee -a "$OUT/exact.log" | col
  SIEVE_CUDA_SCAN=$v $SB knn --n 200001 --dim 100 --metric Euclid --data ties --dtype float32 --batch 64,128 --k 1,100 --rows-per-page 128 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | tee -a "$OUT/exact.log" | col
  SIEVE_CUDA_SCAN=$v $SB knn --n 65537 --dim 96 --data sorted_desc --dtype float32 --batch 40,64 --k 1,1024,65537 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | tee -a "$OUT/exact.log" | col
  SIEVE_CUDA_SCAN=$v $SB knn --n 70001 --dim 768 --metric Cosine --data band --dtype float32 --batch 64,100 --k 1,70001 --rows-per-page 1000 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | tee -a "$OUT/exact.log" | col
done
echo "=== timing 5M k=128 $(date -u +%T)"
for r in 1 2; do
  for v in base k1 k2 k3 k4 k5; do
    env $( [ $v = base ] || echo SIEVE_CUDA_SCAN=$v ) $SB knn --n 5m --dtype float32 --batch 64 --k 128 --repeat 10 --no-materialized --json "$OUT/t_$v.json" 2>&1 | grep -E '^[0-9]' | awk -v v=$v '{print v, $3, $4, $5, $NF}'
  done
  for v in base k1 k2 k3; do
    env $( [ $v = base ] || echo SIEVE_CUDA_SCAN=$v ) $SB knn --n 5m --dtype float32 --batch 128 --k 128 --repeat 10 --no-materialized --json "$OUT/t128_$v.json" 2>&1 | grep -E '^[0-9]' | awk -v v=$v '{print v, $3, $4, $5, $NF}'
  done
done
echo "=== end $(date -u +%T)"
