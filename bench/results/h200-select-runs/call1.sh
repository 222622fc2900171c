# Device call 1: where the block-sparse prefill's selection (pool, block scores, select:
# 2.4-2.5 ms of 22.4 at 128K) spends its time, with the pooling kernel rewritten (16-byte
# loads of a token's row across the kv heads, eight rows in flight). The block-sparse suite
# (the pooled rows are bit-identical to the CPU's), the 128K prefill, Nsight Compute on the
# selection's kernels (durations and stall reasons), the attention kernel's duration.
D=$OUT/c1; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
timeout 150 $N/tests/test_block_sparse_cuda -j16 --verbose > $D/test_block_sparse_cuda.txt 2>&1; echo "test_block_sparse_cuda rc $?" | tee -a $D/summary.txt
grep -E "Synthesis|FAIL|Assert" $D/test_block_sparse_cuda.txt | head -8 >> $D/summary.txt
timeout 60 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill.json > $D/prefill.txt 2>&1; echo "prefill rc $?" | tee -a $D/summary.txt
tail -3 $D/prefill.txt >> $D/summary.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" >> $D/summary.txt
# durations of every kernel of one 128K prefill
timeout 120 $NCU --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed --launch-count 6 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_dur.txt 2>&1; echo "ncu durations rc $?" | tee -a $D/summary.txt
grep -E "bs_|sa_|wg_|Duration|Throughput" $D/ncu_dur.txt | head -40 >> $D/summary.txt
# the block-score kernel in detail
timeout 200 $NCU --set full --import-source no --kernel-name regex:bs_score --launch-count 1 -o $D/score $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_score.txt 2>&1; echo "ncu score rc $?" | tee -a $D/summary.txt
[ -f $D/score.ncu-rep ] && $NCU --import $D/score.ncu-rep --page details > $D/score_details.txt 2>&1
[ -f $D/score.ncu-rep ] && $NCU --import $D/score.ncu-rep --page source --csv > $D/score_source.csv 2>&1
timeout 100 $NCU --set full --kernel-name regex:bs_pool --launch-count 1 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_pool.txt 2>&1; echo "ncu pool rc $?" | tee -a $D/summary.txt
rm -f $D/score.ncu-rep
tar czf $OUT/call1.tar.gz -C $OUT c1
