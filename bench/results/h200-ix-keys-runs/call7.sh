# Device call 7: the attention suites on the final build, after the review of the whole
# change folded attn_wg.cuh's repeated tile-list setup, O rescale and grid launcher into
# helpers (device code SASS-identical; the launcher is host code).
D=$OUT/c7; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for t in test_attention_cuda test_block_sparse_cuda; do
  timeout 150 $N/tests/$t -j16 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  tail -1 $D/$t.txt >> $D/summary.txt
  grep -E "FAIL|ssert" $D/$t.txt | head -5 >> $D/summary.txt
done
echo "seconds $SECONDS" >> $D/summary.txt
tar czf $OUT/call7.tar.gz -C $OUT c7
