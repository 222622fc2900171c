#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) from the repository root, with the bundle
# from bench/gpu/bundle.sh carried in .deps/gpu. Writes logs and JSON under $OUT (or ./out).
# usage: bench/gpu/run.sh STAGE...
#   info      GPU, driver, OS
#   test      GPU kernel suite, device page cache suite, the indexer top-k's, grouped sparse
#             attention's, dense causal attention's and block-sparse prefill's suites
#   attention sieve-bench attention (the indexer top-k: $ATTN_ARGS, default the targets.md shape
#             and a sweep of L and T) beside torch_attention.py indexer in the same call, and
#             bench/report_attention.py's table and plots of both; then sieve-bench attention
#             sparse (grouped vs per-query sparse attention: $SPARSE_ARGS, default the GQA 32/8
#             shape at 128K keys over a sweep of overlap and group), sieve-bench attention dense
#             beside torch_attention.py dense (flash, cuDNN) at $DENSE_SEQ (default 8k,32k,128k),
#             and sieve-bench attention prefill (block-sparse prefill with mean correction, GQA
#             32/8, head dim 128, bf16, alpha 0.1) at $PREFILL_SEQ (default 32k,128k, lengths the
#             torch dense lines cover) beside them in the same report
#   server    the server black-box suite with the server on the GPU
#   rest      tests/python/test_rest_exact.py with the server on the GPU ($REST_ARGS, default
#             --n 300000 --dim 128, about a minute; --n 1000000 took 2 minutes): REST answers
#             against numpy full sorts on adversarial data
#   sanitize  compute-sanitizer memcheck and racecheck on small shapes (B = 1, 40 and 70: the
#             64-query TMA tile, the staged 64-query and 128-query tiles)
#   bench     sieve-bench knn ($BENCH_ARGS; cut after $BENCH_TIMEOUT s, default 400, so a hung
#             kernel does not take the whole device call)
#   variants  sieve-bench knn for each scan variant in $VARIANTS ($VARIANT_ARGS), timing only
#             (each cut after $BENCH_TIMEOUT s)
#   profile   Nsight Compute sections of one scan launch per $PROFILE_SHAPES entry (B:variant), and
#             SM clock / power while the B=64 scan runs for a few seconds
#   stalls    Nsight Compute full set with source counters of the fused scan at 5M, k=128, for
#             each B in $STALL_BATCHES (default "1 64"): the report ($OUT/stalls_B<B>.ncu-rep),
#             the warp-state and source-counter sections as text, and per-SASS-line samples (CSV)
#   ingest    sieve ingest --data-dir of 1M x 768 float32 (.fbin from sieve-datagen), twice, each
#             after a dd of 3 GB with conv=fsync on the same disk
#   torch     PyTorch matmul + topk baseline ($TORCH_ARGS)
#   ceilings  copy bandwidth and GEMM rates
#   e2e       sieve-server on the GPU, 1M x 768 float16, k=10, 1/8/64/128 clients (sieve-loadgen),
#             once per E2E_WORKERS entry (--batch-workers; default "2 1"), E2E_CLIENTS levels
#   msmarco   bench/msmarco: surrogate at MSMARCO_SCALE (default 1.0 = 8,841,823 rows), MSMARCO_QUERIES
#             queries (default 1000), extra flags in MSMARCO_ARGS; generated data stays in
#             MSMARCO_WORK (default /tmp/msmarco-bench, outside $OUT) for a second run on a warm
#             machine; the report (JSON, Markdown, PNG) lands in $OUT/msmarco
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
set -uo pipefail
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
G="$PWD/.deps/gpu"
[ -f "$PWD/.deps/gpu.tar.xz" ] && bench/gpu/unpack.sh gpu
export LD_LIBRARY_PATH="$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
B="$G/build"
BENCH_ARGS=${BENCH_ARGS:-"--dtype float16 --n 1m,5m --batch 1,16,64,128,1024 --k 10,128,1024,8192,16384"}
TORCH_ARGS=${TORCH_ARGS:-"--dtype float16 --n 1m,5m --batch 1,16,64,128,1024 --k 10,128,1024,8192,16384"}
E2E_N=${E2E_N:-1000000}
status=0
for stage in "$@"; do
  echo "=== stage $stage ($(date -u +%H:%M:%S))"
  case "$stage" in
    info)
      nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv
      head -2 /etc/os-release; nproc ;;
    test)
      timeout "${TEST_TIMEOUT:-300}" "$B/tests/test_knn_cuda" --jobs 4 --verbose=0 2>&1 |
        tee "$OUT/test_knn_cuda.log" | grep -E "^\[(PASS|FAIL|SKIP|====)|FAIL|assert" | tail -12
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      timeout 300 "$B/tests/test_devcache" --verbose=0 2>&1 | tee "$OUT/test_devcache.log" | tail -6
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      timeout 300 "$B/tests/test_indexer_cuda" --jobs 4 --verbose=0 2>&1 |
        tee "$OUT/test_indexer_cuda.log" | grep -E "^\[(FAIL|====)|assert" | tail -12
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      timeout 300 "$B/tests/test_sparse_attn_cuda" --jobs 4 --verbose=0 2>&1 |
        tee "$OUT/test_sparse_attn_cuda.log" | grep -E "^\[(FAIL|====)|assert" | tail -12
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      timeout 300 "$B/tests/test_attention_cuda" --jobs 4 --verbose=0 2>&1 |
        tee "$OUT/test_attention_cuda.log" | grep -E "^\[(FAIL|====)|assert" | tail -12
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      timeout 300 "$B/tests/test_block_sparse_cuda" --jobs 4 --verbose=0 2>&1 |
        tee "$OUT/test_block_sparse_cuda.log" | grep -E "^\[(FAIL|====)|assert" | tail -12
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
    attention)
      ATTN_ARGS=${ATTN_ARGS:-"--keys 16k,64k,128k --queries 1,16,64,128,2048 --k 2048"}
      rm -f "$OUT/attn.json" "$OUT/attn_torch.json"
      timeout 300 "$B/bench/sieve-bench" attention --device cuda $ATTN_ARGS --json "$OUT/attn.json" \
        2>&1 | tee "$OUT/attn.txt" | tail -20
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      timeout 300 python3 bench/torch_attention.py indexer --keys 128k --queries 1,64,2048 --k 2048 \
        --repeat 5 --warmup 2 --json "$OUT/attn_torch.json" 2>&1 | grep -v '^{' | tee "$OUT/attn_torch.txt"
      SPARSE_ARGS=${SPARSE_ARGS:-"--keys 128k --queries 2048 --k 2048 --group 8,16,32 --share 1,0.95,0.9,0.75,0.5,0"}
      rm -f "$OUT/sparse.json"
      timeout 300 "$B/bench/sieve-bench" attention sparse --device cuda $SPARSE_ARGS \
        --json "$OUT/sparse.json" 2>&1 | tee "$OUT/sparse.txt" | tail -20
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      DENSE_SEQ=${DENSE_SEQ:-"8k,32k,128k"}
      rm -f "$OUT/dense.json"
      timeout 300 "$B/bench/sieve-bench" attention dense --device cuda --seq "$DENSE_SEQ" \
        --json "$OUT/dense.json" 2>&1 | tee "$OUT/dense.txt" | tail -5
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      timeout 300 python3 bench/torch_attention.py dense --seq "$DENSE_SEQ" --backends flash,cudnn \
        --repeat 3 --warmup 1 --json "$OUT/attn_torch.json" 2>&1 | grep -v '^{' | tee "$OUT/dense_torch.txt"
      PREFILL_SEQ=${PREFILL_SEQ:-"32k,128k"}
      rm -f "$OUT/prefill.json"
      timeout 300 "$B/bench/sieve-bench" attention prefill --device cuda --seq "$PREFILL_SEQ" \
        --q-heads 32 --kv-heads 8 --head-dim 128 --v-dim 128 --dtype bfloat16 --alpha 0.1 \
        --repeat 5 --warmup 1 --json "$OUT/prefill.json" 2>&1 | tee "$OUT/prefill.txt" | tail -5
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      python3 bench/report_attention.py --sieve "$OUT/attn.json" --torch "$OUT/attn_torch.json" \
        --sparse "$OUT/sparse.json" --dense "$OUT/dense.json" --prefill "$OUT/prefill.json" \
        --md "$OUT/attn_report.md" --plots "$OUT/attn" | tail -12
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
    server)
      SIEVE_BUILD_DIR="$B" SIEVE_TEST_DEVICE=cuda:0 timeout 400 "$B/tests/test_server" --jobs 4 \
        --verbose=0 2>&1 | tee "$OUT/test_server_gpu.log" | grep -E "^\[(FAIL|====)|assert" | tail -12
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
    rest)
      SIEVE_BUILD_DIR="$B" SIEVE_TEST_DEVICE=cuda:0 timeout 400 python3 tests/python/test_rest_exact.py \
        ${REST_ARGS:---n 300000 --dim 128} > "$OUT/test_rest_exact_gpu.log" 2>&1
      rc=$?; tail -12 "$OUT/test_rest_exact_gpu.log"
      [ $rc -eq 0 ] || status=1 ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 3 "$B/bench/sieve-bench" knn --n 70000 --dim 96 \
          --batch 1,13,40,70 --k 1,100 --repeat 1 --warmup 0 --mat-repeat 1 --dtype float16,float32 \
          --metric Euclid --rows-per-page 256 > "$OUT/sanitize_$tool.log" 2>&1
        rc=$?; echo "compute-sanitizer $tool: exit $rc"; tail -2 "$OUT/sanitize_$tool.log"
        [ $rc -eq 0 ] || status=1
      done ;;
    bench)
      timeout "${BENCH_TIMEOUT:-400}" "$B/bench/sieve-bench" knn $BENCH_ARGS --json "$OUT/knn.json" \
        > "$OUT/bench.log" 2>&1 || status=1
      grep -vE "^#" "$OUT/bench.log" | cut -c1-150 ;;
    variants)
      for v in ${VARIANTS:-mma wg64x128 wg128x128s3 wg64x128-direct wg128x128s3-direct tma64x256 tma64x128 tma128x256 tma64x128s tma64x256s tma128x256s tma128x256h}; do
        SIEVE_CUDA_SCAN=$v timeout "${BENCH_TIMEOUT:-400}" "$B/bench/sieve-bench" knn ${VARIANT_ARGS:---n 5m --batch 1,64,128,1024 --k 128 --repeat 10 --no-materialized} \
          --json "$OUT/variants.json" > "$OUT/variant_$v.log" 2>&1 || status=1
        echo "--- $v (B fused_ms sample/scan/select)"
        awk '/^[0-9]/{printf "%s %s %s %s | ", $2, $3, $5, $NF}' "$OUT/variant_$v.log"; echo
      done ;;
    profile)
      NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
      echo "ncu: ${NCU:-none}"
      for sh in ${PROFILE_SHAPES:-64:tma64x128 1024:tma128x256}; do
        b=${sh%%:*}; v=${sh##*:}
        [ -n "$NCU" ] && SIEVE_CUDA_SCAN=$v timeout 200 "$NCU" --kernel-name regex:scan_ --launch-skip 5 --launch-count 1 --clock-control none \
          --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
          "$B/bench/sieve-bench" knn --n 5m --batch "$b" --k 128 --repeat 3 --warmup 1 --no-materialized \
          > "$OUT/ncu_${b}_$v.txt" 2>&1
        echo "--- ncu B=$b $v"; grep -E "Duration|SM Frequency|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Thr|Memory Throughput|Stall|Issued Warp|Executed Ipc|Tensor|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Registers|Achieved Occ" "$OUT/ncu_${b}_$v.txt" | head -40
      done
      SIEVE_CUDA_SCAN=wg64x128 "$B/bench/sieve-bench" knn --n 5m --batch 64 --k 128 --repeat 1500 --warmup 1 --no-materialized > /dev/null 2>&1 &
      bp=$!; sleep 2
      nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 250 -c 8 2>&1 | tail -9
      kill $bp 2>/dev/null; wait $bp 2>/dev/null ;;
    stalls)
      NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
      [ -n "$NCU" ] || { echo "ncu: none"; status=1; continue; }
      # STALL_K (default 128), STALL_DTYPE (default float16) and SIEVE_CUDA_SCAN (default: the
      # launcher's choice) pick the kernel; reports are named stalls_B<batch>[_k<k>][_<dtype>]
      for b in ${STALL_BATCHES:-1 64}; do
        kk=${STALL_K:-128}; dt=${STALL_DTYPE:-float16}; n=stalls_B$b; [ "$kk" = 128 ] || n=${n}_k$kk
        [ "$dt" = float16 ] || n=${n}_$dt
        # launches alternate sample / gate scans: the sixth is the third call's gate scan
        timeout 300 "$NCU" --set full --import-source yes --kernel-name regex:"scan_(wgmma|tma|f32)" \
          --launch-skip 5 --launch-count 1 --clock-control none -f -o "$OUT/$n" \
          "$B/bench/sieve-bench" knn --n 5m --dtype "$dt" --batch "$b" --k "$kk" --repeat 3 --warmup 1 \
          --no-materialized > "$OUT/${n}_run.log" 2>&1 || status=1
        "$NCU" -i "$OUT/$n.ncu-rep" --page details > "$OUT/$n.txt" 2>&1 || status=1
        "$NCU" -i "$OUT/$n.ncu-rep" --page source --csv --print-source sass \
          > "$OUT/${n}_sass.csv" 2>&1 || echo "per-line export failed (see the file)"
        echo "--- B=$b k=$kk"; grep -iE "Stall|Warp Cycles|Duration|scan_" "$OUT/$n.txt" | head -20
      done ;;
    ingest)
      d=$(mktemp -d /tmp/sieve-ingest.XXXXXX)
      "$B/datasets/sieve-datagen" --kind gaussian --count 1000000 --dim 768 --out "$d/x.fbin" > /dev/null 2>&1 || status=1
      for r in 1 2; do
        dd if=/dev/zero of="$d/dd" bs=1M count=3000 conv=fsync 2>&1 | tail -1; rm -f "$d/dd"
        rm -rf "$d/db"
        "$B/client/sieve" ingest "$d/x.fbin" --collection c --create --data-dir "$d/db" 2>&1 | tail -2 || status=1
      done
      rm -rf "$d" ;;
    torch)
      python3 bench/torch_knn.py $TORCH_ARGS --json "$OUT/torch.json" > "$OUT/torch.log" 2>&1 || status=1
      tail -n 3 "$OUT/torch.log" | cut -c1-160 ;;
    ceilings)
      python3 bench/torch_knn.py --ceilings --n 1k --batch 1 --k 1 --json "$OUT/ceilings.json" 2>&1 | grep ceiling ;;
    e2e)
      # One data directory; the server runs once per E2E_WORKERS entry (--batch-workers),
      # the first run creates the collection over HTTP.
      data=$(mktemp -d /tmp/sieve-e2e.XXXXXX)
      first=1
      for W in ${E2E_WORKERS:-2 1}; do
        "$B/server/sieve-server" --port 6399 --data-dir "$data" --device cuda:0 --threads 16 \
          --batch-max 256 --batch-workers "$W" ${E2E_SERVER_ARGS:-} > "$OUT/e2e_server_w$W.log" 2>&1 &
        spid=$!
        for i in $(seq 1 50); do
          python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:6399/readyz', timeout=1)" 2>/dev/null && break
          sleep 0.2
        done
        if [ $first -eq 1 ]; then
          t0=$(date +%s)
          "$B/bench/sieve-loadgen" --url http://127.0.0.1:6399 --create "$E2E_N" --dim 768 \
            --distance Dot --datatype float16 --upload-clients 12 --upload-batch 2000 --clients 1 \
            --duration 2 --warmup 1 > "$OUT/e2e_create.log" 2>&1 || status=1
          echo "created $E2E_N points over HTTP in $(( $(date +%s) - t0 )) s (including a 3 s probe)"
          tail -4 "$OUT/e2e_create.log"
          first=0
        fi
        echo "--- --batch-workers $W"
        "$B/bench/sieve-loadgen" --url http://127.0.0.1:6399 --clients ${E2E_CLIENTS:-1,8,64,128} \
          --duration 10 --warmup 2 --limit 10 2>&1 | tee "$OUT/e2e_loadgen_w$W.log" | tail -7
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
        python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:6399/metrics').read().decode())" > "$OUT/e2e_metrics_w$W.txt"
        grep -E "^sieve_(batch_size|kernel_seconds)_(sum|count)|^sieve_batch_phase|^sieve_search_repl|^sieve_batch_workers|^sieve_device_memory" "$OUT/e2e_metrics_w$W.txt"
        kill -TERM $spid; wait $spid; echo "server exit $?"
      done
      rm -rf "$data" ;;
    msmarco)
      work="${MSMARCO_WORK:-/tmp/msmarco-bench}"
      rm -rf "$work/run"  # the server's data directory (13.6 GB at full size) lives in $work/run
      timeout "${MSMARCO_TIMEOUT:-560}" python3 bench/msmarco --bin "$B" --device cuda \
        --scale "${MSMARCO_SCALE:-1.0}" --num-queries "${MSMARCO_QUERIES:-1000}" \
        --data-cache "$work/data" --work "$work/run" --out "$OUT/msmarco" ${MSMARCO_ARGS:-} \
        > "$OUT/msmarco.log" 2>&1
      rc=$?
      rm -rf "$work/run"
      grep -vE '^(brute force|check|faiss add|load [a-z0-9]+): ' "$OUT/msmarco.log" | tail -n 120 | cut -c1-240
      echo "bench/msmarco: exit $rc"
      [ $rc -eq 0 ] || status=1 ;;
    *) echo "unknown stage $stage"; status=2 ;;
  esac
done
exit $status
