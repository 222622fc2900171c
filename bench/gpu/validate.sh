#!/usr/bin/env bash
# The whole check of a kernel build in one device call (run from the repository root on the
# GPU machine, with the bundle of bench/gpu/bundle.sh carried), in the order that stops
# early: the GPU kernel and device page cache suites (nothing else runs if they fail), the
# server suite and the REST exactness test with the server on the GPU, compute-sanitizer
# memcheck and racecheck, the kernel sweep of
# bench/RESULTS.md beside torch (bench/gpu/sweep.sh), and the end-to-end server run at 1, 64
# and 128 clients. Everything lands in one archive, $OUT/validate.tar.xz (the device tool
# brings back only a few files per call); unpack it with `tar -xJf`.
# Device time on an H200 (measured 2026-11-29): GPU suites 2.5 minutes, server 0.3,
# sanitize 2.7 (before the B = 40 shapes joined it; expect about 4), sweep with torch and
# end to end together about 2 (k = 16384 and the pinned pass included), so all of it is
# close to one call's 10-minute limit: better run as two calls (suites, server and
# sanitize; then sweep and end to end). The archive is rewritten
# after each stage, so a cut call keeps what ran.
# usage: bench/gpu/validate.sh [all|check|perf]
#   check: info, GPU suites, server suite, REST exactness (tests/python/test_rest_exact.py,
#          300k x 128), sanitizers (about 8 minutes)
#   perf:  sweep beside torch, end to end (about 2 minutes); all (default): both, the
#          performance part only when the GPU suites pass
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
set -u
part=${1:-all}
case "$part" in all | check | perf) ;; *) echo "usage: $0 [all|check|perf]" >&2; exit 2 ;; esac
R="${OUT:-$PWD/out}"
export OUT="$R/validate"
mkdir -p "$OUT"
# the archive is rewritten after every stage, so a call cut short by the device tool's
# time limit still brings back the logs of the stages that finished
pack() { tar -C "$R" -cJf "$R/validate.tar.xz.part" validate && mv "$R/validate.tar.xz.part" "$R/validate.tar.xz"; }
bench/gpu/run.sh info 2>&1 | tail -4
ok=1
if [ "$part" != perf ]; then
  TEST_TIMEOUT=${TEST_TIMEOUT:-300} bench/gpu/run.sh test 2>&1 | tail -14
  pack
  if grep -q "Failing: 0" "$OUT/test_knn_cuda.log" && grep -q "Failing: 0" "$OUT/test_devcache.log"; then
    timeout 60 bench/gpu/run.sh server 2>&1 | tail -3
    timeout 200 bench/gpu/run.sh rest 2>&1 | tail -12
    timeout 400 bench/gpu/run.sh sanitize 2>&1 | tail -6
    pack
  else
    ok=0
    echo "GPU suites failed: nothing else ran (logs in the archive)"
  fi
fi
if [ "$part" != check ] && [ $ok -eq 1 ]; then
  timeout 420 bench/gpu/sweep.sh 2>&1 | tail -95
  pack
  E2E_WORKERS=${E2E_WORKERS:-2} E2E_CLIENTS=${E2E_CLIENTS:-1,64,128} timeout 120 \
    bench/gpu/run.sh e2e 2>&1 | tail -16
fi
pack && rm -rf "$OUT"
ls -la "$R"
