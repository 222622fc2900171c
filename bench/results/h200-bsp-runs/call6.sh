# Device call 6: the GPU suite with the selection compared at the contract's 1e-4 band (was
# 1e-3); then the 128K prefill over alpha (one data set) and over the data's target share
# (--hot), for the density / time / error trade-off. Kernels as call 5 (584abd2).
D=$OUT/c6; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
timeout 150 $N/tests/test_block_sparse_cuda --jobs 4 --verbose=1 > $D/test_block_sparse_cuda.txt 2>&1; echo "test_block_sparse_cuda rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_block_sparse_cuda.txt | head -8 | tee -a $D/summary.txt
SB="$N/bench/sieve-bench attention prefill --device cuda --seq 128k --check-tokens 2 --repeat 3 --warmup 1"
timeout 150 $SB --alpha 0.02,0.05,0.1,0.2,0.4 --json $D/alpha.json > $D/alpha.txt 2>&1; echo "alpha rc $?" | tee -a $D/summary.txt
tail -5 $D/alpha.txt | tee -a $D/summary.txt
for h in 0.01 0.02 0.08; do
  timeout 60 $SB --hot $h --json $D/hot_$h.json > $D/hot_$h.txt 2>&1; echo "hot $h rc $?" | tee -a $D/summary.txt
  tail -1 $D/hot_$h.txt | tee -a $D/summary.txt
done
tar czf $OUT/call6.tar.gz -C $OUT c6
