#!/usr/bin/env bash
# EXPERIMENT (not for commit): float32 loop shapes, exactness then timing.
set -u
bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
SB=.deps/gpu/build/bench/sieve-bench
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
run() { "$SB" knn "$@" 2>&1 | grep -E '^[0-9]' | cut -c1-150; }
# config:batches
CF="q9:16,13 q5:16 v1a:1 v1b:1 v2a:2 v4a:4,3 v8a:8,5 b32a:32,20 b32b:32 w3:64,40 w4:128,100"
echo "=== exactness (fused new loop vs materialized old loop) $(date +%T)"
for cb in $CF; do c=${cb%%:*}; b=${cb#*:}
  echo "-- $c"; SIEVE_CUDA_F32=$c run --dtype float32 --n 300k --batch $b --k 1,128,1024 --repeat 1 --warmup 0 --mat-repeat 1
  SIEVE_CUDA_F32=$c run --dtype float32 --n 300k --dim 100 --batch $b --k 10 --metric Euclid --data ties --repeat 1 --warmup 0 --mat-repeat 1
  SIEVE_CUDA_F32=$c run --dtype float32 --n 200001 --batch $b --k 100 --metric Cosine --data band --rows-per-page 128 --repeat 1 --warmup 0 --mat-repeat 1
done
echo "=== timing 5M float32 k=128 $(date +%T)"
for r in 1 2 3; do
  echo "-- round $r base"; run --dtype float32 --n 5m --batch 1,2,4,8,16,32,64,128 --k 128 --repeat 10 --no-materialized
  for cb in $CF; do c=${cb%%:*}; b=${cb#*:}; b=${b%%,*}
    echo "-- $c"; SIEVE_CUDA_F32=$c run --dtype float32 --n 5m --batch $b --k 128 --repeat 10 --no-materialized; done
done
echo "=== end $(date +%T)"
