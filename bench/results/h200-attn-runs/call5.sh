# Device call 5: v4 (the heads' sum as a second wgmma on the relu'd, bfloat16-rounded dots)
# against v3 (gpu-base) at the target shape: b n2 n1 n1 n2 b (n2: two CTAs an SM, 128
# registers, the wgmma groups serialized by ptxas; n1: one CTA an SM); v4's suite (both
# forms), memcheck, racecheck, sweep, torch in the same call.
D=$OUT/c5; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-base || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build
T="attention --device cuda --keys 128k --queries 2048 --k 2048"
for r in b1:$B0:2 n2a:$N:2 n1a:$N:1 n1b:$N:1 n2b:$N:2 b2:$B0:2; do
  IFS=: read l b m <<< "$r"
  SIEVE_CUDA_IX_MINB=$m timeout 100 $b/bench/sieve-bench $T --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "$l $(tail -1 $D/ab_$l.txt)" | tee -a $D/summary.txt
done
timeout 150 $N/tests/test_indexer_cuda --jobs 4 > $D/test_indexer_cuda.txt 2>&1; echo "indexer suite (minb 2) rc $?" | tee -a $D/summary.txt
tail -1 $D/test_indexer_cuda.txt >> $D/summary.txt
grep -E "FAIL|Assert|assert" $D/test_indexer_cuda.txt | head -10 >> $D/summary.txt
SIEVE_CUDA_IX_MINB=1 timeout 150 $N/tests/test_indexer_cuda --jobs 4 > $D/test_indexer_cuda_m1.txt 2>&1; echo "indexer suite (minb 1) rc $?" | tee -a $D/summary.txt
tail -1 $D/test_indexer_cuda_m1.txt >> $D/summary.txt
timeout 150 $N/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 16k,64k,128k --queries 1,16,64,128,2048 --k 2048 > $D/attn_sweep.txt 2>&1; echo "sweep rc $?" | tee -a $D/summary.txt
cat $D/attn_sweep.txt >> $D/summary.txt
timeout 150 python3 bench/torch_attention.py indexer --keys 128k --queries 1,64,2048 --k 2048 --repeat 5 --warmup 2 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v "^{" $D/torch.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/recovery_paths' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
tar czf $OUT/call5.tar.gz -C $OUT c5
