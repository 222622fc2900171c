#!/usr/bin/env bash
# device call 11 (experiment build): the second consumer warpgroup starts SIEVE_LAG chunks after the first
. "$(dirname "$0")/../common.sh"
col() { grep -E '^[0-9]' | awk '{printf "%s/%s/%s %s | ", $3,$4,$1,$10}'; echo; }
echo "=== exactness $(date -u +%T)"
for l in 2 3; do
  SIEVE_LAG=$l $SB knn --n 300000 --dtype float16 --batch 17,65,128,1024 --k 1,128,8192 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | tee -a "$OUT/exact.log" | col
  SIEVE_LAG=$l $SB knn --n 65537 --dim 128 --data ties --metric Euclid --dtype float16 --batch 40,128 --k 1,1000,65537 --rows-per-page 256 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | tee -a "$OUT/exact.log" | col
done
echo "MISMATCH lines: $(grep -c MISMATCH "$OUT/exact.log")"
echo "=== gate-scan durations $(date -u +%T)"
for sh in "1024 128" "1024 8192" "128 8192" "64 8192"; do set -- $sh
  for l in 0 1 2 3; do
    SIEVE_LAG=$l timeout 90 "$NCU" --metrics gpu__time_duration.sum --kernel-name regex:"scan_tma" --launch-skip 2 --launch-count 2 --clock-control none \
      $SB knn --n 5m --dtype float16 --batch $1 --k $2 --repeat 3 --warmup 1 --no-materialized --results pinned > "$OUT/d_B$1_k$2_lag$l.txt" 2>&1
    printf "B=%s k=%s lag=%s: %s\n" $1 $2 $l "$(grep gpu__time_duration "$OUT/d_B$1_k$2_lag$l.txt" | awk '{print $NF}' | tr '\n' ' ')"
  done
done
echo "=== whole calls $(date -u +%T)"
for r in 1 2; do for l in 0 2; do
  echo "--- lag $l round $r"; SIEVE_LAG=$l $SB knn --n 5m --dtype float16 --batch 64,128,1024 --k 128,8192 --repeat 10 --results pinned --no-materialized --json "$OUT/w_lag${l}_$r.json" 2>&1 | grep -E '^[0-9]' | awk '{print $3,$4,$5,$NF}' | tr '\n' ';'; echo
done; done
echo "=== end $(date -u +%T)"
