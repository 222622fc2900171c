# Device call 6: v5 (v3 with the gate's admissions staged per warpgroup in shared memory and
# flushed with one global atomic, and the select sorting 32 + b bits in 4,096 slots where
# the candidates fit) against v3 (gpu-base) at the target shape, b n n b; v5's suite,
# sanitizers (racecheck on the multi-token staging too), sweep, torch in the same call.
D=$OUT/c6; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-base || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build
T="attention --device cuda --keys 128k --queries 2048 --k 2048"
for r in b1:$B0 n1:$N n2:$N b2:$B0; do
  l=${r%%:*} b=${r#*:}
  timeout 100 $b/bench/sieve-bench $T --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "$l $(tail -1 $D/ab_$l.txt)" | tee -a $D/summary.txt
done
timeout 150 $N/tests/test_indexer_cuda --jobs 4 > $D/test_indexer_cuda.txt 2>&1; echo "indexer suite rc $?" | tee -a $D/summary.txt
tail -1 $D/test_indexer_cuda.txt >> $D/summary.txt
grep -E "FAIL|ssert" $D/test_indexer_cuda.txt | head -10 >> $D/summary.txt
timeout 60 $N/tests/test_kernels_indexer_cpu --jobs 8 > $D/test_indexer_cpu.txt 2>&1; echo "indexer cpu suite rc $?" | tee -a $D/summary.txt
timeout 150 $N/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 16k,64k,128k --queries 1,16,64,128,2048 --k 2048 > $D/attn_sweep.txt 2>&1; echo "sweep rc $?" | tee -a $D/summary.txt
cat $D/attn_sweep.txt >> $D/summary.txt
timeout 100 $N/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 128k --queries 2048 --k 1,64,512,4096 --repeat 5 > $D/attn_k.txt 2>&1; echo "k sweep rc $?" | tee -a $D/summary.txt
cat $D/attn_k.txt >> $D/summary.txt
timeout 150 python3 bench/torch_attention.py indexer --keys 128k --queries 1,64,2048 --k 2048 --repeat 5 --warmup 2 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v "^{" $D/torch.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/recovery_paths' > $D/racecheck2.txt 2>&1; echo "racecheck 2 rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck2.txt >> $D/summary.txt
tar czf $OUT/call6.tar.gz -C $OUT c6
