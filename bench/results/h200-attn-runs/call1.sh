# Device call 1: the indexer top-k's GPU suite, sanitizers on its small cases, the k-NN suite
# (scan.cuh's primitives moved to prims.cuh), then sieve-bench attention beside torch.
D=$OUT/c1; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
B=.deps/gpu/build
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > $D/gpu.txt
timeout 240 $B/tests/test_indexer_cuda --jobs 4 --verbose=1 > $D/test_indexer_cuda.txt 2>&1; echo "indexer suite rc $?" | tee -a $D/summary.txt
tail -3 $D/test_indexer_cuda.txt | tee -a $D/summary.txt
timeout 60 $B/tests/test_kernels_indexer_cpu --jobs 8 > $D/test_indexer_cpu.txt 2>&1; echo "indexer cpu suite rc $?" | tee -a $D/summary.txt
timeout 200 $B/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 128k --queries 2048 --k 2048 > $D/attn_target.txt 2>&1; echo "bench target rc $?" | tee -a $D/summary.txt
cat $D/attn_target.txt | tee -a $D/summary.txt
timeout 200 $B/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 16k,64k,128k --queries 1,64,2048 --k 2048 > $D/attn_sweep.txt 2>&1; echo "bench sweep rc $?" | tee -a $D/summary.txt
cat $D/attn_sweep.txt >> $D/summary.txt
timeout 150 python3 bench/torch_attention.py indexer --keys 128k --queries 2048 --k 2048 --repeat 5 --warmup 2 --json $D/torch.json > $D/torch_target.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
cat $D/torch_target.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $B/tests/test_indexer_cuda --filter 'indexer_cuda/recovery_paths' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -2 $D/racecheck.txt >> $D/summary.txt
timeout 200 $B/tests/test_knn_cuda --jobs 4 > $D/test_knn_cuda.txt 2>&1; echo "knn suite rc $?" | tee -a $D/summary.txt
tail -2 $D/test_knn_cuda.txt >> $D/summary.txt
tar czf $OUT/call1.tar.gz -C $OUT c1
