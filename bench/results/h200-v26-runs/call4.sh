# Call 4: the pageable query upload (SIEVE_CUDA_QSTAGE experiment: one staging copy, the
# staging copy in 512 KiB pieces overlapped with the device copies, or the driver's own
# pageable copy), whole calls alternating, 5M and 1M float16 pageable; sample_ms holds the
# upload, the query preparation and the sample.
D=$OUT/c4; . bench/results/h200-v26-runs/common.sh
exact chunks SIEVE_CUDA_QSTAGE=chunks normal Dot --n 300001 --dim 200 --batch 200,1024 --k 10,1000 --rows-per-page 256
exact driver SIEVE_CUDA_QSTAGE=driver normal Dot --n 300001 --dim 200 --batch 200,1024 --k 10,1000 --rows-per-page 256
for r in a b; do
  for m in copy chunks driver; do
    run ${m}_$r SIEVE_CUDA_QSTAGE=$m --n 5m,1m --batch 128,1024 --k 10,128
    python3 -c '
import json,sys
print("   sample_ms:", " | ".join("%d/%d/%d %.3f" % (r["n"]//1000000, r["batch"], r["k"], r["sample_ms"]) for r in map(json.loads, open(sys.argv[1]))))' $D/t_${m}_$r.json
  done
done
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
