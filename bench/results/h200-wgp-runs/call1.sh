# Device call 1: the 128-key attention kernel (sa_wgp_kernel: a producer warpgroup copying
# tiles with mbarrier-tracked cp.async, two consumer warpgroups, separate key and value rings)
# beside the 64-key kernel (SIEVE_CUDA_WG_RING=5x2, the default before). The attention suite,
# prefill 32K / 128K and dense 8K-128K in mirrored A/B order, the block-sparse and sparse
# suites, torch flash and cuDNN dense in the same call.
D=$OUT/c1; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
timeout 120 $N/tests/test_attention_cuda -j16 --verbose > $D/test_attention_cuda.txt 2>&1; echo "test_attention_cuda rc $?" | tee -a $D/summary.txt
grep -E "Synthesis|FAIL|Timeout|Crash|Assert|difference" $D/test_attention_cuda.txt | head -12 >> $D/summary.txt
pf() { # ring tag
  SIEVE_CUDA_WG_RING=$1 timeout 60 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$2.json > $D/prefill_$2.txt 2>&1
  echo "prefill $1 ($2) rc $?" | tee -a $D/summary.txt; tail -2 $D/prefill_$2.txt >> $D/summary.txt
}
pf 5x2 a1; pf k3v3 b1; pf k3v4 c1; pf k3v3 b2; pf 5x2 a2
head -3 $D/prefill_a1.txt > $D/prefill_header.txt
dn() {
  SIEVE_CUDA_WG_RING=$1 timeout 60 $B attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$2.json > $D/dense_$2.txt 2>&1
  echo "dense $1 ($2) rc $?" | tee -a $D/summary.txt; tail -3 $D/dense_$2.txt >> $D/summary.txt
}
dn 5x2 a1; dn k3v3 b1; dn k3v3 b2; dn 5x2 a2
timeout 60 python3 bench/torch_attention.py dense --seq 8k,32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
for t in test_block_sparse_cuda test_sparse_attn_cuda; do
  left=$((560 - SECONDS)); [ $left -gt 20 ] || break
  timeout $left $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $? (limit $left)" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -12 >> $D/summary.txt
done
tar czf $OUT/call1.tar.gz -C $OUT c1
