# Call 5: bench/gpu/validate.sh perf on the same build: the sweep of bench/RESULTS.md beside
# torch, and the server end to end at 1, 64 and 128 clients.
timeout 400 bench/gpu/validate.sh perf 2>&1 | grep -E "^- |missed|met|within|queries/s|clients" | head -40
