# Device call 4: the final form (call 3's kernel, comments only changed since; 128-key tiles
# the default, k3v3). The three attention suites; prefill 32K / 128K and dense 8K-128K on the
# default and on the 64-key kernel (5x2); torch flash and cuDNN dense in the same call;
# memcheck of the forced-wgmma dense cases (both kernels) and of the block-sparse 128-key
# cases; racecheck of two of those.
D=$OUT/c4; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  timeout 150 $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -8 >> $D/summary.txt
done
pf() {
  env ${1:+SIEVE_CUDA_WG_RING=$1} timeout 60 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$2.json > $D/prefill_$2.txt 2>&1
  echo "prefill ${1:-default} ($2) rc $?" | tee -a $D/summary.txt; tail -2 $D/prefill_$2.txt >> $D/summary.txt
}
dn() {
  env ${1:+SIEVE_CUDA_WG_RING=$1} timeout 60 $B attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$2.json > $D/dense_$2.txt 2>&1
  echo "dense ${1:-default} ($2) rc $?" | tee -a $D/summary.txt; tail -3 $D/dense_$2.txt >> $D/summary.txt
}
pf "" b1; pf 5x2 a1; pf "" b2
head -3 $D/prefill_b1.txt > $D/prefill_header.txt; head -3 $D/dense_b1.txt > $D/dense_header.txt 2>/dev/null
timeout 60 python3 bench/torch_attention.py dense --seq 8k,32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
dn "" b1; dn 5x2 a1
head -3 $D/dense_b1.txt > $D/dense_header.txt
left=$((400 - SECONDS)); [ $left -gt 20 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma128*' > $D/memcheck_bsp128.txt 2>&1; echo "memcheck bsp 128 rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_bsp128.txt >> $D/summary.txt; }
left=$((470 - SECONDS)); [ $left -gt 20 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_kernel' > $D/memcheck_attn.txt 2>&1; echo "memcheck attention wgmma rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_attn.txt >> $D/summary.txt; }
left=$((530 - SECONDS)); [ $left -gt 20 ] && { timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma128_kernel_[24]' > $D/racecheck_bsp128.txt 2>&1; echo "racecheck bsp 128 cases 2, 4 rc $? (limit $left)" | tee -a $D/summary.txt; tail -3 $D/racecheck_bsp128.txt >> $D/summary.txt; }
tar czf $OUT/call4.tar.gz -C $OUT c4
