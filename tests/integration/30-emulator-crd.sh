#!/bin/bash
# The project's DeviceBinding CRD (schema/ = deploy/, CONTRACT §4 shape, structural) and CRD registration in the kube-apiserver emulator: Established, defaulted names, pruning, validation, discovery, Table columns.
# The checks are in tests/emulator/test_crd.py (standard library + emutest.py), run with
# Debian's /usr/bin/python3; it starts and stops its own emulators on free ports.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x /usr/bin/python3 ] || { echo "FAIL - /usr/bin/python3 missing" >&2; exit 1; }
/usr/bin/python3 -c 'import yaml' || { echo "FAIL - python3-yaml missing (comes with python3-kubernetes)" >&2; exit 1; }
exec /usr/bin/python3 tests/emulator/test_crd.py
