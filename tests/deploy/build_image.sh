#!/usr/bin/env bash
# tests/deploy/build_image.sh BUILD_DIR — the image the deploy tests share (ctest fixture
# idem_image): the Debian packages of this build tree (cpack, as scripts/package makes them,
# without a second build), then scripts/image: mmdebstrap's Debian 12, podman import, the
# oci-archive in BUILD_DIR/image/; then the archive loaded into the podman storage the tests share,
# BUILD_DIR/image/podman (tests/deploy/podman_lib.sh). Prints its size and the time each part
# took. Only the packages in the image are made (idem-coordinator and libidem0: not libidem-dev).
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/image
rm -rf "$out"
mkdir -p "$out/debs"
t0=$SECONDS
(cd "$build" && cpack -G DEB -B "$out/cpack" -D CPACK_COMPONENTS_ALL="coordinator;lib" >"$out/cpack.log" 2>&1) || { cat "$out/cpack.log"; exit 1; }
mv "$out"/cpack/*.deb "$out/debs/"
rm -rf "$out/cpack"
echo "packages of this build: $(find "$out/debs" -name "*.deb" -printf "%f ")($((SECONDS - t0)) s)"
t0=$SECONDS
archive=$(IDEM_IMAGE_DEBS=$out/debs IDEM_PACKAGE_BUILD=$out "$src/scripts/image" 2>"$out/image.log") ||
  { cat "$out/image.log"; exit 1; }
grep -E '^(rootfs|image)' "$out/image.log" || true
echo "scripts/image: $archive in $((SECONDS - t0)) s"
echo "$archive" >"$out/archive"
t0=$SECONDS
export IDEM_PODMAN_DIR=$out/podman
. "$src/tests/deploy/podman_lib.sh"
image=$(image_load "$archive") || { echo "build_image: podman load -i $archive failed" >&2; exit 1; }
echo "loaded $image into $IDEM_PODMAN_DIR in $((SECONDS - t0)) s"
