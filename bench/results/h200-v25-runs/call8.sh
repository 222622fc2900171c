# Call 8: branch next/drain (the staged TMA tiles hand their admissions to the producer
# warpgroup's idle warps 1-3 instead of completing them on the consumer warps a tile
# later; switch SIEVE_CUDA_HELP, off by default). The GPU kernel suite with HELP on (cut at
# 170 s: a deadlock would show as a cut); exactness against the materialized path with HELP
# on; whole calls HELP 0 / 1 / 1 / 0 at 5M. Everything lands in $OUT/call8.tar.gz.
D=$OUT/c8; . bench/results/h200-v23-runs/spec_select/common.sh
echo "--- GPU suite, HELP=1 ($(date -u +%T))"
SIEVE_CUDA_HELP=1 timeout 170 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda_help.log 2>&1
rc=$?; echo "rc $rc"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda_help.log | tail -6
echo "--- exactness, HELP=1 ($(date -u +%T))"
for d in normal:Dot ties:Dot band:Cosine dups:Euclid; do
  IFS=: read dd m <<< "$d"
  SIEVE_CUDA_HELP=1 timeout 40 $SB knn --n 300001 --dim 200 --batch 17,64,65,200 --k 1,100,1000,8192 --data $dd --metric $m \
    --repeat 1 --warmup 0 --mat-repeat 1 --rows-per-page 256 > $D/exact_$dd.log 2>&1
  echo "$dd/$m rc $?: $(grep -cE ' yes ' $D/exact_$dd.log) yes, $(grep -c MISMATCH $D/exact_$dd.log) MISMATCH"
done
echo "--- timing ($(date -u +%T))"
for s in h0a:0 h1a:1 h1b:1 h0b:0; do
  IFS=: read l v <<< "$s"
  run 5m_$l gpu SIEVE_CUDA_HELP=$v --n 5m --batch 64,128,1024 --k 128,8192
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call8.tar.gz -C $OUT c8 && rm -rf $D
