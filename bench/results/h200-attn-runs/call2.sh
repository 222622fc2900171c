# Device call 2: the scan kernel v2 (resident query tile, key ring, reduce-scatter epilogue):
# the GPU suite, sanitizers, sieve-bench attention beside torch in the same call.
D=$OUT/c2; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
B=.deps/gpu/build
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
timeout 200 $B/tests/test_indexer_cuda --jobs 4 --verbose=1 > $D/test_indexer_cuda.txt 2>&1; echo "indexer suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|Synthesis" $D/test_indexer_cuda.txt | head -20 | tee -a $D/summary.txt
A="$B/bench/sieve-bench attention --device cuda --json $D/attn.json"
timeout 100 $A --keys 128k --queries 2048 --k 2048 > $D/attn_target.txt 2>&1; echo "bench target rc $?" | tee -a $D/summary.txt
cat $D/attn_target.txt | tee -a $D/summary.txt
timeout 150 $A --keys 16k,64k,128k --queries 1,16,64,128,2048 --k 2048 > $D/attn_sweep.txt 2>&1; echo "bench sweep rc $?" | tee -a $D/summary.txt
cat $D/attn_sweep.txt >> $D/summary.txt
timeout 150 python3 bench/torch_attention.py indexer --keys 128k --queries 1,64,2048 --k 2048 --repeat 5 --warmup 2 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v "^{" $D/torch.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $B/tests/test_indexer_cuda --filter 'indexer_cuda/recovery_paths' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
tar czf $OUT/call2.tar.gz -C $OUT c2
