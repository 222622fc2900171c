# Device call 7: the block scores on wgmma (bs_score_wg_kernel, D = 128; the mma.sync score
# kernel's reductions shared with it). The block-sparse suite (its selection against the
# float64 reference), memcheck of its small edges, the default prefill at 128K with both
# kernels (SIEVE_CUDA_ATTN_KERNEL=mma keeps scores and attention on mma.sync) and at 32K,
# torch's flash and cuDNN at 128K in the same call.
D=$OUT/c7; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
timeout 100 $N/tests/test_block_sparse_cuda -j8 --verbose > $D/test_block_sparse_cuda.txt 2>&1; echo "test_block_sparse_cuda rc $?" | tee -a $D/summary.txt
grep -E "Synthesis|FAIL|Timeout|Crash" $D/test_block_sparse_cuda.txt | head -8 >> $D/summary.txt
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/small_edges' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck.txt >> $D/summary.txt
for k in auto mma auto; do
  SIEVE_CUDA_ATTN_KERNEL=$k timeout 35 $N/bench/sieve-bench attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$k.json >> $D/prefill_$k.txt 2>&1; echo "prefill $k rc $?" | tee -a $D/summary.txt
  tail -1 $D/prefill_$k.txt >> $D/summary.txt
done
timeout 20 $N/bench/sieve-bench attention prefill --device cuda --seq 32k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_32k.json > $D/prefill_32k.txt 2>&1; echo "prefill 32k rc $?" | tee -a $D/summary.txt
tail -1 $D/prefill_32k.txt >> $D/summary.txt
timeout 40 python3 bench/torch_attention.py dense --seq 32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
tar czf $OUT/call7.tar.gz -C $OUT c7
