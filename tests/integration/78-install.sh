#!/usr/bin/env bash
# make install / make uninstall (README "Install"): `make install DESTDIR=D` puts exactly the
# expected files under D (modes 0755 and 0644), with PREFIX=/usr as well, the units' ExecStart
# and the man pages' paths following PREFIX; every man page renders with `man --warnings`
# and no warning, has the sections an operator looks for, and names every flag its binary's
# --help shows; the installed binaries print the build's version (`make version`: git describe
# in a checkout), and a copy of the tree without .git builds and prints the Makefile's VERSION,
# which CHANGELOG.md, deploy/kustomization.yaml and the chart's appVersion agree with;
# `make uninstall DESTDIR=D` leaves no file behind.
. "$(dirname "$0")/lib.sh"
cd "$PODRES_ROOT"
command -v man > /dev/null || fail "man is missing (make deps installs man-db)"

BINS="podres-extender podres-syncer podresd kubectl-podres"
# sect BIN - the man section of BIN's page: 1 for the kubectl plugin, 8 for the daemons.
sect() { case $1 in kubectl-*) echo 1 ;; *) echo 8 ;; esac; }
# expected PREFIX - every file make install puts under PREFIX (relative to DESTDIR), sorted.
expected() {
    local p=${1#/} b
    {
        for b in $BINS; do
            echo "$p/bin/$b"
            echo "$p/share/man/man$(sect "$b")/$b.$(sect "$b")"
        done
        echo "$p/lib/systemd/system/podresd.service"
        echo "$p/lib/systemd/system/podres-syncer.service"
        echo "$p/lib/sysusers.d/podres.conf"
        for d in API.md CHANGELOG.md CRD.md EXTENDER.md KUBECTL-PODRES.md LICENSE README.md SYNCER.md examples/podresd.yaml; do
            echo "$p/share/doc/podres/$d"
        done
    } | sort
}
# files DIR - every file under DIR as "MODE PATH", sorted; nothing but regular files allowed.
files() {
    (cd "$1" && find . ! -type d ! -type f -printf 'not a file: %p\n' && find . -type f -printf '%m %P\n') | sort -k2
}

# ---- 1. make install DESTDIR=... PREFIX=/usr/local (the default)
D=$(mktemp -d "$T/destdir.XXXXXX")
make -s install DESTDIR="$D" > "$T/install.log" 2>&1 || fail "make install: $(tail -20 "$T/install.log")"
files "$D" > "$T/files"
got=$(cut -d' ' -f2- "$T/files")
want=$(expected /usr/local)
[ "$got" = "$want" ] || fail "make install DESTDIR: files (< want, > got):
$(diff <(echo "$want") <(echo "$got") | grep '^[<>]')"
bad=$(awk '($2 ~ /\/bin\// && $1 != 755) || ($2 !~ /\/bin\// && $1 != 644)' "$T/files")
[ -z "$bad" ] || fail "modes: $bad"
ok "make install DESTDIR: exactly the $(grep -c . <<<"$want") expected files (4 binaries 0755; 4 man pages, 2 units, the sysusers entry, docs 0644)"

for u in podresd podres-syncer; do
    cmp -s "deploy/systemd/$u.service" "$D/usr/local/lib/systemd/system/$u.service" ||
        fail "$u.service was changed for PREFIX=/usr/local"
done
cmp -s deploy/systemd/podres.sysusers "$D/usr/local/lib/sysusers.d/podres.conf" || fail "sysusers entry differs"
cmp -s deploy/systemd/podresd.yaml "$D/usr/local/share/doc/podres/examples/podresd.yaml" || fail "example config differs"
ok "the units, the sysusers entry and the example config are deploy/systemd's"

# ---- 2. the man pages
want_v=$(make -s --no-print-directory version)
for b in $BINS; do
    n=$(sect "$b")
    page=$D/usr/local/share/man/man$n/$b.$n
    out=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>"$T/man.err") || fail "man -l $b.$n: $(cat "$T/man.err")"
    [ ! -s "$T/man.err" ] || fail "man --warnings -l $b.$n warned: $(cat "$T/man.err")"
    for s in NAME SYNOPSIS DESCRIPTION OPTIONS FILES SIGNALS "EXIT STATUS" EXAMPLES "SEE ALSO"; do
        grep -q "^$s\$" <<<"$out" || fail "$b.$n has no $s section"
    done
    grep -Eq "^ +$b +- " <<<"$out" || fail "$b.$n: NAME is not '$b - ...': $(grep -A1 '^NAME' <<<"$out")"
    flags=$("$PODRES_BIN/$b" --help | grep -o -- '--[a-z][a-z-]*' | sort -u)
    missing=""
    for f in $flags; do
        grep -q -- "$f\b" <<<"$out" || missing="$missing $f"
    done
    [ -z "$missing" ] || fail "$b.$n does not document$missing (from $b --help)"
    lines=$(grep -c . <<<"$out")
    long=$(awk 'length > 80' <<<"$out")
    [ -z "$long" ] || fail "$b.$n renders lines over 80 columns: $long"
    v=$("$D/usr/local/bin/$b" --version) || fail "installed $b --version failed"
    [ "$v" = "$b $want_v" ] || fail "installed $b --version: '$v', want '$b $want_v'"
done
ok "man --warnings -E UTF-8 -l: each page renders without a warning ($lines lines for the last), has NAME..SEE ALSO and names every flag of --help"
ok "the installed binaries print the build's version: $want_v"
if [ -d .git ] || [ -f .git ]; then
    [ "$want_v" = "$(git describe --tags --dirty --always)" ] || fail "make version '$want_v' is not git describe's"
    ok "... which is git describe --tags --dirty --always of this checkout"
fi

# ---- 3. make uninstall removes every file
make -s uninstall DESTDIR="$D" > "$T/uninstall.log" 2>&1 || fail "make uninstall: $(tail -20 "$T/uninstall.log")"
left=$(cd "$D" && find . -type f)
[ -z "$left" ] || fail "make uninstall left: $left"
[ ! -e "$D/usr/local/share/doc/podres" ] || fail "make uninstall left share/doc/podres"
ok "make uninstall DESTDIR: no file left (and no share/doc/podres)"

# ---- 4. PREFIX=/usr: the units and man pages point into it
D2=$(mktemp -d "$T/destdir.XXXXXX")
make -s install PREFIX=/usr DESTDIR="$D2" > "$T/install2.log" 2>&1 || fail "make install PREFIX=/usr: $(tail -20 "$T/install2.log")"
got=$(files "$D2" | cut -d' ' -f2-)
[ "$got" = "$(expected /usr)" ] || fail "make install PREFIX=/usr: $(diff <(expected /usr) <(echo "$got") | grep '^[<>]')"
for u in podresd podres-syncer; do
    unit=$D2/usr/lib/systemd/system/$u.service
    grep -q "^ExecStart=/usr/bin/$u " "$unit" || fail "$u.service: $(grep ExecStart "$unit")"
    ! grep -q /usr/local "$unit" || fail "$u.service still names /usr/local: $(grep /usr/local "$unit")"
done
! grep -l /usr/local "$D2"/usr/share/man/man?/*.? || fail "a man page still names /usr/local"
grep -q '/usr/share/doc/podres/API.md' "$D2/usr/share/man/man8/podresd.8" || fail "podresd.8 does not point to /usr/share/doc/podres"
make -s uninstall PREFIX=/usr DESTDIR="$D2" > /dev/null 2>&1 || fail "make uninstall PREFIX=/usr"
[ -z "$(find "$D2" -type f)" ] || fail "make uninstall PREFIX=/usr left: $(find "$D2" -type f)"
ok "PREFIX=/usr: the same files under usr/, ExecStart=/usr/bin/..., the man pages point to /usr/share/doc/podres; uninstall removes them"

# ---- 5. a tree without .git (a release tarball) builds and prints VERSION
want_rel=$(sed -n 's/^VERSION := //p' Makefile)
[ -n "$want_rel" ] || fail "no VERSION in the Makefile"
grep -q "^## $want_rel " CHANGELOG.md || fail "CHANGELOG.md has no entry '## $want_rel'"
grep -q "^  newTag: $want_rel$" deploy/kustomization.yaml || fail "deploy/kustomization.yaml's image tag is not $want_rel"
grep -q "^appVersion: \"$want_rel\"$" deploy/helm/podres/Chart.yaml || fail "the chart's appVersion is not $want_rel"
ok "VERSION $want_rel has its CHANGELOG entry and is the image tag of deploy/ and of the chart"
mkdir -p "$T/src"
tar -C "$PODRES_ROOT" --exclude=./.git --exclude=./build --exclude=./bin --exclude=./var -cf - . | tar -C "$T/src" -xf -
[ ! -e "$T/src/.git" ] || fail "the copy has .git"
(cd "$T/src" && env -u MAKEFLAGS -u MFLAGS make -s -j2 all SANITIZE=) > "$T/tarball.log" 2>&1 ||
    fail "the tree without .git does not build: $(tail -20 "$T/tarball.log")"
for b in $BINS; do
    v=$("$T/src/bin/$b" --version)
    [ "$v" = "$b $want_rel" ] || fail "without .git, $b --version: '$v', want '$b $want_rel'"
done
ok "a copy of the tree without .git builds (make -j2) and each binary prints '$want_rel', the Makefile's VERSION"
