# Call 7: one eligible-row count (one wait) where masks are set, and no deleted bitmap from
# the device page cache when nothing is deleted (main at 0929834, .deps/gpu.tar.xz), against
# 07de6ca (.deps/gpu-base.tar.xz, before the chained launches): the GPU kernel suite, the
# device page cache suite, the server suite on the GPU; then the server end to end on one
# data directory (1M x 768 float16 created over HTTP, limit 10, 1 and 64 clients, 4 s a
# level): main, base, main with SIEVE_CUDA_PDL=0, main. Everything in $OUT/call7.tar.gz.
D=$OUT/c7; . bench/results/h200-v23-runs/spec_select/common.sh
echo "--- GPU suites ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -4
timeout 60 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "devcache rc $?"; tail -1 $D/test_devcache.log
SIEVE_BUILD_DIR=$PWD/.deps/gpu/build SIEVE_TEST_DEVICE=cuda:0 timeout 90 .deps/gpu/build/tests/test_server \
  --jobs 4 --verbose=0 > $D/test_server_gpu.log 2>&1
echo "server rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_server_gpu.log | tail -2
echo "--- end to end ($(date -u +%T))"
data=$(mktemp -d /tmp/sieve-e2e.XXXXXX); first=1
for s in new:gpu:X=1 base:gpu-base:X=1 new_nopdl:gpu:SIEVE_CUDA_PDL=0 new2:gpu:X=1; do
  IFS=: read l b e <<< "$s"
  env $e LD_LIBRARY_PATH=.deps/$b/lib .deps/$b/build/server/sieve-server --port 6399 --data-dir "$data" \
    --device cuda:0 --threads 16 --batch-max 256 --batch-workers 2 > $D/server_$l.log 2>&1 &
  spid=$!
  for i in $(seq 1 100); do
    python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:6399/readyz', timeout=1)" 2>/dev/null && break
    sleep 0.2
  done
  if [ $first -eq 1 ]; then
    .deps/gpu/build/bench/sieve-loadgen --url http://127.0.0.1:6399 --create 1000000 --dim 768 \
      --distance Dot --datatype float16 --upload-clients 12 --upload-batch 2000 --clients 1 \
      --duration 1 --warmup 1 > $D/create.log 2>&1; tail -c 300 $D/create.log; echo; first=0
  fi
  .deps/gpu/build/bench/sieve-loadgen --url http://127.0.0.1:6399 --clients 1,64 --duration 4 \
    --warmup 1 --limit 10 > $D/loadgen_$l.log 2>&1
  echo "$l:"; grep -E "^\| +(1|64) \|" $D/loadgen_$l.log
  python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:6399/metrics').read().decode())" > $D/metrics_$l.txt
  grep -E "^sieve_search_launches_chained_total|^sieve_batch_size_(sum|count)" $D/metrics_$l.txt | tr '\n' ' '; echo
  kill -TERM $spid; wait $spid
done
rm -rf "$data"
echo "--- done ($(date -u +%T))"
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
