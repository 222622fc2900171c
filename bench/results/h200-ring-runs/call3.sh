# Device call 3: the default now the queries in registers on a ring of 5 (5x2q). Nsight
# Compute full set with source counters on the wgmma kernel (dense causal 32K, bfloat16, GQA
# 32/8, D 128): warp stalls by reason and by SASS instruction; then memcheck of the
# forced-wgmma dense cases and of block-sparse cases through the wgmma kernels.
D=$OUT/c3; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 200 $NCU --set full --import-source yes --kernel-name-base mangled --kernel-name regex:sa_wg_kernel --launch-count 1 -f -o $D/dense32k $B attention dense --device cuda --seq 32k --repeat 1 --warmup 0 --check-tokens 0 > $D/ncu_run.log 2>&1; echo "ncu rc $?" | tee -a $D/summary.txt
$NCU -i $D/dense32k.ncu-rep --page details > $D/ncu_dense.txt 2>&1
$NCU -i $D/dense32k.ncu-rep --page source --csv --print-source sass > $D/dense32k_sass.csv 2>&1
grep -E "Duration|Issue Slots|Warp Cycles Per Issued|L2 Cache Throughput|Compute \(SM\)" $D/ncu_dense.txt | head >> $D/summary.txt
python3 bench/gpu/sass_top.py $D/dense32k_sass.csv --top 40 --chunks 100 > $D/sass_top.txt 2>&1; head -30 $D/sass_top.txt >> $D/summary.txt
rm -f $D/dense32k.ncu-rep
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_*' > $D/memcheck_dense.txt 2>&1; echo "memcheck dense rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck_dense.txt >> $D/summary.txt
left=$((560 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma_kernel_[4-7]' > $D/memcheck_bsp.txt 2>&1; echo "memcheck bsp rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_bsp.txt >> $D/summary.txt; }
tar czf $OUT/call3.tar.gz -C $OUT c3
