# Device call 1: the wgmma attention kernel (kernels/cuda/attn_wg.cuh). The GPU suites of
# dense causal, block-sparse and grouped sparse attention (with the forced-wgmma cases);
# then whole calls at 128K, the mma.sync kernel (SIEVE_CUDA_ATTN_KERNEL=mma) against the
# default choice (the wgmma kernel at these shapes), alternating; torch's flash and cuDNN
# dense in the same call; memcheck of the forced-wgmma cases.
D=$OUT/c1; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > $D/gpu.txt 2>&1
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  timeout 120 $N/tests/$t -j4 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "Synthesis|Failed|failed|Assertion" $D/$t.txt | head -8 >> $D/summary.txt
done
for k in mma auto mma auto; do
  SIEVE_CUDA_ATTN_KERNEL=$k timeout 60 $N/bench/sieve-bench attention prefill --device cuda --seq 128k --block 128 --sink 2 --window 4 --repeat 3 --warmup 1 --check-tokens 4 --json $D/prefill_$k.json >> $D/prefill_$k.txt 2>&1; echo "prefill $k rc $?" | tee -a $D/summary.txt
  tail -3 $D/prefill_$k.txt >> $D/summary.txt
done
for k in mma auto; do
  SIEVE_CUDA_ATTN_KERNEL=$k timeout 60 $N/bench/sieve-bench attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$k.json > $D/dense_$k.txt 2>&1; echo "dense $k rc $?" | tee -a $D/summary.txt
  tail -4 $D/dense_$k.txt >> $D/summary.txt
done
timeout 80 python3 bench/torch_attention.py dense --seq 32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_kernel' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -3 $D/memcheck.txt >> $D/summary.txt
tar czf $OUT/call1.tar.gz -C $OUT c1
