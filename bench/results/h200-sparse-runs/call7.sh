# Device call 7: dense causal attention (the grouped kernel over contiguous keys, a token
# sees the keys at or before it): its GPU suite, memcheck, racecheck, the CPU suite; the
# grouped suite again (the kernel now has a causal mode); sieve-bench attention dense at
# 8K / 32K / 128K beside torch's flash and cuDNN (run.sh's attention stage with the sparse
# and indexer sweeps); the grouped target shape for regression against call 6.
D=$OUT/c7; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $D/info.txt
timeout 150 $N/tests/test_attention_cuda --jobs 4 --verbose=1 > $D/test_dense.txt 2>&1; echo "dense suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_dense.txt | head -12 | tee -a $D/summary.txt
timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test_sparse.txt 2>&1; echo "sparse suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_sparse.txt | head -12 | tee -a $D/summary.txt
timeout 60 $N/tests/test_kernels_attention_cpu --jobs 4 > $D/test_dense_cpu.txt 2>&1; echo "dense CPU suite rc $?" | tee -a $D/summary.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/@(decode_slices_bf16|clipped_mha_bf16|errors)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/@(decode_slices_bf16|clipped_mha_bf16)' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
timeout 60 $N/bench/sieve-bench attention sparse --device cuda --keys 128k --queries 2048 --k 2048 --group 16 --share 1,0.95,0.9 --check-tokens 2 > $D/sparse_target.txt 2>&1; echo "sparse target rc $?" >> $D/summary.txt; tail -3 $D/sparse_target.txt >> $D/summary.txt
OUT=$D ATTN_ARGS="--keys 128k --queries 1,64,2048 --k 2048" SPARSE_ARGS="--keys 128k --queries 2048 --k 2048 --group 16 --share 1,0.95,0.9,0.75,0.5,0" timeout 500 bash bench/gpu/run.sh attention > $D/stage.txt 2>&1; echo "attention stage rc $?" | tee -a $D/summary.txt
grep -A12 "Dense causal" $D/attn_report.md >> $D/summary.txt
cat $D/dense.txt $D/dense_torch.txt >> $D/summary.txt
tar czf $OUT/call7.tar.gz -C $OUT c7
