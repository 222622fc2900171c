# Call 4: which block the speculative select should use: SIEVE_CUDA_SPECULATE=small (256
# threads, sorts up to 1024 kept candidates) against =large (1024 threads, up to 12288), and
# main, in the order main, small, large, large, small, main. Prints fused ms and, after a
# slash, 1 where the speculation missed. Everything lands in $OUT/call4.tar.gz.
D=$OUT/c4; . bench/results/h200-v23-runs/spec_select/common.sh
A1="--n 1m --batch 1,16,64,128 --k 10,128"
A2="--n 5m --batch 1,16,64,128 --k 10,128"
for s in base1:gpu-base:X=1 small1:gpu:SIEVE_CUDA_SPECULATE=small large1:gpu:SIEVE_CUDA_SPECULATE=large \
         large2:gpu:SIEVE_CUDA_SPECULATE=large small2:gpu:SIEVE_CUDA_SPECULATE=small base2:gpu-base:X=1; do
  IFS=: read -r l b e <<< "$s"
  run 1m_$l $b $e $A1
  run 1mpin_$l $b $e $A1 --results pinned
  run 5m_$l $b $e $A2
done
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
