#!/usr/bin/env bash
# tests/deploy/build_image.sh BUILD_DIR — the image the deploy tests share (ctest fixture
# idem_image): the Debian packages of this build tree (cpack, as scripts/package makes them,
# without a second build), then scripts/image: mmdebstrap's Debian 12, podman import, the
# oci-archive in BUILD_DIR/image/. Prints its size and the time each part took.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/image
rm -rf "$out"
mkdir -p "$out/debs"
t0=$SECONDS
(cd "$build" && cpack -G DEB -B "$out/cpack" >"$out/cpack.log" 2>&1) || { cat "$out/cpack.log"; exit 1; }
mv "$out"/cpack/*.deb "$out/debs/"
rm -rf "$out/cpack"
echo "packages of this build: $(find "$out/debs" -name "*.deb" -printf "%f ")($((SECONDS - t0)) s)"
t0=$SECONDS
archive=$(IDEM_IMAGE_DEBS=$out/debs IDEM_PACKAGE_BUILD=$out "$src/scripts/image" 2>"$out/image.log") ||
  { cat "$out/image.log"; exit 1; }
grep -E '^(rootfs|image)' "$out/image.log" || true
echo "scripts/image: $archive in $((SECONDS - t0)) s"
echo "$archive" >"$out/archive"
