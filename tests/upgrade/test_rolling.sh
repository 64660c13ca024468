#!/usr/bin/env bash
# tests/upgrade/test_rolling.sh BUILD_DIR — a rolling upgrade from the previous release under load,
# then the same backwards (docs/upgrading.md).
#
# The previous release is built from the commit CHANGELOG.md names for it (scripts/lib/release.sh:
# a git worktree of that commit, only idem-coordinator, kept in BUILD_DIR/prev-release so that a
# rerun builds nothing). A cluster of two nodes (n1, n2) on two slot groups (g1: this test's
# database, g2: a second one on the same server) with one private etcd starts on the previous
# release; history clients (tests/chaos: idem-chaos-client, this build's libidem) drive a
# contended workload through both addresses and record every call. Then, one node at a time:
#   up n1, up n2       SIGTERM (the node drains and resigns), the new build started on the same
#                      address; the first new node applies the migrations while the old one serves;
#                      `idemctl status` warns of mixed versions until both run the new one;
#   down n2, down n1   the same with the previous release's binary on the schema the new one left
#                      (the promise: a release runs on its successor's schema, whose migrations
#                      expand; docs/upgrading.md says so, and this checks it).
# Each restart lasts from its SIGTERM until both groups are led again, one by each node (the
# balance rule). The independent checker (tests/chaos/checker/idem_check.py) reads the whole
# history: 0 violations (no acknowledged completion lost, no second PROCEED of an attempt, ...).
# Printed: each restart's drain and serve-again times, the calls answered during it and those that
# failed (a transient error libidem's retries did not absorb) or whose outcome the client cannot
# know (a lost answer), and the checker's summary and figures. Each restart has two parts: its
# drain (from SIGTERM until the node serves again: the drained node's groups go to the other
# node) and its rebalance (until each node leads one group: the balancer's yield hands one
# back); a call belongs to the part it was invoked in. Fails on a violation, a node that does
# not start or stop cleanly, a missing warning, a call that failed with a transient error
# anywhere, or a lost answer in a rebalance where this release hands the group over or takes it,
# or in a drain of this release:
#   up-n1 rebalance   (0.1.0's n2 yields to the new n1, whose fence lets n2's commits end)
#   up-n2 rebalance   (the new n1 yields to the new n2)
#   down-n2 rebalance (the new n1 yields one group to 0.1.0's n2)
#   down-n2 drain     (the new n2 drains: its groups go to the new n1)
#   down-n1 drain     (the new n1 drains: its groups go to 0.1.0's n2)
# The drains' lost answers came from a client idle on its connection to the draining node (a
# participant between two calls): it read the node's GOAWAY only at its next call, written on
# that connection to a server whose gRPC core had begun its shutdown and ended it CANCELLED
# unhandled. libidem now reads first and sends only on a connected channel; a try still lost
# there was repeated on the other node and refused (lease-lost, finished-differently,
# fingerprint-mismatch), and libidem now reports such a refusal, which proves the lost try did
# nothing, as the call's answer with its outcome known (docs/api.md §20; docs/internals.md, "An
# idle client's next call").
# A node of this release that hands a group over lets the calls it admitted be answered (their
# commits done) before its key goes, so no fence, not even 0.1.0's that ends a former leader's
# open transactions at once, finds one (docs/internals.md, "The drain"). Counted, not checked,
# where only the previous release acts: up-n1 drain (0.1.0's n1 to 0.1.0's n2), up-n2 drain
# (0.1.0's n2 shuts gRPC down without waiting for its clients to move: calls that reach it after
# are CANCELLED unhandled, and a repeat elsewhere refused with a reason that proves nothing,
# e.g. ABORTED in-progress, leaves the caller an unknown outcome), down-n1 rebalance (0.1.0's n2
# yields to 0.1.0's n1: 0.1.0's yield does not wait and its fence ends the commits under way).
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
root=${IDEM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
url=${IDEM_TEST_PG_URL:?IDEM_TEST_PG_URL is not set (run through tests/support/own-db)}
. "$root/scripts/lib/release.sh"
new_coord=$build/server/idem-coordinator
ctl=$build/tools/idemctl/idemctl
client=$build/tests/chaos/idem-chaos-client
checker=$root/tests/chaos/checker/idem_check.py
clients=${IDEM_UPGRADE_CLIENTS:-4}
ttl=2

work=$(mktemp -d /tmp/idem-rolling.XXXXXX)
chmod 755 "$work"
pids=() # etcd and the clients; the nodes are in node_pid[]
declare -A node_pid node_addr node_bin
query=""
base=$url
case $base in *\?*) query="?${base#*\?}"; base=${base%%\?*} ;; esac
server=${base%/*}
db2="${base##*/}_g2"
url2="$server/$db2$query"
cleanup() {
  set +e
  for n in "${!node_pid[@]}"; do [ -z "${node_pid[$n]}" ] || kill -KILL "${node_pid[$n]}" 2>/dev/null; done
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  psql -qAt "$server/postgres$query" -c "DROP DATABASE IF EXISTS $db2 WITH (FORCE)" >/dev/null 2>&1
  if [ "${keep:-${IDEM_UPGRADE_KEEP:-0}}" = 1 ]; then echo "test_rolling: logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
fail() {
  echo "test_rolling: FAILED: $*" >&2
  for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }; done
  keep=1
  exit 1
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { date +%s%3N; }
json_field() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# --- the previous release, built from its commit (kept) ---
t0=$SECONDS
prev=$(release_previous "$root") || fail "no previous release in CHANGELOG.md"
prev_version=${prev% *}
new_version=$("$new_coord" --version | awk '{print $2}') # the build's: X.Y.Z or X.Y.(Z+1)-dev+COMMIT
prev_build=$(release_build "$root" "$build/prev-release" RelWithDebInfo idem-coordinator) ||
  fail "cannot build the previous release $prev"
old_coord=$prev_build/server/idem-coordinator
[ "$("$old_coord" --version)" = "idem-coordinator $prev_version" ] ||
  fail "the previous release's binary says '$("$old_coord" --version)', not $prev_version"
echo "previous release $prev_version (${prev#* }) built in $((SECONDS - t0)) s; this build $new_version"

# --- the cluster: one etcd, two databases, two nodes of the previous release ---
psql -qAt "$server/postgres$query" -c "CREATE DATABASE $db2" >/dev/null || fail "cannot create $db2"
etcd_port=$(free_port) etcd_peer=$(free_port)
etcd_url="http://127.0.0.1:$etcd_port"
etcd --name rolling --data-dir "$work/etcd" --listen-client-urls "$etcd_url" \
  --advertise-client-urls "$etcd_url" --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "rolling=http://127.0.0.1:$etcd_peer" --log-level warn >"$work/etcd.log" 2>&1 &
pids+=($!)
deadline=$((SECONDS + 30))
until curl -sf -m 1 -o /dev/null "$etcd_url/health"; do
  [ "$SECONDS" -lt "$deadline" ] || fail "etcd did not answer within 30 s"
  sleep 0.1
done

# start NODE BINARY: the node on its address (kept across restarts); waits until it answers
# GetStatus with that binary's version (60 s)
start() {
  local n=$1 bin=$2 want
  want=$("$bin" --version | awk '{print $2}')
  node_bin[$n]=$bin
  local try
  for try in 1 2 3; do
    "$bin" --listen "${node_addr[$n]}" --node-id "$n" --etcd "$etcd_url" --slots 64 \
      --election-ttl "$ttl" --store "g1=$url" --store "g2=$url2" >>"$work/$n.log" 2>&1 &
    node_pid[$n]=$!
    local deadline=$((SECONDS + 60))
    while :; do
      if "$ctl" --addr "${node_addr[$n]}" --deadline-ms 1000 --json status >"$work/$n.status" 2>/dev/null &&
        [ "$(json_field "$work/$n.status" version)" = "$want" ]; then
        return 0
      fi
      if ! kill -0 "${node_pid[$n]}" 2>/dev/null; then
        local rc=0
        wait "${node_pid[$n]}" || rc=$?
        node_pid[$n]=""
        # its address taken meanwhile (a port of another test's): again, up to 3 times
        tail -n 5 "$work/$n.log" | grep -qi "cannot start the server\|address already in use" && continue 2
        fail "$n ($want) exited $rc during its start"
      fi
      [ "$SECONDS" -lt "$deadline" ] || fail "$n ($want) did not answer within 60 s"
      sleep 0.1
    done
  done
  fail "$n: its address ${node_addr[$n]} stayed taken"
}

# stop NODE: SIGTERM; the node drains and exits 0 (30 s); the drain's milliseconds in drain_ms
stop() {
  local n=$1 t rc=0
  t=$(now_ms)
  kill -TERM "${node_pid[$n]}"
  local waited=0
  while kill -0 "${node_pid[$n]}" 2>/dev/null; do
    [ "$waited" -lt 300 ] || fail "$n did not exit within 30 s of SIGTERM"
    sleep 0.1
    waited=$((waited + 1))
  done
  wait "${node_pid[$n]}" || rc=$?
  node_pid[$n]=""
  [ "$rc" = 0 ] || fail "$n exited $rc after SIGTERM (want 0: drained)"
  drain_ms=$(($(now_ms) - t))
}

# balanced: both groups led, one by each node (the balance rule settles within two TTLs)
balanced() {
  local l1 l2
  l1=$("$client" --group-leader g1 "$addrs" 2>/dev/null) || return 1
  l2=$("$client" --group-leader g2 "$addrs" 2>/dev/null) || return 1
  [ -n "$l1" ] && [ -n "$l2" ] && [ "$l1" != "$l2" ]
}
wait_balanced() {
  local deadline=$((SECONDS + 60))
  until balanced; do
    [ "$SECONDS" -lt "$deadline" ] || fail "the two groups were not led one by each node within 60 s"
    sleep 0.1
  done
}

node_addr[n1]="127.0.0.1:$(free_port)"
node_addr[n2]="127.0.0.1:$(free_port)"
addrs="${node_addr[n1]},${node_addr[n2]}"
start n1 "$old_coord"
start n2 "$old_coord"
wait_balanced
echo "cluster: n1 ${node_addr[n1]}, n2 ${node_addr[n2]} on $prev_version, groups g1 and g2 led one by each"

# --- the load: history clients through both addresses ---
seed=$(date +%s)
for p in $(seq 0 $((clients - 1))); do
  "$client" --address "$addrs" --process "$p" --seconds 600 --seed "$((seed + p))" --run "rolling$seed" \
    --out "$work/history-$p.jsonl" >>"$work/clients.log" 2>&1 &
  pids+=($!)
done
client_pids=("${pids[@]:1}")
sleep 3 # the load's baseline before the first restart

# restart NODE BINARY KIND: one restart, recorded in faults.jsonl as a "fault" of kind KIND (the
# checker's figures: ok share while it lasted, first ok after it)
restarts=()
restart() {
  local n=$1 bin=$2 kind=$3 t_start t_up t_end
  t_start=$(now_ms)
  printf '{"t":%s,"fault":"%s","phase":"start","target":"%s"}\n' "$t_start" "$kind" "$n" >>"$work/faults.jsonl"
  stop "$n"
  start "$n" "$bin"
  t_up=$(now_ms)
  wait_balanced
  t_end=$(now_ms)
  printf '{"t":%s,"fault":"%s","phase":"end","target":"%s"}\n' "$t_end" "$kind" "$n" >>"$work/faults.jsonl"
  restarts+=("$kind $n $t_start $t_up $t_end")
  echo "$kind: $n drained in $drain_ms ms, served again after $((t_up - t_start)) ms, groups balanced after $((t_end - t_start)) ms"
}

# mixed WANT: `idemctl status` over both nodes warns of mixed versions (WANT=yes) or does not
mixed() {
  "$ctl" --addr "$addrs" --deadline-ms 2000 status >"$work/status.out" 2>"$work/status.err" ||
    fail "idemctl status over both nodes: exit $? ($(cat "$work/status.err"))"
  if [ "$1" = yes ]; then
    grep -q "warning: the cluster runs mixed versions: .*$prev_version.*$new_version\|warning: the cluster runs mixed versions: .*$new_version.*$prev_version" \
      "$work/status.err" || fail "no mixed-version warning: $(cat "$work/status.out" "$work/status.err")"
  else
    ! grep -q "mixed versions" "$work/status.err" || fail "a mixed-version warning on one version: $(cat "$work/status.err")"
  fi
}
schema_of() { psql -qAt "$1" -c "SELECT max(version) FROM idem_schema_version"; }
mixed no
schema_before=$(schema_of "$url")

# --- up: n1, then n2 ---
restart n1 "$new_coord" up-n1
newest=$(json_field "$work/n1.status" schema_newest)
for u in "$url" "$url2"; do
  [ "$(schema_of "$u")" = "$newest" ] || fail "after n1's upgrade the schema of $u is at $(schema_of "$u"), not $newest"
  psql -qAt "$u" -c "SELECT needs FROM idem_schema_version LIMIT 1" >/dev/null ||
    fail "after n1's upgrade idem_schema_version of $u has no 'needs'"
done
echo "schema: $schema_before → $newest (migrated by n1 while n2 ran $prev_version and served)"
mixed yes
echo "idemctl status during the upgrade: $(cat "$work/status.err")"
restart n2 "$new_coord" up-n2
mixed no
sleep 2

# --- down: n2, then n1, on the schema the new release left ---
restart n2 "$old_coord" down-n2
mixed yes
restart n1 "$old_coord" down-n1
mixed no
sleep 2

# --- the end: the clients stopped (their histories hold every answer so far), the nodes drained ---
for p in "${client_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${client_pids[@]}"; do wait "$p" 2>/dev/null || true; done
stop n1
stop n2

/usr/bin/python3 - "$work/history.jsonl" "$work"/history-*.jsonl <<'PY'
import heapq, json, sys
def lines(path):
    with open(path) as f:
        for line in f:
            if line.endswith("\n"):
                yield (json.loads(line)["t"], line)
with open(sys.argv[1], "w") as out:
    for _, line in heapq.merge(*(lines(p) for p in sys.argv[2:])):
        out.write(line)
PY

# calls invoked during each restart's drain or rebalance: `failed` = a transient error libidem's
# retries did not absorb (UNAVAILABLE, DEADLINE_EXCEEDED, ...); `unknown` = an answer whose outcome
# the client cannot know (history type info: a try was sent and its answer lost, and no later try
# settled it; e.g. a repeat refused with ABORTED "in progress", which cannot tell whether the first
# try began the step): a lost answer
served=0
/usr/bin/python3 - "$work/history.jsonl" "${restarts[@]}" <<'PY' || served=$?
import json, sys
windows = [r.split() for r in sys.argv[2:]]  # kind node t_start t_up t_end
transient = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "UNKNOWN", "CANCELLED", "RESOURCE_EXHAUSTED"}
# the parts where this release hands the groups over or takes them (the comment at the top)
checked = [("up-n1", "rebalance"), ("up-n2", "rebalance"), ("down-n2", "rebalance"),
           ("down-n2", "drain"), ("down-n1", "drain")]
parts = [(w[0], p) for w in windows for p in ("drain", "rebalance")]
def blank():
    return {"calls": 0, "ok": 0, "failed": {}, "unknown": {}}
stats = {k: blank() for k in parts}
total = blank()
invoked = {}  # process -> its pending call's invoke time
lost = []
def add(s, o):
    s["calls"] += 1
    s["ok"] += o["type"] == "ok"
    e = o.get("error", "no answer")
    if o["type"] == "info":
        s["unknown"][e] = s["unknown"].get(e, 0) + 1
    elif o["type"] == "fail" and e in transient:
        s["failed"][e] = s["failed"].get(e, 0) + 1
with open(sys.argv[1]) as f:
    for line in f:
        o = json.loads(line)
        if o["type"] == "invoke":
            invoked[o["process"]] = o["t"]
            continue
        ti = invoked.pop(o["process"], None)
        if ti is None:
            continue
        add(total, o)
        for kind, node, t0, tup, t1 in windows:
            if int(t0) <= ti <= int(t1):
                part = "drain" if ti < int(tup) else "rebalance"
                add(stats[(kind, part)], o)
                if o["type"] == "info":
                    lost.append(f"{kind} {part}: invoked at {ti:.3f}: {line.strip()}")
def words(d):
    return "%d%s" % (sum(d.values()), " (" + ", ".join(f"{k} {v}" for k, v in sorted(d.items())) + ")" if d else "")
def merged(a, b):
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}
for kind, node, t0, tup, t1 in windows:
    d, r = stats[(kind, "drain")], stats[(kind, "rebalance")]
    print(f"rolling: {kind}: {(int(t1) - int(t0)) / 1000:.1f} s, {d['calls'] + r['calls']} calls,"
          f" {d['ok'] + r['ok']} ok, failed {words(merged(d['failed'], r['failed']))},"
          f" outcome unknown: drain {words(d['unknown'])}, rebalance {words(r['unknown'])}")
print(f"rolling: the whole run: {total['calls']} calls answered, {total['ok']} ok,"
      f" failed {words(total['failed'])}, outcome unknown {words(total['unknown'])}")
for l in lost:
    print("rolling: outcome unknown in " + l)
count = {k: sum(stats[k]["unknown"].values()) for k in parts}
print("rolling: lost answers where this release hands a group over, takes it or drains (checked): "
      + ", ".join(f"{k} {p} {count[(k, p)]}" for k, p in checked))
print("rolling: lost answers where only the previous release acts (counted): "
      + ", ".join(f"{k} {p} {count[(k, p)]}" for k, p in parts if (k, p) not in checked))
# the other node served while one restarted (the first new node's migrations included)
if any(stats[(w[0], "drain")]["ok"] + stats[(w[0], "rebalance")]["ok"] == 0 for w in windows):
    sys.exit(1)
# no call failed with a transient error: a draining node answers what it took and sends the rest
# elsewhere, and libidem retries what gRPC killed (docs/upgrading.md, "What to watch")
if total["failed"]:
    sys.exit(2)
# no answer lost where this release hands a group over, takes one or drains: the node that hands
# it over lets its admitted calls be answered before its key goes, a taker's fence of this
# release lets a former leader's commits end before it ends anything (docs/internals.md, "The
# drain"), and a drained node's clients read its GOAWAY before they write (libidem)
if any(count[k] for k in checked):
    sys.exit(3)
sys.exit(0)
PY
[ "$served" != 1 ] || fail "a restart during which no call was answered ok (the other node did not serve)"
[ "$served" != 2 ] || fail "calls failed with a transient error that libidem's retries did not absorb"
[ "$served" != 3 ] || fail "answers lost (outcome unknown) where a node of this release handed a group over, took one or drained"
[ "$served" = 0 ] || fail "the figures could not be computed (exit $served)"

st=0
/usr/bin/python3 "$checker" "$work/history.jsonl" --faults "$work/faults.jsonl" >"$work/check.txt" || st=$?
cat "$work/check.txt"
[ "$st" = 0 ] || fail "the history checker found violations (exit $st)"
grep -q "violations 0$" "$work/check.txt" || fail "no checker summary"
echo "rolling: $prev_version → $new_version → $prev_version under load: 0 violations (no lost acknowledged completion, no second PROCEED), $((SECONDS - t0)) s in all"
