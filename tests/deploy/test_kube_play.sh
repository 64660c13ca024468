#!/usr/bin/env bash
# tests/deploy/test_kube_play.sh BUILD_DIR — deploy/kubernetes's manifests under `podman kube play`
# (4.3: the subset it plays, kube_overlay.py says what stands in for the rest), with the image of
# the fixture build_image.sh: an etcd of the test's own on loopback, the Deployment's two
# coordinators as two pods on the host network against the test's PostgreSQL, the config file and
# tokens from the ConfigMap's and the Secret's data. Checked: both pods run as uid 10001 with a
# read-only root file system (read from the host's /proc: the image has no shell); grpc.health.v1 as the manifests' probes ask it: "idem.v1.Admin"
# SERVING on both (live, ready), "" SERVING on the leader only; `idemctl status` through both;
# then the leader's pod killed (SIGKILL) and the other takes over within the election TTL
# (2 s here) plus a margin: 30 s.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
: "${IDEM_TEST_PG_URL:?IDEM_TEST_PG_URL is not set (run through tests/support/own-db)}"
work=$(mktemp -d /tmp/idem-kube.XXXXXX)
chmod 755 "$work"
export IDEM_PODMAN_DIR=$build/image/podman
. "$src/tests/deploy/podman_lib.sh"
etcd_pid=""
cleanup() {
  set +e
  [ -f "$work/play.yaml" ] && pod kube down "$work/play.yaml" >/dev/null 2>&1
  pod pod rm -f -a >/dev/null 2>&1
  if [ -n "$etcd_pid" ]; then kill -TERM "$etcd_pid" 2>/dev/null; wait "$etcd_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "test_kube_play: FAILED: $*" >&2
  for c in $(pod ps -a --format '{{.Names}}' 2>/dev/null | grep idem-coordinator); do
    echo "--- $c" >&2; pod logs "$c" 2>&1 | tail -n 15 >&2
  done
  exit 1
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
[ -s "$build/image/archive" ] || fail "no image: the fixture build_image.sh did not make one"
image=$(image_name) && [ -n "$image" ] || fail "no idem-coordinator image in $IDEM_PODMAN_DIR (the fixture loads it)"

# an etcd of the test's own, on loopback
cport=$(free_port) pport=$(free_port)
etcd --name kube --data-dir "$work/etcd" --listen-client-urls "http://127.0.0.1:$cport" \
  --advertise-client-urls "http://127.0.0.1:$cport" --listen-peer-urls "http://127.0.0.1:$pport" \
  --initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "kube=http://127.0.0.1:$pport" \
  >"$work/etcd.log" 2>&1 &
etcd_pid=$!

p0=$(free_port) p1=$(free_port)
addr=("127.0.0.1:$p0" "127.0.0.1:$p1")
token=kube-operator-$$-$RANDOM-token # 16 to 256 characters (docs/security.md)
export IDEM_OVERLAY_TOKENS="$token default operator
"
/usr/bin/python3 "$src/tests/deploy/kube_overlay.py" "$src/deploy/kubernetes" "$image" \
  "http://127.0.0.1:$cport" "$IDEM_TEST_PG_URL" "$work/files" "$p0" "$p1" >"$work/play.yaml" ||
  fail "kube_overlay.py"
chmod -R a+rX "$work/files"
t0=$SECONDS
pod kube play "$work/play.yaml" >"$work/play.out" 2>&1 || { cat "$work/play.out"; fail "podman kube play"; }
health() { /usr/bin/python3 "$src/tests/deploy/health.py" "$1" "$2"; }
ctr() { pod ps -a --format '{{.Names}}' | grep "^idem-coordinator-$1-" | grep -v infra | head -1; }

# both live (idem.v1.Admin), one leader ("")
deadline=$((SECONDS + 60))
until [ "$(health "${addr[0]}" idem.v1.Admin)" = SERVING ] && [ "$(health "${addr[1]}" idem.v1.Admin)" = SERVING ] &&
  { [ "$(health "${addr[0]}" "")" = SERVING ] || [ "$(health "${addr[1]}" "")" = SERVING ]; }; do
  [ $SECONDS -lt $deadline ] || fail "the two pods did not both serve, one leading, in 60 s"
  sleep 0.5
done
echo "podman kube play: both pods serve after $((SECONDS - t0)) s"
if [ "$(health "${addr[0]}" "")" = SERVING ]; then lead=0 stand=1; else lead=1 stand=0; fi
for i in 0 1; do
  c=$(ctr $i)
  [ -n "$c" ] || fail "no container of idem-coordinator-$i"
  p=$(ctr_pid "$c") && [ -n "$p" ] || fail "no PID of $c"
  [ "$(proc_uid "$p")" = 10001 ] || fail "$c runs as uid $(proc_uid "$p")"
  [ "$(proc_root_mode "$p")" = ro ] || fail "$c's root file system is mounted '$(proc_root_mode "$p")', not ro"
  echo "pod $i ($c): uid 10001, read-only root; health idem.v1.Admin $(health "${addr[$i]}" idem.v1.Admin), \"\" $(health "${addr[$i]}" "")"
done
[ "$(health "${addr[$stand]}" "")" = NOT_SERVING ] || fail "the standby's \"\" is $(health "${addr[$stand]}" "")"
IDEM_TOKEN=$token "$build/tools/idemctl/idemctl" --addr "${addr[0]},${addr[1]}" status >"$work/status.out" 2>&1 ||
  fail "idemctl status: $(cat "$work/status.out")"
sed 's/^/  /' "$work/status.out"

# the leader's pod killed: the other takes over
pod_name=$(pod pod ps --format '{{.Name}}' | grep "^idem-coordinator-$lead-" | head -1)
t0=$(date +%s%3N)
pod pod kill --signal KILL "$pod_name" >/dev/null || fail "podman pod kill $pod_name"
deadline=$((SECONDS + 30))
until [ "$(health "${addr[$stand]}" "")" = SERVING ]; do
  [ $SECONDS -lt $deadline ] || fail "the standby did not take over within 30 s of the leader's pod's death"
  sleep 0.2
done
echo "leader pod $pod_name killed: idem-coordinator-$stand leads after $(($(date +%s%3N) - t0)) ms"
IDEM_TOKEN=$token "$build/tools/idemctl/idemctl" --addr "${addr[$stand]}" status >"$work/status2.out" 2>&1 ||
  fail "idemctl status after the takeover: $(cat "$work/status2.out")"
echo "test_kube_play: ok"
