#!/bin/bash
# The official Python client (python3-kubernetes) against the emulator over TLS with a token: create, 409, list, merge patch, watch from "0", 410 on a stale resourceVersion (checklist 52).
# The checks are in tests/emulator/test_pyclient.py (standard library + emutest.py), run with
# Debian's /usr/bin/python3; it starts and stops its own emulators on free ports.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x /usr/bin/python3 ] || { echo "FAIL - /usr/bin/python3 missing" >&2; exit 1; }
/usr/bin/python3 -c 'import yaml' || { echo "FAIL - python3-yaml missing (comes with python3-kubernetes)" >&2; exit 1; }
/usr/bin/python3 -c 'import kubernetes' || { echo "FAIL - python3-kubernetes missing" >&2; exit 1; }
exec /usr/bin/python3 tests/emulator/test_pyclient.py
