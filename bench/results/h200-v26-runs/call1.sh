# Call 1: the 128-query staged tile with its staged entries completed by the producer
# warpgroup's idle warps through named barriers (tma128x256h, the default above 64 queries
# in this build). Exactness against the materialized path, then whole calls alternating
# tma128x256s (the previous default, SIEVE_CUDA_SCAN) and the new default at 5M float16,
# then the GPU kernel suite, more data sets, memcheck and racecheck.
D=$OUT/c1; . bench/results/h200-v26-runs/common.sh
H=SIEVE_CUDA_SCAN=tma128x256h S=SIEVE_CUDA_SCAN=tma128x256s
echo "--- exact ($(date -u +%T))"
exact normal X=1 normal Dot --n 300001 --dim 200 --batch 65,200,1024 --k 1,100,1000,8192 --rows-per-page 256
echo "--- timing ($(date -u +%T))"
for s in s1:$S h1:X=1 h2:X=1 s2:$S s3:$S h3:X=1; do
  IFS=: read l v <<< "$s"
  run 5m_$l $v --n 5m --batch 128,512,1024 --k 10,128,8192
done
echo "--- GPU suite ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -8
echo "--- exact, more data ($(date -u +%T))"
exact ties X=1 ties Dot --n 300001 --dim 200 --batch 65,1024 --k 1,100,8192 --rows-per-page 256
exact band X=1 band Cosine --n 300001 --dim 200 --batch 65,1024 --k 1,100,8192 --rows-per-page 256
exact dups X=1 dups Euclid --n 300001 --dim 200 --batch 65,1024 --k 1,100,8192 --rows-per-page 256
echo "--- sanitizers ($(date -u +%T))"
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 $SB knn --n 70000 --dim 96 \
    --batch 70,130 --k 1,100 --repeat 1 --warmup 0 --mat-repeat 1 --dtype float16 --metric Euclid \
    --rows-per-page 256 > $D/$tool.log 2>&1
  echo "$tool rc $?"; tail -3 $D/$tool.log
done
echo "--- done ($(date -u +%T))"
