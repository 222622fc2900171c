# Call 8: the final build (main's kernels with the bar.sync hand-off only): racecheck and
# memcheck of the 128-query tile (Euclid, Dot), exactness, the GPU kernel suite.
D=$OUT/c8; . bench/results/h200-v26-runs/common.sh
for tool in racecheck memcheck; do
  for m in Euclid Dot; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 $SB knn --n 70000 --dim 96 \
      --batch 70,130 --k 1,100 --repeat 1 --warmup 0 --no-materialized --dtype float16 --metric $m \
      --rows-per-page 256 > $D/${tool}_$m.log 2>&1
    echo "$tool $m rc $?: $(grep -E 'SUMMARY' $D/${tool}_$m.log)"
  done
done
exact dups X=1 dups Euclid --n 300001 --dim 200 --batch 65,1024 --k 1,100,8192 --rows-per-page 256
exact ties X=1 ties Dot --n 300001 --dim 200 --batch 65,1024 --k 1,100,8192 --rows-per-page 256
timeout 150 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "suite rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -4
tar czf $OUT/call8.tar.gz -C $OUT c8 && rm -rf $D
