# shellcheck shell=bash
# tests/deploy/podman_lib.sh — podman for the image tests, sourced: the storage IDEM_PODMAN_DIR
# (the fixture build_image.sh makes BUILD_DIR/image/podman and loads the image into it once; the
# tests, which ctest runs one at a time (RESOURCE_LOCK podman), add and remove only their own
# containers and pods), runc (crun fails on this machine's hybrid cgroups) and no default ulimits
# ("setrlimit: Operation not permitted" otherwise), through a containers.conf that
# CONTAINERS_CONF points at. Then:
#   pod ARGS...                podman on that storage
#   image_load ARCHIVE         loads the archive of scripts/image; prints the image's name
#   image_name                 the name of the image loaded (localhost/idem-coordinator:TAG)
#   ctr_pid CTR                the host's PID of the container's PID 1 (the image has no shell,
#                              no id, no cat: a container's processes are read from the host's /proc)
#   proc_uid PID, proc_exe PID (its program's path in the container), proc_child PID (its first child), proc_root_mode PID (the mount
#   options of its "/": ro or rw)
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
image_name() { pod images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/idem-coordinator:' | head -1; }
image_load() {
  pod load -q -i "$1" >/dev/null || return 1
  image_name
}
ctr_pid() { pod inspect --format '{{.State.Pid}}' "$1"; }
proc_uid() { awk '/^Uid:/ { print $2 }' "/proc/$1/status"; }
proc_exe() { readlink "/proc/$1/exe"; }
proc_child() { awk '{ print $1 }' "/proc/$1/task/$1/children"; }
proc_root_mode() { awk '$5 == "/" { split($6, o, ","); print o[1] }' "/proc/$1/mountinfo" | tail -1; }
