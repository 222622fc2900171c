#!/usr/bin/env bash
# Runs one test program and fails when any sanitizer wrote a report, also from a forked
# Criterion worker or a server process the test started, whose exit status the test runner
# itself may not see. usage: tests/run_checked.sh PROGRAM [ARGS...]
set -u
dir="$(mktemp -d "${TMPDIR:-/tmp}/sieve-san.XXXXXX")"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$dir/asan"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$dir/ubsan"
"$@"
rc=$?
if compgen -G "$dir/*" >/dev/null; then
  echo "sanitizer reports from $1:" >&2
  cat "$dir"/* >&2
  rc=1
fi
rm -rf "$dir"
exit $rc
