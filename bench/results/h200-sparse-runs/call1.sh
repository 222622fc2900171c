# Device call 1: grouped sparse attention v1 (mma.sync, 2-stage cp.async ring of 64 slots):
# the GPU suite, memcheck and racecheck, the bench at the GQA 32/8 target shape over
# overlap and group, an MQA shape, and Nsight Compute of one grouped and one per-query launch.
D=$OUT/c1; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $D/info.txt
timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test.txt 2>&1; echo "suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test.txt | head -12 | tee -a $D/summary.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16|errors)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16)' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -2 $D/racecheck.txt >> $D/summary.txt
S="$N/bench/sieve-bench attention sparse --device cuda --json $D/sparse.json"
timeout 150 $S --keys 128k --queries 2048 --k 2048 --group 16 --share 1,0.95,0.9,0.75,0.5,0 > $D/share.txt 2>&1; echo "share sweep rc $?" | tee -a $D/summary.txt
cat $D/share.txt >> $D/summary.txt
timeout 100 $S --keys 128k --queries 2048 --k 2048 --group 4,8,32 --share 0.95,0.9 > $D/group.txt 2>&1; echo "group sweep rc $?" | tee -a $D/summary.txt
tail -6 $D/group.txt >> $D/summary.txt
timeout 100 $S --q-heads 64 --kv-heads 1 --keys 128k --queries 2048 --k 2048 --group 2,16 --share 0.95 --repeat 5 > $D/mqa.txt 2>&1; echo "mqa rc $?" | tee -a $D/summary.txt
tail -2 $D/mqa.txt >> $D/summary.txt
for g in 16 1; do
  timeout 120 ncu --kernel-name regex:sa_attn --launch-count 1 --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats --section WarpStateStats \
    $N/bench/sieve-bench attention sparse --device cuda --keys 128k --queries 2048 --k 2048 --group $g --share 0.95 --repeat 1 --warmup 0 --check-tokens 0 > $D/ncu_g$g.txt 2>&1
  echo "ncu g$g rc $?" | tee -a $D/summary.txt
  grep -E "Duration|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Theoretical Occupancy|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit" $D/ncu_g$g.txt | head -14 >> $D/summary.txt
done
