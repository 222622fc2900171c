# Device call 11: the final build and scripts (the benches' relative L2 check): the grouped,
# dense and CPU suites; run.sh's attention stage (the indexer at 128K, the grouped sweep,
# dense at 8K / 32K / 128K beside torch's flash and cuDNN, one report).
D=$OUT/c11; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for t in test_sparse_attn_cuda test_attention_cuda test_kernels_sparse_attn_cpu test_kernels_attention_cpu; do
  timeout 120 $N/tests/$t --jobs 4 --verbose=1 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "FAIL|ssert|Synthesis" $D/$t.txt | head -6 | tee -a $D/summary.txt
done
OUT=$D ATTN_ARGS="--keys 128k --queries 1,2048 --k 2048" timeout 330 bash bench/gpu/run.sh attention > $D/stage.txt 2>&1; echo "attention stage rc $?" | tee -a $D/summary.txt
tail -45 $D/attn_report.md >> $D/summary.txt
grep -h "rel_l2" $D/dense.json | head -3 >> $D/summary.txt
tar czf $OUT/call11.tar.gz -C $OUT c11
