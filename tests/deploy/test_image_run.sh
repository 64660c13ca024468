#!/usr/bin/env bash
# tests/deploy/test_image_run.sh BUILD_DIR — the OCI image of scripts/image (fixture: build_image.sh),
# really run: loaded from its oci-archive by the fixture into the storage the tests share; its
# labels name this build's version and commit, it runs as uid 10001 and weighs what is printed; then
# `podman run --network host` against this test's PostgreSQL on loopback, every flag from its
# IDEM_* variable; the C example's step through it (ran, then replayed); `idemctl status` from the
# host and idemctl inside the container; PID 1 is tini and its child the coordinator, both uid
# 10001 (read from the host's /proc: the image has no shell); SIGTERM to the container (tini forwards it):
# the coordinator drains, exit status 0, "drained" in its log.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
: "${IDEM_TEST_PG_URL:?IDEM_TEST_PG_URL is not set (run through tests/support/own-db)}"
work=$(mktemp -d /tmp/idem-imgrun.XXXXXX)
export IDEM_PODMAN_DIR=$build/image/podman
. "$src/tests/deploy/podman_lib.sh"
name=idem-imgrun-$$
cleanup() {
  set +e
  pod rm -f -t 0 "$name" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "test_image_run: FAILED: $*" >&2; pod logs "$name" 2>&1 | tail -n 20 >&2; exit 1; }
[ -s "$build/image/archive" ] || fail "no image: the fixture build_image.sh did not make one"
archive=$(cat "$build/image/archive")

image=$(image_name) && [ -n "$image" ] || fail "no idem-coordinator image in $IDEM_PODMAN_DIR (the fixture loads it)"
echo "$image from $(basename "$archive") ($(du -m "$archive" | cut -f1) MB)"
label() { pod image inspect --format "{{index .Labels \"$1\"}}" "$image"; }
want=$("$build/server/idem-coordinator" --version | awk '{print $2}')
[ "$(label org.opencontainers.image.version)" = "$want" ] ||
  fail "label version '$(label org.opencontainers.image.version)', the build says $want"
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
[ "$(label org.opencontainers.image.revision)" = "$commit" ] ||
  fail "label revision '$(label org.opencontainers.image.revision)', HEAD is $commit"
[ "$(pod image inspect --format '{{.Config.User}}' "$image")" = "10001:10001" ] ||
  fail "the image's user is '$(pod image inspect --format '{{.Config.User}}' "$image")', not 10001:10001"
size=$(pod image inspect --format '{{.Size}}' "$image")
echo "labels: version $want, revision $commit; user 10001; size $((size / 1000000)) MB unpacked"
# 59 MB measured (docs/kubernetes.md says what is in it; 147 MB with Debian's Essential set); the
# bound catches a regression such as a shell, documentation or apt's lists left in
[ "$size" -lt 70000000 ] || fail "the image weighs $((size / 1000000)) MB, over 70 MB"

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
pod run -d --name "$name" --network host \
  -e IDEM_PG="$IDEM_TEST_PG_URL" -e IDEM_LISTEN="$addr" -e IDEM_NODE_ID=image -e IDEM_LOG_FORMAT=text \
  "$image" >/dev/null || fail "podman run"
ctl=$build/tools/idemctl/idemctl
deadline=$((SECONDS + 60))
until "$ctl" --addr "$addr" --deadline-ms 1000 status >"$work/status.out" 2>&1; do
  [ "$(pod inspect --format '{{.State.Running}}' "$name")" = true ] || fail "the container stopped"
  [ $SECONDS -lt $deadline ] || fail "no answer on $addr in 60 s: $(cat "$work/status.out")"
  sleep 0.3
done
echo "idemctl status (host) after $((SECONDS - deadline + 60)) s:"; sed 's/^/  /' "$work/status.out"
grep -qF "$want" "$work/status.out" || fail "idemctl status does not show version $want"
pod exec "$name" idemctl --addr "$addr" status >"$work/inside.out" 2>&1 || fail "idemctl inside: $(cat "$work/inside.out")"
echo "idemctl inside the container: $(grep -c . "$work/inside.out") lines, $(pod exec "$name" idemctl --version)"
pid1=$(ctr_pid "$name") && [ -n "$pid1" ] || fail "no PID of the container"
case $(proc_exe "$pid1") in */usr/bin/tini) ;; *) false ;; esac || fail "PID 1 is $(proc_exe "$pid1"), not /usr/bin/tini"
coord=$(proc_child "$pid1")
[ -n "$coord" ] && case $(proc_exe "$coord") in */usr/bin/idem-coordinator) ;; *) false ;; esac ||
  fail "PID 1's child is '${coord:+$(proc_exe "$coord")}', not /usr/bin/idem-coordinator"
[ "$(proc_uid "$pid1")" = 10001 ] && [ "$(proc_uid "$coord")" = 10001 ] ||
  fail "tini runs as uid $(proc_uid "$pid1"), the coordinator as $(proc_uid "$coord"), not 10001"
echo "PID 1 $(proc_exe "$pid1") (host PID $pid1), its child $(proc_exe "$coord") (host PID $coord), both uid 10001"

# the C example, built against this build's libidem, through the container
cc -Wall -Werror -I"$src/client-lib/include" "$src/client-lib/examples/c/step.c" \
  -L"$build/client-lib" -lidem -Wl,-rpath,"$build/client-lib" -o "$work/step" || fail "cc step.c"
order=order-image-$$
IDEM_ADDRESS=$addr "$work/step" "$order" >"$work/step1.out" 2>&1 || fail "the example: $(cat "$work/step1.out")"
IDEM_ADDRESS=$addr "$work/step" "$order" >"$work/step2.out" 2>&1 || fail "the example again: $(cat "$work/step2.out")"
grep -q "^ran" "$work/step1.out" || fail "the first run did not run the step: $(cat "$work/step1.out")"
grep -q "^replayed" "$work/step2.out" || fail "the second run did not replay: $(cat "$work/step2.out")"
echo "example step, first run:"; sed "s/^/  /" "$work/step1.out"
echo "example step, second run:"; sed 's/^/  /' "$work/step2.out"

# SIGTERM: tini forwards it, the coordinator drains and exits 0
pod kill --signal TERM "$name" >/dev/null
code=$(timeout 60 podman --root "$IDEM_PODMAN_DIR/root" --runroot "$IDEM_PODMAN_DIR/run" --storage-driver vfs wait "$name") ||
  fail "the container did not stop within 60 s of SIGTERM"
pod logs "$name" >"$work/ctr.log" 2>&1
grep -q "drained" "$work/ctr.log" || fail "no 'drained' line in the log after SIGTERM"
[ "$code" = 0 ] || fail "exit status $code after SIGTERM"
echo "SIGTERM: exit 0; $(grep -m1 drained "$work/ctr.log")"
echo "test_image_run: ok"
