# Call 7: the two hand-offs side by side: tma128x256h (bar.sync on both sides, one barrier
# per helper; with Euclid the helper also passes a barrier of its own per tile) and
# tma128x256ha (bar.arrive / bar.sync, full and empty barriers per parity), against
# tma128x256s. racecheck of h with Euclid and Dot; exactness of both; whole calls in the
# order s h ha ha h s s h ha; the GPU kernel suite.
D=$OUT/c7; . bench/results/h200-v26-runs/common.sh
S=SIEVE_CUDA_SCAN=tma128x256s A=SIEVE_CUDA_SCAN=tma128x256ha
echo "--- racecheck ($(date -u +%T))"
for m in Euclid Dot; do
  timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $SB knn --n 70000 --dim 96 \
    --batch 70,130 --k 1,100 --repeat 1 --warmup 0 --no-materialized --dtype float16 --metric $m \
    --rows-per-page 256 > $D/racecheck_$m.log 2>&1
  echo "racecheck $m rc $?: $(grep -E 'SUMMARY' $D/racecheck_$m.log)"
done
echo "--- exact ($(date -u +%T))"
exact h X=1 dups Euclid --n 300001 --dim 200 --batch 65,1024 --k 1,100,8192 --rows-per-page 256
exact ha $A dups Euclid --n 300001 --dim 200 --batch 65,1024 --k 1,100,8192 --rows-per-page 256
echo "--- timing ($(date -u +%T))"
for s in s1:$S h1:X=1 a1:$A a2:$A h2:X=1 s2:$S s3:$S h3:X=1 a3:$A; do
  IFS=: read l v <<< "$s"
  run 5m_$l $v --n 5m --batch 128,1024 --k 10,128,8192
done
echo "--- GPU suite ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -8
echo "--- done ($(date -u +%T))"
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
