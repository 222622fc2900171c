# Device call 4: v3 (no division in the key loader, per-unit constants hoisted) against v2
# (gpu-base) at the target shape, alternating b n n b; v3's suite, sweep and kernel times.
D=$OUT/c4; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-base || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
T="attention --device cuda --keys 128k --queries 2048 --k 2048"
for r in b1:$B0 n1:$N n2:$N b2:$B0; do
  l=${r%%:*} b=${r#*:}
  timeout 100 $b/bench/sieve-bench $T --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "$l $(tail -1 $D/ab_$l.txt)" | tee -a $D/summary.txt
done
timeout 200 $N/tests/test_indexer_cuda --jobs 4 > $D/test_indexer_cuda.txt 2>&1; echo "indexer suite rc $?" | tee -a $D/summary.txt
tail -1 $D/test_indexer_cuda.txt >> $D/summary.txt
timeout 150 $N/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 16k,64k,128k --queries 1,16,64,128,2048 --k 2048 > $D/attn_sweep.txt 2>&1; echo "sweep rc $?" | tee -a $D/summary.txt
cat $D/attn_sweep.txt >> $D/summary.txt
timeout 120 $NCU --clock-control none --metrics gpu__time_duration.sum,sm__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active --csv --print-units base \
  $N/bench/sieve-bench $T --repeat 1 --warmup 0 --no-materialized > $D/kdur.csv 2> $D/kdur.err
python3 - $D/kdur.csv >> $D/summary.txt <<'PY'
import csv, sys, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); mi = hdr.index("Metric Name"); vi = hdr.index("Metric Value")
for r in rows[1:]:
    print("%-50s %-60s %s" % (re.sub(r"\(.*", "", r[ki])[:50], r[mi], r[vi]))
PY
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
tar czf $OUT/call4.tar.gz -C $OUT c4
