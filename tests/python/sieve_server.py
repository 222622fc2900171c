"""sieve-server as a child process, for the black-box Python tests.

start_server runs $build_dir/server/sieve-server on a free loopback port (--port 0) with the
given data directory, on the device named by $SIEVE_TEST_DEVICE (default cpu), without
fsync, its output in log_path; it returns (process, port) once the server prints its
address. stop_server sends SIGTERM and requires exit status 0. Both raise SystemExit, with
the server's log, when that does not happen in time.
"""
import os
import re
import signal
import subprocess
import time


def start_server(build_dir, data_dir, log_path, timeout=60):
    binary = os.path.join(build_dir, "server", "sieve-server")
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", "0", "--data-dir", data_dir,
         "--device", os.environ.get("SIEVE_TEST_DEVICE") or "cpu", "--no-sync"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit("sieve-server exited at startup:\n" + open(log_path).read())
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(log_path).read())
        if m:
            return proc, int(m.group(1))
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("sieve-server did not start:\n" + open(log_path).read())


def stop_server(proc, log_path, timeout=120):
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise SystemExit(f"sieve-server did not stop within {timeout} s of SIGTERM")
    if rc != 0:
        raise SystemExit(f"sieve-server exited with {rc}:\n" + open(log_path).read())
