# Call 3: the pipelined pageable download with the rows as 32-bit values and streaming
# stores (the best of call 2), by host copy threads (8 to 20 on the machine's 16) and
# chunk (512 KiB to 2 MiB); the build of call 2, two rounds over the settings.
D=$OUT/c3; . bench/results/h200-v30-runs/common.sh
NN=SIEVE_CUDA_NARROW=1,SIEVE_CUDA_NTCOPY=1
cfg=(base:X=1 t8:$NN t12:$NN,SIEVE_CUDA_COPY_THREADS=12 t15:$NN,SIEVE_CUDA_COPY_THREADS=15
     t16:$NN,SIEVE_CUDA_COPY_THREADS=16 t20:$NN,SIEVE_CUDA_COPY_THREADS=20
     t15c512:$NN,SIEVE_CUDA_COPY_THREADS=15,SIEVE_CUDA_DLCHUNK=512
     t15c2048:$NN,SIEVE_CUDA_COPY_THREADS=15,SIEVE_CUDA_DLCHUNK=2048)
echo "--- 1M ($(date -u +%T))"
for r in 1 2; do for c in "${cfg[@]}"; do
  IFS=: read l e <<< "$c"; run m_${l}_$r "${e//,/ }" --n 1m --batch 16,64,128,1024 --k 8192,16384
done; done
echo "--- 5M ($(date -u +%T))"
for r in 1 2; do for c in "${cfg[@]}"; do
  IFS=: read l e <<< "$c"; run f_${l}_$r "${e//,/ }" --n 5m --batch 128,1024 --k 8192
done; done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
