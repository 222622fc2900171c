# Call 10: the staged admissions' tightening by a whole warp (tighten_warp: one round trip
# for the histogram instead of up to 16; the candidate build, not on main yet) against main
# (gpu-base: 6f8d57a, the same kernels as a6ce667; results pinned, so the host copies the
# two builds differ in do not run). GPU kernel suite; exactness against the materialized
# path at the staged shapes; A/B b n n b.
D=$OUT/c10; . bench/results/h200-v31-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 240 .deps/gpu/build/tests/test_knn_cuda -j1 --verbose=0 > $D/test_knn_cuda.log 2>&1
tail -1 $D/test_knn_cuda.log
echo "--- exact ($(date -u +%T))"
for dd in normal ties band dups; do
  m=Dot; [ $dd = band ] && m=Cosine; [ $dd = dups ] && m=Euclid
  exact 1m_$dd X=1 $dd $m --n 1m --batch 16,64,128,1024 --k 1,128,1024,8192
done
exact 5m_normal X=1 normal Dot --n 5m --batch 64,128 --k 128,8192
echo "--- A/B, pinned ($(date -u +%T))"
ab m --results pinned --n 1m --batch 16,64,128,1024 --k 10,128,1024,8192
ab f --results pinned --n 5m --batch 16,64,128,1024 --k 128,1024,8192
ab h --results pinned --n 8841823 --batch 64,128 --k 128,8192
echo "--- done ($(date -u +%T))"
tar czf $OUT/call10.tar.gz -C $OUT c10 && rm -rf $D
