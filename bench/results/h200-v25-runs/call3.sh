# Call 3: branch next/pipe, second form (every K chunk of the TMA tiles issued as NP wgmma
# of WN / NP columns per k16 step; the tile's last chunk committed one group per part, and
# each part's row maxima computed as soon as it has completed, while the later parts are
# still in the tensor cores; SIEVE_CUDA_PIPE=0|2|4, 0 by default, the 64-query tiles take
# 2 for 4). The GPU kernel suite with PIPE=4; exactness against the materialized path with
# PIPE=2 on adversarial data; whole calls PIPE 0 / 2 / 4 / 4 / 2 / 0 (20 timed calls a
# shape). Everything lands in $OUT/call3.tar.gz.
D=$OUT/c3; . bench/results/h200-v23-runs/spec_select/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $D/gpu.txt 2>&1
echo "--- GPU suite, PIPE=4 ($(date -u +%T))"
SIEVE_CUDA_PIPE=4 timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda_pipe4.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda_pipe4.log | tail -6
echo "--- exactness, PIPE=2 ($(date -u +%T))"
for d in normal:Dot ties:Dot band:Cosine dups:Euclid sorted_desc:Euclid outlier:Dot; do
  IFS=: read dd m <<< "$d"
  SIEVE_CUDA_PIPE=2 timeout 60 $SB knn --n 300001 --dim 200 --batch 1,16,64,65,200 --k 1,100,1000 --data $dd --metric $m \
    --repeat 1 --warmup 0 --mat-repeat 1 --rows-per-page 256 > $D/exact_$dd.log 2>&1
  echo "$dd/$m rc $?: $(grep -cE ' yes ' $D/exact_$dd.log) yes, $(grep -c MISMATCH $D/exact_$dd.log) MISMATCH"
done
echo "--- timing ($(date -u +%T))"
for s in p0a:0 p2a:2 p4a:4 p4b:4 p2b:2 p0b:0; do
  IFS=: read l v <<< "$s"
  run 5m_$l gpu SIEVE_CUDA_PIPE=$v --n 5m --batch 16,64,128,1024 --k 10,128,1024,8192
done
for s in p0a:0 p2a:2 p4a:4 p0b:0 p2b:2 p4b:4; do
  IFS=: read l v <<< "$s"
  run 1m_$l gpu SIEVE_CUDA_PIPE=$v --n 1m --batch 1,64,128,1024 --k 10,128,1024
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
