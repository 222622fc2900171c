# Call 2: which chained launches help (SIEVE_CUDA_PDL as a list of stages), 1M rows, against
# main (07de6ca), two rounds in alternating order, 40 timed calls a shape; then 5M, all
# chained against none. Everything lands in $OUT/call2.tar.gz.
D=$OUT/c2; . bench/results/h200-v24-runs/pdl/common.sh
echo "--- timing ($(date -u +%T))"
for r in 1 2; do
  for s in base:gpu-base:X=1 all:gpu:X=1 nosel:gpu:SIEVE_CUDA_PDL=sample,propose,gate \
           gate:gpu:SIEVE_CUDA_PDL=gate gatesel:gpu:SIEVE_CUDA_PDL=gate,select \
           front:gpu:SIEVE_CUDA_PDL=sample,propose off:gpu:SIEVE_CUDA_PDL=0; do
    IFS=: read l b e <<< "$s"
    run40 1m_${l}$r $b $e --n 1m --batch 1,16,64,128 --k 10,128,1024
  done
done
for s in off1:gpu:SIEVE_CUDA_PDL=0 all1:gpu:X=1 all2:gpu:X=1 off2:gpu:SIEVE_CUDA_PDL=0; do
  IFS=: read l b e <<< "$s"
  run40 5m_$l $b $e --n 5m --batch 1,16,64,128 --k 128
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $D
