# Device call 3: the 128-key kernel's producer strength-reduced (whole tiles: one pointer
# stepped 8 rows at a time; the kept block's id and a pooled tile's row ids loaded a tile
# ahead, the ids spread by shuffles) after call 2 counted 35% more instructions than the
# 64-key kernel. Mirrored A/B against the 64-key kernel (5x2); the attention suite and the
# block-sparse suite's 128-key cases.
D=$OUT/c3; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
pf() {
  SIEVE_CUDA_WG_RING=$1 timeout 60 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$2.json > $D/prefill_$2.txt 2>&1
  echo "prefill $1 ($2) rc $?" | tee -a $D/summary.txt; tail -2 $D/prefill_$2.txt >> $D/summary.txt
}
dn() {
  SIEVE_CUDA_WG_RING=$1 timeout 60 $B attention dense --device cuda --seq 8k,32k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$2.json > $D/dense_$2.txt 2>&1
  echo "dense $1 ($2) rc $?" | tee -a $D/summary.txt; tail -2 $D/dense_$2.txt >> $D/summary.txt
}
pf 5x2 a1; pf k3v3 b1; pf k3v4 c1; pf 5x2 a2
dn 5x2 a1; dn k3v3 b1; dn 5x2 a2
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for r in 5x2 k3v3; do
  SIEVE_CUDA_WG_RING=$r timeout 60 $NCU --metrics gpu__time_duration.sum,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active --kernel-name regex:sa_wg --launch-count 1 $B attention dense --device cuda --seq 32k --repeat 1 --warmup 0 > $D/ncu_dense_$r.txt 2>&1; echo "ncu dense $r rc $?" | tee -a $D/summary.txt
  grep -E "duration|inst_exec|issue_active|tensor" $D/ncu_dense_$r.txt | sed 's/  */ /g' >> $D/summary.txt
done
timeout 120 $N/tests/test_attention_cuda -j16 > $D/test_attention_cuda.txt 2>&1; echo "test_attention_cuda rc $?" | tee -a $D/summary.txt
grep -E "Synthesis|FAIL|Assert" $D/test_attention_cuda.txt | head -8 >> $D/summary.txt
timeout 150 $N/tests/test_block_sparse_cuda -j16 --filter 'block_sparse_cuda/wgmma128*' > $D/test_bsp128.txt 2>&1; echo "bsp 128 cases rc $?" | tee -a $D/summary.txt
grep -E "Synthesis|FAIL|Assert" $D/test_bsp128.txt | head -8 >> $D/summary.txt
tar czf $OUT/call3.tar.gz -C $OUT c3
