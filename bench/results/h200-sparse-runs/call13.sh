# Device call 13: the indexer and k-NN GPU suites on the final build (indexer.cu's timing
# events now the shared sieve__cuda_events of cuda_common.cuh; host code), and the indexer
# at the target shape.
D=$OUT/c13; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
timeout 150 $N/tests/test_indexer_cuda --jobs 4 --verbose=1 > $D/test_indexer_cuda.txt 2>&1; echo "test_indexer_cuda rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_indexer_cuda.txt | head -6 | tee -a $D/summary.txt
timeout 60 $N/bench/sieve-bench attention --device cuda --keys 128k --queries 2048 --k 2048 --repeat 5 --mat-repeat 2 > $D/indexer.txt 2>&1; echo "indexer bench rc $?" >> $D/summary.txt; tail -1 $D/indexer.txt >> $D/summary.txt
timeout 90 $N/tests/test_knn_cuda --jobs 4 --verbose=1 > $D/test_knn_cuda.txt 2>&1; echo "test_knn_cuda rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_knn_cuda.txt | head -6 | tee -a $D/summary.txt
