#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# image.sh VERSION OUTDIR - builds the podres image from deploy/Dockerfile with
# buildah, tagged podres:VERSION, and saves it as OUTDIR/podres-VERSION.tar
# (docker-archive, named docker.io/library/podres:VERSION, the name that the
# DaemonSet's `image: podres:VERSION` means to a container runtime), which
# `ctr -n k8s.io images import`, `docker load` and `podman load` take.
#
# The Dockerfile's bases, debian:12 and debian:12-slim, are taken from
# buildah's store. When the store lacks them they are pulled, and when no
# registry answers they are made here from Debian's packages with mmdebstrap
# (the same bookworm suites; 12-slim is the same tree as 12) and kept in the
# store for the next build. PODRES_IMAGE_BASE=local skips the pull.
# Intermediate layers are cached (--layers), so a build whose sources did not
# change is quick.
set -eu
VERSION=${1:?usage: image.sh VERSION OUTDIR}
OUT=${2:?usage: image.sh VERSION OUTDIR}
cd "$(dirname "$0")/.."
export BUILDAH_ISOLATION=chroot
MIRROR=${PODRES_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${PODRES_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}

have() { buildah inspect --type image "$1" > /dev/null 2>&1; }

make_base() {
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo "image: making debian:12 with mmdebstrap (no registry image in buildah's store)"
    mmdebstrap --quiet --variant=apt --mode=root --format=tar bookworm "$tmp/rootfs.tar" \
        "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
        "deb $SECURITY bookworm-security main"
    c=$(buildah from scratch)
    buildah add --quiet "$c" "$tmp/rootfs.tar" / > /dev/null
    buildah config --cmd /bin/bash \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
    buildah commit --quiet --rm "$c" docker.io/library/debian:12 > /dev/null
    buildah tag docker.io/library/debian:12 docker.io/library/debian:12-slim
    rm -rf "$tmp"
    trap - EXIT
}

for b in debian:12 debian:12-slim; do
    have "docker.io/library/$b" && continue
    if [ "${PODRES_IMAGE_BASE:-}" != local ] &&
        timeout 60 buildah pull --quiet --retry 0 "docker.io/library/$b" > /dev/null 2>&1; then
        continue
    fi
    make_base
    break
done

echo "image: building podres:$VERSION from deploy/Dockerfile"
mkdir -p "$OUT"
log=$OUT/podres-$VERSION.log
buildah bud --pull=never --layers --network host --ignorefile deploy/Dockerfile.dockerignore \
    -f deploy/Dockerfile -t "podres:$VERSION" . > "$log" 2>&1 ||
    { tail -n 30 "$log" >&2; echo "image: build failed (whole log: $log)" >&2; exit 1; }
rm -f "$OUT/podres-$VERSION.tar.tmp"
buildah push --quiet "localhost/podres:$VERSION" \
    "docker-archive:$OUT/podres-$VERSION.tar.tmp:docker.io/library/podres:$VERSION"
mv "$OUT/podres-$VERSION.tar.tmp" "$OUT/podres-$VERSION.tar"
echo "image: $OUT/podres-$VERSION.tar (docker.io/library/podres:$VERSION)"
