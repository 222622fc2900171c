#!/usr/bin/env bash
# The whole check of a kernel build (run from the repository root on the GPU machine, with
# the bundle of bench/gpu/bundle.sh carried), in the order that stops early: the GPU kernel
# and device page cache suites (nothing else runs if they fail), the server suite and the
# REST exactness test with the server on the GPU, compute-sanitizer memcheck and racecheck,
# the kernel sweep of bench/RESULTS.md beside torch (bench/gpu/sweep.sh), and the
# end-to-end server run at 1, 64 and 128 clients. Everything lands in one archive,
# $OUT/validate.tar.xz (the device tool brings back only a few files per call); unpack it
# with `tar -xJf`. The archive is rewritten after each stage, so a cut call keeps what ran.
# Device time on an H200 (measured 2026-12-02, with the k-NN suite at 14 tests and the five
# attention suites): GPU suites about 7 minutes, server 0.1, REST 1.2, memcheck about 1,
# racecheck about 6, sweep with torch and end to end about 3. No part but perf fits one call
# (10 minutes) with another: run suites, sanitize and perf as three calls.
# usage: bench/gpu/validate.sh [all|check|suites|sanitize|perf]
#   suites:   info, GPU suites, server suite, REST exactness (tests/python/test_rest_exact.py,
#             300k x 128), about 8.5 minutes
#   sanitize: compute-sanitizer memcheck and racecheck on small shapes, about 7 minutes
#             (run after suites has passed on the same build)
#   perf:     sweep beside torch, end to end, about 3 minutes
#   check:    suites, then sanitize (more than one call's time); all (default): check, then
#             perf; both skip what follows when the GPU suites fail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
set -u
part=${1:-all}
case "$part" in all | check | suites | sanitize | perf) ;;
  *) echo "usage: $0 [all|check|suites|sanitize|perf]" >&2; exit 2 ;; esac
R="${OUT:-$PWD/out}"
export OUT="$R/validate"
mkdir -p "$OUT"
# the archive is rewritten after every stage, so a call cut short by the device tool's
# time limit still brings back the logs of the stages that finished
pack() { tar -C "$R" -cJf "$R/validate.tar.xz.part" validate && mv "$R/validate.tar.xz.part" "$R/validate.tar.xz"; }
bench/gpu/run.sh info 2>&1 | tail -4
ok=1
case "$part" in all | check | suites)
  TEST_TIMEOUT=${TEST_TIMEOUT:-300} bench/gpu/run.sh test 2>&1 | tail -14
  pack
  if grep -q "Failing: 0" "$OUT/test_knn_cuda.log" && grep -q "Failing: 0" "$OUT/test_devcache.log"; then
    timeout 60 bench/gpu/run.sh server 2>&1 | tail -3
    timeout 200 bench/gpu/run.sh rest 2>&1 | tail -12
    pack
  else
    ok=0
    echo "GPU suites failed: nothing else ran (logs in the archive)"
  fi ;;
esac
case "$part" in all | check | sanitize)
  if [ $ok -eq 1 ]; then
    timeout 540 bench/gpu/run.sh sanitize 2>&1 | tail -6
    pack
  fi ;;
esac
case "$part" in all | perf)
  if [ $ok -eq 1 ]; then
    timeout 420 bench/gpu/sweep.sh 2>&1 | tail -95
    pack
    E2E_WORKERS=${E2E_WORKERS:-2} E2E_CLIENTS=${E2E_CLIENTS:-1,64,128} timeout 120 \
      bench/gpu/run.sh e2e 2>&1 | tail -16
  fi ;;
esac
pack && rm -rf "$OUT"
ls -la "$R"
