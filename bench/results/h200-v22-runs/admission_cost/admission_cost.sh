#!/usr/bin/env bash
# device calls 6-8 (experiment build; XS, KS and BS pick the runs): what the large-k scan pays for. SIEVE_EXP:
# 0 normal; 1 drain completes nothing (no candidate write, histogram atomic, tightening);
# 2 = 1 and the reserve only counts (no row check, no bin-table loads); 3 staged epilogue
# stops after the row maximum (no admissions: rescans follow; the compiled kernel tests the
# switch before the row maxima and skips them too); 4 group votes but no appends.
# Durations of the gate-scan kernels (Nsight Compute, gpu__time_duration), launches 3-6.
. "$(dirname "$0")/../common.sh"
for b in ${BS:-128 64 1024}; do
  for kk in ${KS:-128 8192}; do
    for x in ${XS:-0 1 2 3 4}; do
      [ $kk = 128 ] && [ $x != 0 ] && continue
      SIEVE_EXP=$x timeout 120 "$NCU" --metrics gpu__time_duration.sum --kernel-name regex:"scan_tma" --launch-skip 2 --launch-count 4 --clock-control none \
        $SB knn --n 5m --dtype float16 --batch $b --k $kk --repeat 3 --warmup 1 --no-materialized --results pinned > "$OUT/x_B${b}_k${kk}_$x.txt" 2>&1
      printf "B=%s k=%s exp=%s: %s\n" $b $kk $x "$(grep gpu__time_duration "$OUT/x_B${b}_k${kk}_$x.txt" | awk '{print $NF}' | tr '\n' ' ')"
    done
  done
done
echo "=== end $(date -u +%T)"
