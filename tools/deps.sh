#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# deps.sh [-t TARGET] PKG... - installs those of the Debian packages PKG...
# that are missing, with apt-get, as root; not root, it names them and the
# command that installs them, and fails. TARGET, the make target that runs it
# (deps, bench-deps, fuzz-deps), prefixes its messages and is the command it
# names. The one installer behind `make deps`, `make bench-deps` and
# `make fuzz-deps`: nothing to do, and silent, when every package is there.
set -eu

target=""
if [ "${1:-}" = -t ]; then
    target=$2
    shift 2
fi
name=${target:-deps.sh}
missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
if [ "$(id -u)" != 0 ]; then
    echo "$name: run as root to install:$missing" >&2
    echo "$name: ${target:+sudo make $target, or }sudo apt-get install --no-install-recommends$missing" >&2
    exit 1
fi
echo "$name: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing > /dev/null
