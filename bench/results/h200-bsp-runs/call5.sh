# Device call 5 (the final build): shape checks and scratch selection shared by the attention
# entry points and the indexer (host code); every GPU suite but the server's (the k-NN suite
# to completion), memcheck of small block-sparse and dense cases, then the prefill at 32K and
# 128K (blocks of 64, and 128 at 128K) beside torch's flash and cuDNN.
D=$OUT/c5; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > $D/info.txt
for t in test_block_sparse_cuda test_attention_cuda test_sparse_attn_cuda test_indexer_cuda test_devcache test_knn_cuda; do
  timeout 300 $N/tests/$t --jobs 4 --verbose=1 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "FAIL|ssert|Synthesis" $D/$t.txt | head -8 | tee -a $D/summary.txt
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/@(errors|clipped_mha_bf16)' > $D/memcheck_bsp.txt 2>&1; echo "memcheck bsp rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck_bsp.txt >> $D/summary.txt
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/@(errors|decode_slices_bf16)' > $D/memcheck_attn.txt 2>&1; echo "memcheck attn rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck_attn.txt >> $D/summary.txt
SB="$N/bench/sieve-bench attention prefill --device cuda --check-tokens 4"
timeout 150 $SB --seq 32k,128k --repeat 5 --warmup 1 --json $D/prefill.json > $D/prefill.txt 2>&1; echo "prefill rc $?" | tee -a $D/summary.txt
tail -2 $D/prefill.txt | tee -a $D/summary.txt
timeout 90 $SB --seq 128k --block 128 --repeat 5 --warmup 1 --json $D/prefill_b128.json > $D/prefill_b128.txt 2>&1; echo "b128 rc $?" | tee -a $D/summary.txt
tail -1 $D/prefill_b128.txt | tee -a $D/summary.txt
timeout 120 python3 bench/torch_attention.py dense --seq 32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
cat $D/prefill.json $D/prefill_b128.json > $D/prefill_all.json
python3 bench/report_attention.py --sieve $D/prefill_all.json --torch $D/torch.json --md $D/report.md --plots $D/h200-bsp > $D/report.txt 2>&1; echo "report rc $?" >> $D/summary.txt
tar czf $OUT/call5.tar.gz -C $OUT c5
