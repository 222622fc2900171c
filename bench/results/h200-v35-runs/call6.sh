# Call 6: n = main with the group-maxima fast path over a cluster (every block copies all
# blocks' group maxima, finds the same threshold and adds its keys at or above it to the
# first block's, which runs the radix passes alone: two cluster barriers and the last in
# place of six) and one block syncing as a block; b = main at 44504b8 (18166dd's kernels).
# The sample selection test; GPU kernel suite; exactness; kernel durations of the propose
# step; ab b n n b at 1M B = 1-33 and 5M.
D=$OUT/c6; . bench/results/h200-v35-runs/common.sh
echo "--- warm-up ($(date -u +%T))"
run warm X=1 --n 1m --batch 16 --k 10
echo "--- tests ($(date -u +%T))"
timeout 120 .deps/gpu/build/tests/test_knn_cuda -j1 --verbose --filter "knn_cuda/sample_selection_matches_a_sort" > $D/test_sample_selection.log 2>&1
echo "sample_selection rc $?: $(tail -1 $D/test_sample_selection.log)"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- exact ($(date -u +%T))"
exact 1m X=1 normal Dot --n 1m --batch 1,7,16,33,34 --k 1,10,128,1024,8192
exact 1m_ties X=1 ties Cosine --n 1m --dtype bfloat16 --batch 1,16 --k 10,1024
exact 5m X=1 normal Euclid --n 5m --batch 1,16 --k 10,4096 --results pinned
exact 1m_band X=1 band Dot --n 1m --batch 3,20 --k 1,128
echo "--- kernel durations ($(date -u +%T))"
for B in 1 16 32; do
  SB=$SBB kdur b_b${B} X=1 --n 1m --batch $B --k 128
  kdur n_b${B} X=1 --n 1m --batch $B --k 128
done
echo "--- A/B ($(date -u +%T))"
ab m --n 1m --batch 1,8,16,32 --k 10,128,1024
ab m2 --n 1m --batch 1,8,16,32 --k 10,128,1024
ab fp --n 5m --batch 1,16,32 --k 10,128 --results pinned
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
echo "--- sanitizers ($(date -u +%T))"
SA="knn --n 70000 --dim 96 --batch 1,5 --k 10,300 --repeat 1 --warmup 0 --dtype float16 --metric Euclid --rows-per-page 256 --no-materialized"
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 3 $SB $SA > $D/sanitize_memcheck.log 2>&1
echo "memcheck rc $?: $(tail -1 $D/sanitize_memcheck.log)"
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $SB $SA > $D/sanitize_racecheck.log 2>&1
echo "racecheck rc $?: $(tail -1 $D/sanitize_racecheck.log)"
echo "--- done ($(date -u +%T))"
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $D
