# Call 6: the pool wakes at most one sleeping thread per item beyond the caller's (call 5:
# 3-6 MB downloads 0.05 ms slower on the pool of 15 than on main's 8), against main's
# build, b n n b, at the pipelined shapes from 3 to 201 MB.
D=$OUT/c6; . bench/results/h200-v30-runs/common.sh
echo "--- A/B ($(date -u +%T))"
ab f_pg --n 5m --batch 16,64,128,1024 --k 4096,8192,16384
ab h_pg --n 8841823 --batch 64,128 --k 4096,8192,16384
ab m_pg --n 1m --batch 64,128,1024 --k 4096,8192,16384
echo "--- done ($(date -u +%T))"
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $D
