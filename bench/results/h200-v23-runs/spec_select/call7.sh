# Call 7: the final speculative select (no speculation where the results take the pipelined
# download): the GPU kernel suite, then whole calls in the order main, branch, branch, main.
# Everything lands in $OUT/call7.tar.gz.
D=$OUT/c7; . bench/results/h200-v23-runs/spec_select/common.sh
gpu_suite
echo "--- timing ($(date -u +%T))"
for s in base1:gpu-base spec1:gpu spec2:gpu base2:gpu-base; do
  run 1m_${s%%:*} ${s#*:} X=1 --n 1m --batch 1,16,64,128 --k 10,128,1024,8192
  run 5m_${s%%:*} ${s#*:} X=1 --n 5m --batch 1,16,64,128 --k 10,128,1024,8192
  run 5mpin_${s%%:*} ${s#*:} X=1 --n 5m --batch 1,16,64,128 --k 128,8192 --results pinned
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
