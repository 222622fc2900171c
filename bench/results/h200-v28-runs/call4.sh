# Call 4: bench/gpu/validate.sh check on the build to land (call 3's select and sample
# selection; the float32 loop as on main): GPU kernel suite, device page cache suite, server
# suite and REST exactness with the server on the GPU, compute-sanitizer memcheck and racecheck.
timeout 585 bench/gpu/validate.sh check 2>&1 | tail -45
