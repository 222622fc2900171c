# Call 7: the gate scan's fixed cost at B >= 16 (call 4: 45-70 us at 1M rows beyond a fifth
# of the 5M scan). Nsight Compute on scan_tma alone, k = 128, 1M and 5M rows, B = 1, 16,
# 64, 128: duration, SM clock, DRAM bytes and throughput, L2 bytes, with the clocks left
# alone and locked to base (ncu --clock-control base); the build of call 1.
D=$OUT/c7; . bench/results/h200-v31-runs/common.sh
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
echo "--- ncu ($(date -u +%T))"
for cc in none base; do for n in 1m 5m; do for b in 1 16 64 128; do
  timeout 120 $NCU --clock-control $cc -k regex:scan_tma --metrics $M --csv --print-units base \
    $SB knn --n $n --batch $b --k 128 --repeat 1 --warmup 1 --no-materialized \
    > $D/ncu_${cc}_${n}_b$b.csv 2> $D/ncu_${cc}_${n}_b$b.err
  python3 - $D/ncu_${cc}_${n}_b$b.csv "$cc $n B=$b" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; mi = h.index("Metric Name"); vi = h.index("Metric Value"); ii = h.index("ID")
by = collections.defaultdict(dict)
for r in rows[1:]:
    by[r[ii]][r[mi]] = float(r[vi].replace(",", ""))
last = by[sorted(by, key=int)[-1]]  # the timed call's scan (the first is the warm-up)
short = {"gpu__time_duration.sum": ("us", 1e-3), "sm__cycles_elapsed.avg.per_second": ("MHz", 1e-6),
         "dram__bytes_read.sum": ("dramGB", 1e-9), "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("dram%", 1),
         "lts__t_bytes.sum": ("l2GB", 1e-9), "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed": ("tensor%", 1),
         "smsp__inst_executed.sum": ("Minst", 1e-6)}
print(sys.argv[2] + ": " + ", ".join("%s %.1f" % (short[k][0], v * short[k][1]) for k, v in last.items() if k in short))
PY
done; done; done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
