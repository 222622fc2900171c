# Device call 1: v7 (keys as the wgmma A operand, the heads' sum in each thread's registers
# and a quad's two-step reduce-scatter; the key loader stepping one pointer; descriptors
# advanced by adds) against v6 (gpu-base: main's scan, only its sieve-bench carried) at the
# target shape, alternating b n n b; v7's suites, sweep, k sweep, torch, instruction counts
# and sanitizers in the same call.
D=$OUT/c1; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-base || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
T="attention --device cuda --keys 128k --queries 2048 --k 2048"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $D/gpu.txt
timeout 200 $N/tests/test_indexer_cuda --jobs 4 > $D/test_indexer_cuda.txt 2>&1; echo "indexer suite rc $?" | tee -a $D/summary.txt
tail -1 $D/test_indexer_cuda.txt >> $D/summary.txt
grep -E "FAIL|ssert" $D/test_indexer_cuda.txt | head -10 >> $D/summary.txt
for r in b1:$B0 n1:$N n2:$N b2:$B0; do
  l=${r%%:*} b=${r#*:}
  timeout 100 $b/bench/sieve-bench $T --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "$l $(tail -1 $D/ab_$l.txt)" | tee -a $D/summary.txt
done
for b in $B0 $N; do
  timeout 120 $NCU --clock-control none --metrics gpu__time_duration.sum,sm__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active --csv --print-units base \
    $b/bench/sieve-bench $T --repeat 1 --warmup 0 > $D/kdur_$(basename $(dirname $b)).csv 2> $D/kdur.err
  echo "== $(basename $(dirname $b))" >> $D/summary.txt
  python3 - $D/kdur_$(basename $(dirname $b)).csv >> $D/summary.txt <<'PY'
import csv, sys, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); mi = hdr.index("Metric Name"); vi = hdr.index("Metric Value")
for r in rows[1:]:
    if "scan" in r[ki]:
        print("%-50s %-60s %s" % (re.sub(r"\(.*", "", r[ki])[:50], r[mi], r[vi]))
PY
done
timeout 150 $N/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 16k,64k,128k --queries 1,16,64,128,2048 --k 2048 > $D/attn_sweep.txt 2>&1; echo "sweep rc $?" | tee -a $D/summary.txt
cat $D/attn_sweep.txt >> $D/summary.txt
timeout 100 $N/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 128k --queries 2048 --k 1,64,512,4096 --repeat 5 > $D/attn_k.txt 2>&1; echo "k sweep rc $?" | tee -a $D/summary.txt
cat $D/attn_k.txt >> $D/summary.txt
timeout 150 python3 bench/torch_attention.py indexer --keys 128k --queries 1,64,2048 --k 2048 --repeat 5 --warmup 2 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v "^{" $D/torch.txt >> $D/summary.txt
timeout 60 $N/tests/test_kernels_indexer_cpu --jobs 8 > $D/test_indexer_cpu.txt 2>&1; echo "indexer cpu suite rc $?" | tee -a $D/summary.txt
tail -1 $D/test_indexer_cpu.txt >> $D/summary.txt
for t in test_attention_cuda test_block_sparse_cuda; do
  timeout 150 $N/tests/$t --jobs 4 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  tail -1 $D/$t.txt >> $D/summary.txt
done
if [ $SECONDS -lt 420 ]; then
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
  tail -1 $D/memcheck.txt >> $D/summary.txt
fi
if [ $SECONDS -lt 480 ]; then
  timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
  tail -1 $D/racecheck.txt >> $D/summary.txt
fi
echo "seconds $SECONDS" >> $D/summary.txt
tar czf $OUT/call1.tar.gz -C $OUT c1
