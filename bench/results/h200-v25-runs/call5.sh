# Call 5: as call 4 with the two data sets added after it (float32 duplicates, bfloat16 Cosine ties):
# REST answers of sieve-server against numpy full sorts on adversarial data (normal, ties,
# duplicates, sorted, outlier, narrow band; float16, bfloat16, float32; Dot, Euclid,
# Cosine; limits 1 to 16384, filters, deletes), server on the GPU at 1,000,000 x 128 and
# 100,000 x 768. Everything lands in
# $OUT/call5.tar.gz.
D=$OUT/c5; . bench/results/h200-v22-runs/common.sh; mkdir -p $D
python3 -c 'import numpy; print("numpy", numpy.__version__)'
lscpu | grep -E "Model name|Flags" | cut -c1-200 > $D/cpu.txt
for spec in cuda:0:1000000:128:330 cuda:0:100000:768:150; do
  IFS=: read dev idx n dim lim <<< "$spec"
  [ "$idx" != - ] && dev=$dev:$idx
  echo "--- test_rest_exact on $dev, $n x $dim ($(date -u +%T))"
  SIEVE_BUILD_DIR=$PWD/.deps/gpu/build SIEVE_TEST_DEVICE=$dev timeout $lim python3 tests/python/test_rest_exact.py \
    --n $n --dim $dim > $D/rest_exact_${dev/:/}_${n}x${dim}.log 2>&1
  echo "rc $?"; tail -9 $D/rest_exact_${dev/:/}_${n}x${dim}.log
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call5.tar.gz -C $OUT c5 && rm -rf $D
