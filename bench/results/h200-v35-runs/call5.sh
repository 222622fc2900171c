# Call 5: main at faa18cb with a new case in the sample selection test (40 lists, the
# automatic choice of one block a list). The test; chaining every launch at 16-128 queries
# (SIEVE_CUDA_PDL=1, a) against the default (none above 8 queries, b), a b b a twice;
# Nsight Compute full set with source counters of the propose step at 1M B = 1 (clusters
# of 8) and B = 64 (one block a query) and of the select at B = 16 k = 10.
D=$OUT/c5; . bench/results/h200-v35-runs/common.sh
echo "--- test ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda -j1 --verbose --filter "knn_cuda/sample_selection_matches_a_sort" > $D/test_sample_selection.log 2>&1
echo "sample_selection rc $?: $(tail -1 $D/test_sample_selection.log)"
echo "--- abv ($(date -u +%T))"
abv pdl SIEVE_CUDA_PDL=1 X=1 --n 1m --batch 16,32,64,128 --k 10,128
abv pdl2 SIEVE_CUDA_PDL=1 X=1 --n 1m --batch 16,32,64,128 --k 10,128
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
echo "--- ncu ($(date -u +%T))"
prof() {
  local r=$D/prof_$1 kn=$2; shift 2
  timeout 120 $NCU --set full --import-source yes --kernel-name regex:"$kn" \
    --launch-skip 1 --launch-count 1 --clock-control none -f -o $r \
    $SB knn "$@" --repeat 2 --warmup 1 --no-materialized > ${r}_run.log 2>&1
  echo "$r rc $?"
  $NCU -i $r.ncu-rep --page details > $r.txt 2>&1
  $NCU -i $r.ncu-rep --page source --csv --print-source sass > ${r}_sass.csv 2>&1
  gzip -9 ${r}_sass.csv
  grep -iE "^ +(Duration|Elapsed Cycles|SM Frequency|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Achieved Occupancy)" $r.txt | head -8
  rm -f $r.ncu-rep
}
prof propose_b1 propose --n 1m --batch 1 --k 128
prof propose_b64 propose --n 1m --batch 64 --k 128
prof select_b16 select_block --n 1m --batch 16 --k 10
echo "--- done ($(date -u +%T))"
tar czf $OUT/call5.tar.gz -C $OUT c5 && rm -rf $D
