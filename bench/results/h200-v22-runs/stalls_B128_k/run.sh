#!/usr/bin/env bash
# call 4: where the float16 B=128 scan spends the extra time at k=8192 (vs k=128)
. "$(dirname "$0")/../common.sh"
echo "=== timing $(date -u +%T)"
$SB knn --n 5m --dtype float16 --batch 64,128 --k 128,1024,8192 --repeat 10 --no-materialized --results pinned 2>&1 | grep -E '^[0-9]' | awk '{print $3,$4,$5,$9,$NF}'
for kk in 8192 128; do
  OUT=$OUT STALL_BATCHES=128 STALL_K=$kk bench/gpu/run.sh stalls 2>&1 | tail -22
  rm -f "$OUT"/*.ncu-rep
done
echo "=== end $(date -u +%T)"
