# Device call 5: part of each thread's exponentials on the FMA pipe (exp2_fma: 8 or 16 of the
# 32 a tile; SIEVE_CUDA_WG_RING=5x2e8 / 5x2e16) against all on the MUFU unit (5x2, the
# default), A/B at 128K prefill and dense 32K in mirrored order; torch flash and cuDNN;
# prefill 32K/128K and dense 8K-128K; the three suites (the variants spread over the forced
# wgmma cases); memcheck of the forced-wgmma dense cases.
D=$OUT/c5; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
ab() { # ring round
  SIEVE_CUDA_WG_RING=$1 timeout 40 $B attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$1_$2.json > $D/prefill_$1_$2.txt 2>&1
  echo "prefill $1 round $2 rc $?: $(tail -1 $D/prefill_$1_$2.txt)" | tee -a $D/summary.txt
  SIEVE_CUDA_WG_RING=$1 timeout 30 $B attention dense --device cuda --seq 32k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$1_$2.json > $D/dense_$1_$2.txt 2>&1
  echo "dense $1 round $2 rc $?: $(tail -1 $D/dense_$1_$2.txt)" | tee -a $D/summary.txt
}
for r in 5x2 5x2e8 5x2e16; do ab $r 1; done
for r in 5x2e16 5x2e8 5x2; do ab $r 2; done
timeout 60 python3 bench/torch_attention.py dense --seq 8k,32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
for r in 5x2 5x2e16; do
  SIEVE_CUDA_WG_RING=$r timeout 40 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_final_$r.json > $D/prefill_final_$r.txt 2>&1; echo "prefill 32k,128k $r rc $?" | tee -a $D/summary.txt
  tail -2 $D/prefill_final_$r.txt >> $D/summary.txt
  SIEVE_CUDA_WG_RING=$r timeout 60 $B attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_final_$r.json > $D/dense_final_$r.txt 2>&1; echo "dense 8k-128k $r rc $?" | tee -a $D/summary.txt
  tail -3 $D/dense_final_$r.txt >> $D/summary.txt
done
head -3 $D/prefill_5x2_1.txt > $D/prefill_header.txt
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  left=$((540 - SECONDS)); [ $left -gt 150 ] && left=150; [ $left -lt 10 ] && break
  timeout $left $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $? (limit $left s)" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -8 >> $D/summary.txt
done
left=$((560 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_*' > $D/memcheck_dense.txt 2>&1; echo "memcheck dense rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_dense.txt >> $D/summary.txt; }
tar czf $OUT/call5.tar.gz -C $OUT c5
