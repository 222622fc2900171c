# Device call 3: Nsight Compute on the v2 gate scan at the target shape (full set, source
# page), kernel durations of one fused call and one materialized call.
D=$OUT/c3; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
B=.deps/gpu/build
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
A="$B/bench/sieve-bench attention --device cuda --keys 128k --queries 2048 --k 2048"
# launches of one fused call: sample scan, gate scan; skip the sample scan
timeout 240 $NCU --set full --import-source yes --kernel-name regex:ix_scan_kernel --launch-skip 1 \
  --launch-count 1 --clock-control none -f -o $D/gate $A --repeat 1 --warmup 0 --no-materialized > $D/gate_run.log 2>&1
echo "ncu rc $?" | tee -a $D/summary.txt
$NCU -i $D/gate.ncu-rep --page details > $D/gate.txt 2>&1
$NCU -i $D/gate.ncu-rep --page source --csv --print-source sass > $D/gate_sass.csv 2>&1
python3 bench/gpu/sass_top.py $D/gate_sass.csv --top 40 --chunks 100 > $D/gate_sass_top.txt 2>&1
grep -iE "Duration|Throughput|Pipe|Issue|Warp Cycles|Registers|Occupancy|Stall|L2|Eligible" $D/gate.txt | head -60 >> $D/summary.txt
head -60 $D/gate_sass_top.txt >> $D/summary.txt
timeout 120 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  $A --repeat 1 --warmup 0 --mat-repeat 1 > $D/kdur.csv 2> $D/kdur.err
python3 - $D/kdur.csv >> $D/summary.txt <<'PY'
import csv, sys, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value")
for r in rows[1:]:
    v = r[vi].replace(",", "")
    try: us = float(v) / 1e3
    except ValueError: continue
    print("%-60s %10.1f us" % (re.sub(r"\(.*", "", r[ki])[:60], us))
PY
rm -f $D/gate.ncu-rep
tar czf $OUT/call3.tar.gz -C $OUT c3
