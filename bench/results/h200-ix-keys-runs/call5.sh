# Device call 5: Nsight Compute (full set and the source page) on the committed build's gate
# scan at the target shape, for the next step's reading of where the scan waits.
D=$OUT/c5; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
T="attention --device cuda --keys 128k --queries 2048 --k 2048"
timeout 400 $NCU --set full --import-source no -k regex:ix_scan_kernel --launch-skip 1 --launch-count 1 \
  -o $D/gate $N/bench/sieve-bench $T --repeat 1 --warmup 0 --no-materialized > $D/ncu.log 2>&1
echo "ncu rc $?" | tee -a $D/summary.txt
$NCU -i $D/gate.ncu-rep --page details > $D/gate.txt 2>&1
$NCU -i $D/gate.ncu-rep --page source --csv --print-source sass > $D/gate_sass.csv 2>&1
sed -i "s@$PWD/@@g" $D/ncu.log $D/gate.txt
grep -E "Duration|Executed Instructions |Issue Slots Busy|Stall|Warp Cycles Per Issued|Tensor|Achieved Occupancy|Registers Per|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit" $D/gate.txt | head -40 >> $D/summary.txt
xz -9 $D/gate_sass.csv
rm -f $D/gate.ncu-rep
echo "seconds $SECONDS" >> $D/summary.txt
tar czf $OUT/call5.tar.gz -C $OUT c5
