# Device call 2: v2 of the attention kernel (the list positions through a shared-memory ring
# ST - 1 tiles ahead, so no copy waits on a global load of its address; the column split a
# template parameter, the S products interleaved across n8 tiles; 168 registers for 3 CTAs
# an SM) against v1 (gpu-base, call 1's build), ring of 2 stages (default) and 3
# (SIEVE_CUDA_SA_STAGES=3), alternating runs; the suite, memcheck, racecheck; Nsight Compute.
D=$OUT/c2; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-base || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build
timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test.txt 2>&1; echo "suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test.txt | head -12 | tee -a $D/summary.txt
SIEVE_CUDA_SA_STAGES=3 timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test_st3.txt 2>&1; echo "suite (3 stages) rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_st3.txt | head -12 | tee -a $D/summary.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16|errors)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16)' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
SIEVE_CUDA_SA_STAGES=3 timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16)' > $D/racecheck3.txt 2>&1; echo "racecheck (3 stages) rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck3.txt >> $D/summary.txt
A="attention sparse --device cuda --keys 128k --queries 2048 --k 2048 --group 16 --share 1,0.95,0.9 --check-tokens 2"
for r in b1:$B0:2 n1:$N:2 s1:$N:3 s2:$N:3 n2:$N:2 b2:$B0:2; do
  IFS=: read l b st <<< "$r"
  SIEVE_CUDA_SA_STAGES=$st timeout 60 $b/bench/sieve-bench $A --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "== $l" >> $D/summary.txt; tail -3 $D/ab_$l.txt >> $D/summary.txt
done
for st in 2 3; do
  SIEVE_CUDA_SA_STAGES=$st timeout 60 $N/bench/sieve-bench attention sparse --device cuda --keys 128k --queries 2048 --k 2048 --group 16 --share 0.95 --head-dim 64 --v-dim 64 --check-tokens 2 --json $D/d64.json > $D/d64_$st.txt 2>&1
  echo "== d64 st$st $(tail -1 $D/d64_$st.txt)" >> $D/summary.txt
  SIEVE_CUDA_SA_STAGES=$st timeout 60 $N/bench/sieve-bench attention sparse --device cuda --dtype float16 --keys 128k --queries 2048 --k 2048 --group 16 --share 0.95 --check-tokens 2 --json $D/f16.json > $D/f16_$st.txt 2>&1
  echo "== f16 st$st $(tail -1 $D/f16_$st.txt)" >> $D/summary.txt
done
for g in 16 1; do
  timeout 120 ncu --kernel-name regex:sa_attn --launch-count 1 --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    $N/bench/sieve-bench attention sparse --device cuda --keys 128k --queries 2048 --k 2048 --group $g --share 0.95 --repeat 1 --warmup 0 --check-tokens 0 > $D/ncu_g$g.txt 2>&1
  echo "ncu g$g rc $?" >> $D/summary.txt
  grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Achieved Occupancy|Warp Cycles Per Issued|L2 Hit|Issued Warp|No Eligible" $D/ncu_g$g.txt | head -12 >> $D/summary.txt
done
