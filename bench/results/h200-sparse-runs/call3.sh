# Device call 3: the final build (v2 with the union kernel at 1,024 threads) against call 2's
# build (gpu-base: 512 threads), alternating; the suite, memcheck, racecheck; run.sh's
# attention stage (the indexer bench, torch, the report, and the sparse sweep); shapes
# beyond the target: decode-size T, shorter L, smaller k, MQA.
D=$OUT/c3; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-base || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $D/info.txt
timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test.txt 2>&1; echo "suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test.txt | head -12 | tee -a $D/summary.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16|errors|two_windows_bf16)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16)' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
A="attention sparse --device cuda --keys 128k --queries 2048 --k 2048 --group 16 --share 1,0.95,0.9 --check-tokens 2"
for r in b1:$B0 n1:$N n2:$N b2:$B0; do
  IFS=: read l b <<< "$r"
  timeout 60 $b/bench/sieve-bench $A --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "== $l" >> $D/summary.txt; tail -3 $D/ab_$l.txt >> $D/summary.txt
done
OUT=$D timeout 420 bash bench/gpu/run.sh attention > $D/stage.txt 2>&1; echo "attention stage rc $?" | tee -a $D/summary.txt
tail -25 $D/stage.txt >> $D/summary.txt
S="$N/bench/sieve-bench attention sparse --device cuda --json $D/more.json --check-tokens 2"
timeout 60 $S --keys 32k,128k --queries 1,16,64 --k 2048 --group 16 --share 0.95 > $D/decode.txt 2>&1; echo "decode rc $?" >> $D/summary.txt; tail -6 $D/decode.txt >> $D/summary.txt
timeout 60 $S --keys 32k,128k --queries 2048 --k 512,2048 --group 16 --share 0.95 > $D/lk.txt 2>&1; echo "L/k rc $?" >> $D/summary.txt; tail -4 $D/lk.txt >> $D/summary.txt
timeout 60 $S --q-heads 64 --kv-heads 1 --keys 128k --queries 2048 --k 2048 --group 1,2,16 --share 0.95 --repeat 5 > $D/mqa.txt 2>&1; echo "mqa rc $?" >> $D/summary.txt; tail -3 $D/mqa.txt >> $D/summary.txt
timeout 60 $S --q-heads 16 --kv-heads 8 --keys 128k --queries 2048 --k 2048 --group 16,32 --share 0.95 --repeat 5 > $D/r2.txt 2>&1; echo "R=2 rc $?" >> $D/summary.txt; tail -2 $D/r2.txt >> $D/summary.txt
timeout 120 ncu --kernel-name regex:sa_ --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  $N/bench/sieve-bench attention sparse --device cuda --keys 128k --queries 2048 --k 2048 --group 16 --share 0.95 --repeat 1 --warmup 0 --check-tokens 0 > $D/ncu_g16.txt 2>&1
echo "ncu rc $?" >> $D/summary.txt
grep -E "sa_|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp|No Eligible" $D/ncu_g16.txt | head -24 >> $D/summary.txt
tar czf $OUT/call3.tar.gz -C $OUT c3
