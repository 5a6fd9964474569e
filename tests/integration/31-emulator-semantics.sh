#!/bin/bash
# Plain-HTTP checks of the emulator semantics podres-syncer relies on: resourceVersion rules, /status isolation, generation, no-op updates, merge/JSON patch, 415, delete preconditions, finalizers, watches (from N, bookmarks, 410, selectors, Table), Pods by spec.nodeName, asynchronous owner-reference GC.
# The checks are in tests/emulator/test_semantics.py (standard library + emutest.py), run with
# Debian's /usr/bin/python3; it starts and stops its own emulators on free ports.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x /usr/bin/python3 ] || { echo "FAIL - /usr/bin/python3 missing" >&2; exit 1; }
/usr/bin/python3 -c 'import yaml' || { echo "FAIL - python3-yaml missing (comes with python3-kubernetes)" >&2; exit 1; }
exec /usr/bin/python3 tests/emulator/test_semantics.py
