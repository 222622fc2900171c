"""Shared by the Python tests in tests/bench: where the sources and the build are, and the
check() that prints each assertion and records the failed ones in `failures`."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("SIEVE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("SIEVE_BUILD_DIR") or os.path.join(SRC, "build")
failures = []


def check(cond, what, got=None, want=None):
    if cond:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what}: got {got!r}, expected {want!r}")
        failures.append(what)
