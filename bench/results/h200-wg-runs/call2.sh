# Device call 2: the wgmma kernel's second form (writer-side arrivals a tile ahead, the
# tensor cores in turns between the warpgroups, S of tile i beside P V of tile i - 1, two
# P register sets). Timings first (mma against the default choice, alternating), then the
# GPU suites (verbose, so a time limit shows the test it cut).
D=$OUT/c2; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for k in mma auto mma auto; do
  SIEVE_CUDA_ATTN_KERNEL=$k timeout 60 $N/bench/sieve-bench attention prefill --device cuda --seq 128k --block 128 --sink 2 --window 4 --repeat 3 --warmup 1 --check-tokens 4 --json $D/prefill_$k.json >> $D/prefill_$k.txt 2>&1; echo "prefill $k rc $?" | tee -a $D/summary.txt
  tail -1 $D/prefill_$k.txt >> $D/summary.txt
done
for k in mma auto; do
  SIEVE_CUDA_ATTN_KERNEL=$k timeout 60 $N/bench/sieve-bench attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$k.json > $D/dense_$k.txt 2>&1; echo "dense $k rc $?" | tee -a $D/summary.txt
  tail -3 $D/dense_$k.txt >> $D/summary.txt
done
for t in test_attention_cuda test_block_sparse_cuda; do
  timeout 200 $N/tests/$t -j8 --verbose > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash" $D/$t.txt | head -8 >> $D/summary.txt
done
tar czf $OUT/call2.tar.gz -C $OUT c2
