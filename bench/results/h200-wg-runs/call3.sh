# Device call 3: Nsight Compute on the wgmma kernel of call 2's build (dense causal at 32K,
# bfloat16, GQA 32/8, D 128; block-sparse prefill at 32K): throughput, warp stalls,
# shared-memory traffic.
D=$OUT/c3; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
timeout 200 ncu --kernel-name-base mangled --kernel-name regex:sa_wg_kernel --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats $N/bench/sieve-bench attention dense --device cuda --seq 32k --repeat 1 --warmup 0 --check-tokens 0 > $D/ncu_dense.txt 2>&1; echo "ncu dense rc $?" | tee -a $D/summary.txt
timeout 200 ncu --kernel-name-base mangled --kernel-name regex:sa_wg_kernel --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis $N/bench/sieve-bench attention prefill --device cuda --seq 32k --block 128 --sink 2 --window 4 --repeat 1 --warmup 0 --check-tokens 0 > $D/ncu_bsp.txt 2>&1; echo "ncu bsp rc $?" | tee -a $D/summary.txt
tar czf $OUT/call3.tar.gz -C $OUT c3
