# Call 6: the helpers' hand-off with bar.sync on both sides (one barrier per helper, no
# bar.arrive), so racecheck can follow it. Exactness against the materialized path;
# racecheck and memcheck of the 128-query tile (B = 70 and 130); whole calls alternating
# tma128x256s and the default tma128x256h; the GPU kernel suite.
D=$OUT/c6; . bench/results/h200-v26-runs/common.sh
S=SIEVE_CUDA_SCAN=tma128x256s
echo "--- exact ($(date -u +%T))"
for d in normal:Dot ties:Dot band:Cosine dups:Euclid; do
  IFS=: read dd m <<< "$d"
  exact $dd X=1 $dd $m --n 300001 --dim 200 --batch 65,200,1024 --k 1,100,1000,8192 --rows-per-page 256
done
echo "--- racecheck, memcheck ($(date -u +%T))"
for tool in racecheck memcheck; do
  for m in Euclid Dot; do
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 $SB knn --n 70000 --dim 96 \
      --batch 70,130 --k 1,100 --repeat 1 --warmup 0 --no-materialized --dtype float16 --metric $m \
      --rows-per-page 256 > $D/${tool}_$m.log 2>&1
    echo "$tool $m rc $?: $(grep -E 'SUMMARY' $D/${tool}_$m.log)"
  done
done
echo "--- timing ($(date -u +%T))"
for s in s1:$S h1:X=1 h2:X=1 s2:$S s3:$S h3:X=1; do
  IFS=: read l v <<< "$s"
  run 5m_$l $v --n 5m --batch 128,1024 --k 10,128,8192
done
echo "--- GPU suite ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -8
echo "--- done ($(date -u +%T))"
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $D
