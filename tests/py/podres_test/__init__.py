# SPDX-License-Identifier: Apache-2.0
"""podres_test - the Python side of podres's integration tests and bench.

client is how the tests and the bench speak HTTP to podresd (its unix socket
or loopback TCP), by http.client or by hand; model is the seeded concurrent
model of test 65; free_port picks listener ports for the tests, the bench
and the control plane; the other modules are the programs one integration
test runs (each names its test), started as `python3 -m podres_test.NAME ARGS`.
tests/integration/lib.sh puts tests/py on PYTHONPATH. Not a library for
anything outside tests/: Python 3.11's standard library (and python3-yaml)
only, no install step.
"""
