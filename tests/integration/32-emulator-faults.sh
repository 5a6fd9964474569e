#!/bin/bash
# Every fault switch of the emulator (--faults and /_emulator/faults), token expiry and replacement, 403, TLS, compaction, dropped/stalled watches, and the request counter.
# The checks are in tests/emulator/test_faults.py (standard library + emutest.py), run with
# Debian's /usr/bin/python3; it starts and stops its own emulators on free ports.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x /usr/bin/python3 ] || { echo "FAIL - /usr/bin/python3 missing" >&2; exit 1; }
/usr/bin/python3 -c 'import yaml' || { echo "FAIL - python3-yaml missing (comes with python3-kubernetes)" >&2; exit 1; }
exec /usr/bin/python3 tests/emulator/test_faults.py
