# Device call 5: call 4's build (the final kernels). memcheck of the forced-wgmma dense
# cases and of alpha 0 = dense (both modes on the wgmma kernel); the grouped sparse suite;
# the default configuration's block-sparse prefill at 32K and 128K and dense causal at 8K,
# 32K and 128K beside torch's flash and cuDNN, measured in the same call.
D=$OUT/c5; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
timeout 110 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_kernel' > $D/memcheck_dense.txt 2>&1; echo "memcheck dense rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck_dense.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/alpha0_equals_dense' > $D/memcheck_bsp.txt 2>&1; echo "memcheck bsp rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck_bsp.txt >> $D/summary.txt
timeout 60 $N/tests/test_sparse_attn_cuda -j8 > $D/test_sparse_attn_cuda.txt 2>&1; echo "test_sparse_attn_cuda rc $?" | tee -a $D/summary.txt
grep Synthesis $D/test_sparse_attn_cuda.txt >> $D/summary.txt
timeout 50 $N/bench/sieve-bench attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill.json > $D/prefill.txt 2>&1; echo "prefill rc $?" | tee -a $D/summary.txt
tail -2 $D/prefill.txt >> $D/summary.txt
timeout 40 $N/bench/sieve-bench attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense.json > $D/dense.txt 2>&1; echo "dense rc $?" | tee -a $D/summary.txt
tail -3 $D/dense.txt >> $D/summary.txt
timeout 80 python3 bench/torch_attention.py dense --seq 8k,32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
python3 bench/report_attention.py --sieve $D/prefill.json --torch $D/torch.json --md $D/report.md > $D/report.txt 2>&1; echo "report rc $?" >> $D/summary.txt
tar czf $OUT/call5.tar.gz -C $OUT c5
