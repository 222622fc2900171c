# Call 6: the speculative select with the block rule of 7911f94, before call 7's exclusion of
# the pipelined download (.deps/gpu.tar.xz; main in .deps/gpu-base.tar.xz):
# the sweep beside torch and the end-to-end run (bench/gpu/validate.sh perf), then whole
# calls in the order main, branch, branch, main at 1M (pageable and pinned), 5M and 8.8M rows.
bench/gpu/validate.sh perf
D=$OUT/c6; . bench/results/h200-v23-runs/spec_select/common.sh
for s in base1:gpu-base spec1:gpu spec2:gpu base2:gpu-base; do
  run 1m_${s%%:*} ${s#*:} X=1 --n 1m --batch 1,16,64,128 --k 10,128,1024,8192
  run 1mpin_${s%%:*} ${s#*:} X=1 --n 1m --batch 1,16,64,128 --k 10,128,1024,8192 --results pinned
  run 5m_${s%%:*} ${s#*:} X=1 --n 5m --batch 1,16,64,128 --k 10,128,1024,8192
  run 88m_${s%%:*} ${s#*:} X=1 --n 8841823 --batch 1,64 --k 10,128
done
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $D
