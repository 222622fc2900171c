# Call 6: does a larger sample pay at small r = k S / N? At 1M rows and k = 128 the default
# 16384-row sample has r = 2.1, the proposed boundary sits at sample rank 8 (about 3.8 k
# rows above it) and more than half the warp tiles of the 64-query scan take the per-key
# path (call 4: the 1M B = 64 scan 417 us at k = 128, 366 at k = 10). --sample-rows 16384
# (the default here), 32768, 65536, 131072, two rounds in opposite orders, pageable; each
# kernel's duration at 65536; the build of call 1.
D=$OUT/c6; . bench/results/h200-v31-runs/common.sh
echo "--- runs ($(date -u +%T))"
for s in 16384 32768 65536 131072 131072 65536 32768 16384; do
  i=1; [ -f $D/t_m_s${s}_1.json ] && i=2
  run m_s${s}_$i X=1 --sample-rows $s --n 1m --batch 16,64,128 --k 10,128,1024
  run f_s${s}_$i X=1 --sample-rows $s --n 5m --batch 16,64,128 --k 128,1024
done
echo "--- kdur ($(date -u +%T))"
for s in 16384 65536; do
  kdur 1m_b64_k128_s$s X=1 --sample-rows $s --n 1m --batch 64 --k 128
  kdur 1m_b128_k128_s$s X=1 --sample-rows $s --n 1m --batch 128 --k 128
  kdur 5m_b64_k128_s$s X=1 --sample-rows $s --n 5m --batch 64 --k 128
done
echo "--- admitted per query ($(date -u +%T))"
for f in $D/t_*_1.json; do python3 - $f <<'PY'
import json, sys, os
print(os.path.basename(sys.argv[1]), " | ".join("%d/%d %.0f" % (r["batch"], r["k"], r["admitted_per_query"]) for r in map(json.loads, open(sys.argv[1]))))
PY
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $D
