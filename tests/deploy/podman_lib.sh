# shellcheck shell=bash
# tests/deploy/podman_lib.sh — podman for the image tests, sourced: a storage of the test's own
# (under $IDEM_PODMAN_DIR, which the caller removes), runc (crun fails on this machine's hybrid
# cgroups) and no default ulimits ("setrlimit: Operation not permitted" otherwise), through a
# containers.conf that CONTAINERS_CONF points at. Then:
#   pod ARGS...                podman on that storage
#   image_load ARCHIVE         loads the archive of scripts/image; prints the image's name
#   skip WHY                   says why a step cannot run here and exits 0 (ctest's SKIP_RETURN_CODE
#                              is not used: the test prints its reason and the rest of CI runs)
: "${IDEM_PODMAN_DIR:?IDEM_PODMAN_DIR is not set}"
mkdir -p "$IDEM_PODMAN_DIR"
cat >"$IDEM_PODMAN_DIR/containers.conf" <<'CONF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF=$IDEM_PODMAN_DIR/containers.conf
pod() { podman --root "$IDEM_PODMAN_DIR/root" --runroot "$IDEM_PODMAN_DIR/run" --storage-driver vfs "$@"; }
image_load() {
  pod load -q -i "$1" >/dev/null || return 1
  pod images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/idem-coordinator:' | head -1
}
