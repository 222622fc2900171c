# Call 7: is 1M B = 256 k = 1024 slower with the host copies in 64 KiB pieces (call 5:
# +5.5%, call 4: +1.2%)? n = main (1f05d25), b = 79857d9 (before the host-copy change);
# ab b n n b twice, pageable, batches around 256 and k whose results take the pipelined
# download on the pool of 8 (2-16 MiB) or stay staged.
D=$OUT/c7; . bench/results/h200-v33-runs/common.sh
for r in 1 2; do
  echo "--- round $r ($(date -u +%T))"
  ab m$r --n 1m --batch 128,192,256,320 --k 512,1024,2048
  ab f$r --n 5m --batch 256 --k 512,1024,2048
done
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
