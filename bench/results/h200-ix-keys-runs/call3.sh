# Device call 3: v7c (v7 with each warpgroup copying its own 64 keys of a tile and waiting
# only for its own copies after a unit's first chunk: a named barrier of 128 threads instead
# of the block barrier a chunk) against v7 (gpu-prev: call 1's build) and v6 (gpu-base),
# alternating a n n a, then b; v7c's suite, instruction counts, racecheck and memcheck,
# sweep and torch.
D=$OUT/c3; mkdir -p $D
for b in gpu gpu-base gpu-prev; do bash bench/gpu/unpack.sh $b || exit 1; done
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build A=.deps/gpu-prev/build
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
T="attention --device cuda --keys 128k --queries 2048 --k 2048"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $D/gpu.txt
timeout 200 $N/tests/test_indexer_cuda -j16 > $D/test_indexer_cuda.txt 2>&1; echo "indexer suite rc $?" | tee -a $D/summary.txt
tail -1 $D/test_indexer_cuda.txt >> $D/summary.txt
grep -E "FAIL|ssert" $D/test_indexer_cuda.txt | head -10 >> $D/summary.txt
for r in a1:$A n1:$N n2:$N a2:$A n3:$N b1:$B0; do
  l=${r%%:*} b=${r#*:}
  timeout 100 $b/bench/sieve-bench $T --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "$l $(tail -1 $D/ab_$l.txt)" | tee -a $D/summary.txt
done
timeout 120 $NCU --clock-control none --metrics gpu__time_duration.sum,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active --csv --print-units base \
  $N/bench/sieve-bench $T --repeat 1 --warmup 0 --mat-repeat 1 > $D/kdur.csv 2> $D/kdur.err
sed -i "s@$PWD/@@g" $D/kdur.csv
python3 - $D/kdur.csv >> $D/summary.txt <<'PY'
import csv, sys, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); mi = hdr.index("Metric Name"); vi = hdr.index("Metric Value")
for r in rows[1:]:
    if "ix_" in r[ki]:
        print("%-50s %-55s %s" % (re.sub(r"\(.*", "", r[ki])[:50], r[mi], r[vi]))
PY
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/edge_shapes_and_plans' > $D/racecheck2.txt 2>&1; echo "racecheck 2 rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck2.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
left=$((520 - SECONDS)); [ $left -gt 30 ] && { timeout $left $N/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 16k,64k,128k --queries 1,16,64,128,2048 --k 2048 > $D/attn_sweep.txt 2>&1; echo "sweep rc $?" | tee -a $D/summary.txt; cat $D/attn_sweep.txt >> $D/summary.txt; }
left=$((585 - SECONDS)); [ $left -gt 30 ] && { timeout $left python3 bench/torch_attention.py indexer --keys 128k --queries 1,64,2048 --k 2048 --repeat 5 --warmup 2 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt; grep -v "^{" $D/torch.txt >> $D/summary.txt; }
echo "seconds $SECONDS" >> $D/summary.txt
tar czf $OUT/call3.tar.gz -C $OUT c3
