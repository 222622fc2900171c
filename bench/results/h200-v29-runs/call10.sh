# Call 10: smaller samples than the landed rule, for the next step (main's build with the
# sample test, --sample-rows, whole calls, pinned results): at each shape the default, then
# the candidates, alternating default x y x y default.
D=$OUT/c10; . bench/results/h200-v29-runs/common.sh
cmp3() { # LABEL K X Y ARGS...: default, X rows, Y rows, X, Y, default
  local l=$1 k=$2 x=$3 y=$4; shift 4
  run ${l}_d1 X=1 --k $k "$@"
  run ${l}_x1 X=1 --k $k --sample-rows $x "$@"
  run ${l}_y1 X=1 --k $k --sample-rows $y "$@"
  run ${l}_x2 X=1 --k $k --sample-rows $x "$@"
  run ${l}_y2 X=1 --k $k --sample-rows $y "$@"
  run ${l}_d2 X=1 --k $k "$@"
}
echo "--- ($(date -u +%T))"
cmp3 m8192 8192 16384 24576 --n 1m --batch 16,64,128,1024 --results pinned
cmp3 m16384 16384 16384 32768 --n 1m --batch 16,64,128,1024 --results pinned
cmp3 m4096 4096 16384 24576 --n 1m --batch 16,64,128,1024 --results pinned
cmp3 f16384 16384 16384 32768 --n 5m --batch 16,64,128,1024 --results pinned
echo "--- done ($(date -u +%T))"
tar czf $OUT/call10.tar.gz -C $OUT c10 && rm -rf $D
