# Call 4: where the fixed cost of a search at B = 16-128 goes. Whole calls at 1M and 5M rows
# (B = 1, 16, 64, 128; k = 10, 128) put about 0.05 ms (B = 1) to 0.15 ms (B = 128) into
# the scan phase that does not scale with N (sweep of call 3). Each kernel's duration
# (Nsight Compute, serialised launches) at both sizes; the build of call 1.
D=$OUT/c4; . bench/results/h200-v31-runs/common.sh
echo "--- kdur ($(date -u +%T))"
for n in 1m 5m; do for b in 1 16 64 128; do
  kdur ${n}_b${b}_k128 X=1 --n $n --batch $b --k 128
done; done
kdur 1m_b64_k10 X=1 --n 1m --batch 64 --k 10
echo "--- runs ($(date -u +%T))"
run m X=1 --n 1m --batch 1,16,64,128 --k 10,128
run f X=1 --n 5m --batch 1,16,64,128 --k 10,128
echo "--- done ($(date -u +%T))"
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
