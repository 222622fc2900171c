# Call 9: 5M rows B = 1024 at k = 10 and 128 only (call 8: 14.67-14.89 ms for main's
# build against 15.09-15.25 for this one at k = 128; in call 4 the other way round):
# b n n b twice, pageable and pinned.
D=$OUT/c9; . bench/results/h200-v30-runs/common.sh
echo "--- A/B ($(date -u +%T))"
for r in 1 2; do
  ab f${r}_pg --n 5m --batch 1024 --k 10,128
  ab f${r}_pin --n 5m --batch 1024 --k 10,128 --results pinned
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call9.tar.gz -C $OUT c9 && rm -rf $D
