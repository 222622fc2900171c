# Device call 9: the final build (the causal mode with open tiles and a 3-stage ring): the
# dense, grouped and CPU suites, memcheck, racecheck; run.sh's attention stage (the indexer's
# sweep and torch, the grouped sweep, dense at 8K / 32K / 128K beside torch's flash and
# cuDNN, one report).
D=$OUT/c9; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $D/info.txt
for t in test_attention_cuda test_sparse_attn_cuda test_kernels_attention_cpu test_kernels_sparse_attn_cpu; do
  timeout 150 $N/tests/$t --jobs 4 --verbose=1 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "FAIL|ssert|Synthesis" $D/$t.txt | head -6 | tee -a $D/summary.txt
done
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/@(decode_slices_bf16|clipped_mha_bf16|errors|chunk_f16)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/@(decode_slices_bf16|clipped_mha_bf16)' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
OUT=$D ATTN_ARGS="--keys 16k,128k --queries 1,64,2048 --k 2048" timeout 480 bash bench/gpu/run.sh attention > $D/stage.txt 2>&1; echo "attention stage rc $?" | tee -a $D/summary.txt
tail -60 $D/attn_report.md >> $D/summary.txt
cat $D/dense.txt $D/dense_torch.txt >> $D/summary.txt
tar czf $OUT/call9.tar.gz -C $OUT c9
