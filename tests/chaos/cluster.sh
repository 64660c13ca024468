# tests/chaos/cluster.sh — the fault campaign's cluster, each part in a network namespace of its
# own on one private bridge (scripts/chaos sources it). No namespace has a default route or NAT:
# only the addresses below exist, and only inside namespaces this script created.
#
#   ${CH}-hub  the bridge (no address)        ${CH}-ctl  10.77.0.1   this script's probes
#   ${CH}-etcd 10.77.0.2  etcd (election)     ${CH}-dcs  10.77.0.3   etcd for Patroni's DCS
#   ${CH}-pg1  10.77.0.11 Patroni + Postgres  ${CH}-pg2  10.77.0.12  Patroni + Postgres (group g1)
#   ${CH}-pg3  10.77.0.13 Patroni + Postgres  ${CH}-pg4  10.77.0.14  Patroni + Postgres (group g2)
#   ${CH}-c1   10.77.0.21 coordinator         ${CH}-c2   10.77.0.22  coordinator
#   ${CH}-cli  10.77.0.31 the history clients
#
# Two store groups (docs/api.md §17), each a Patroni pair of its own (scopes idem and idem2 on the
# one DCS, wal_level=logical so that slots can move between them, §18), over CH_SLOTS slots: g1
# serves the first half, g2 the second, until moves change that. Each coordinator names both
# (--store g1=... --store g2=...), and each leads one group when both run.
#
# Patroni's DCS is an etcd of its own so that "etcd killed" breaks idem's election and nothing
# else (with one etcd for both, Patroni demotes the primary when its DCS is gone: that is a
# store outage, which the "Postgres primary lost" fault covers).
#
# A partition is nftables rules in a node's namespace dropping packets to and from a peer's
# address (this kernel has no netem): TCP connections then hang as on a real network split.
#
# Source it after setting CH (namespace prefix), CH_DIR (state directory) and CH_BIN (a build
# directory with server/idem-coordinator and tests/chaos/idem-chaos-client). Every process is
# recorded in $CH_DIR/pids/NAME and stopped by that PID.
#
# bench/groups-scale/run sources it too, for the network (ch_net_up/ch_net_down), etcd
# (ch_etcd_start), ch_wait, ch_stop and ch_leftovers, after replacing CH_NET, CH_NODES and ch_ip
# with its own address plan.

CH_NET=10.77.0
CH_NODES="ctl etcd dcs pg1 pg2 pg3 pg4 c1 c2 cli"
CH_SLOTS=${CH_SLOTS:-16} # the coordinators' --slots
CH_TTL=${CH_TTL:-3} # the coordinators' --election-ttl

ch_ip() { # NODE: its address
  case $1 in
    ctl) echo "$CH_NET.1" ;; etcd) echo "$CH_NET.2" ;; dcs) echo "$CH_NET.3" ;;
    pg1) echo "$CH_NET.11" ;; pg2) echo "$CH_NET.12" ;; pg3) echo "$CH_NET.13" ;; pg4) echo "$CH_NET.14" ;;
    c1) echo "$CH_NET.21" ;; c2) echo "$CH_NET.22" ;; cli) echo "$CH_NET.31" ;;
  esac
}

# scripts/chaos runs its nemesis and probes at a higher priority than the cluster (renice -10):
# on a CPU the clients saturate they would otherwise take seconds to see a phase or ask who
# leads, and the faults would land late. It then sets CH_NORMAL=(nice -n 10), which the
# (re)starts below put before the processes of the cluster, so that those run at the normal
# priority again.
CH_NORMAL=()

ch_in() { # NODE CMD...: CMD in NODE's namespace
  local n=$1
  shift
  ip netns exec "$CH-$n" "$@"
}

# ch_net_up: the namespaces, the bridge and one veth pair per node.
ch_net_up() {
  local n
  ip netns add "$CH-hub"
  echo "$CH-hub" >>"$CH_DIR/netns"
  ip -n "$CH-hub" link add br0 type bridge
  ip -n "$CH-hub" link set br0 up
  for n in $CH_NODES; do
    ip netns add "$CH-$n"
    echo "$CH-$n" >>"$CH_DIR/netns"
    ip -n "$CH-hub" link add "v-$n" type veth peer name eth0 netns "$CH-$n"
    ip -n "$CH-hub" link set "v-$n" master br0 up
    ip -n "$CH-$n" addr add "$(ch_ip "$n")/24" dev eth0
    ip -n "$CH-$n" link set eth0 up
    ip -n "$CH-$n" link set lo up
  done
}

# ch_net_down: every namespace this run created (the processes in them must be gone first).
ch_net_down() {
  local ns
  [ -f "$CH_DIR/netns" ] || return 0
  while read -r ns; do ip netns del "$ns" 2>/dev/null || true; done <"$CH_DIR/netns"
  rm -f "$CH_DIR/netns"
}

# ch_cut NODE PEER...: NODE no longer exchanges packets with the PEERs (both directions).
ch_cut() {
  local n=$1 p rules=""
  shift
  for p in "$@"; do
    rules="$rules
add rule inet chaos in ip saddr $(ch_ip "$p") drop
add rule inet chaos out ip daddr $(ch_ip "$p") drop"
  done
  ch_in "$n" nft -f - <<NFT
add table inet chaos
add chain inet chaos in { type filter hook input priority 0 ; }
add chain inet chaos out { type filter hook output priority 0 ; }
$rules
NFT
}

ch_heal() { # NODE: every cut of NODE undone
  ch_in "$1" nft delete table inet chaos 2>/dev/null || true
}

ch_pid() { # NAME: the recorded PID when that process still runs
  local pid
  pid=$(cat "$CH_DIR/pids/$1" 2>/dev/null) || return 0
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && echo "$pid"
  return 0
}

ch_stop() { # NAME [SIGNAL]: stops a recorded process (TERM, then KILL after 10 s)
  local pid i
  pid=$(ch_pid "$1")
  [ -n "$pid" ] || return 0
  kill -"${2:-TERM}" "$pid" 2>/dev/null || true
  kill -CONT "$pid" 2>/dev/null || true
  for i in $(seq 100); do
    [ -n "$(ch_pid "$1")" ] || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

# ch_etcd_start NAME (etcd or dcs): a one-member etcd in its namespace; its data survives a kill.
ch_etcd_start() {
  local n=$1 ip
  ip=$(ch_ip "$n")
  mkdir -p "$CH_DIR/$n"
  # ip netns exec execs: $! is etcd itself (a shell function here would fork a subshell)
  "${CH_NORMAL[@]}" ip netns exec "$CH-$n" etcd --name "$n" --data-dir "$CH_DIR/$n/data" \
    --listen-client-urls "http://$ip:2379" --advertise-client-urls "http://$ip:2379" \
    --listen-peer-urls "http://$ip:2380" --initial-advertise-peer-urls "http://$ip:2380" \
    --initial-cluster "$n=http://$ip:2380" >>"$CH_DIR/$n/etcd.log" 2>&1 </dev/null &
  echo $! >"$CH_DIR/pids/$n"
  disown $! # killed on purpose by the nemesis: no job notice
  ch_wait 20 "etcd $n answers" ch_in ctl curl -sf -m 1 "http://$ip:2379/health"
}

# ch_wait SECONDS WHAT CMD...: polls CMD (every 0.2 s) until it succeeds; 1 and a message on
# the deadline.
ch_wait() {
  local secs=$1 what=$2 until
  shift 2
  until=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$until" ]; then
      echo "chaos: $what: not within ${secs} s" >&2
      return 1
    fi
    sleep 0.2
  done
}

# ch_coord_start NODE (c1 or c2): a coordinator under libfaketime, whose wall clock follows
# $CH_DIR/NODE.faketime ("+0", "+60s", "-60s"; re-read every second). The monotonic clock is
# left alone (FAKETIME_DONT_FAKE_MONOTONIC): election deadlines use it, leases the database's.
# A move is held 3 s in copying (IDEM_TEST_MOVE_HOLD) so that the nemesis's faults land mid-move.
ch_coord_start() {
  local n=$1 ip
  ip=$(ch_ip "$n")
  [ -f "$CH_DIR/$n.faketime" ] || echo "+0" >"$CH_DIR/$n.faketime"
  "${CH_NORMAL[@]}" ip netns exec "$CH-$n" env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 \
    FAKETIME_TIMESTAMP_FILE="$CH_DIR/$n.faketime" FAKETIME_CACHE_DURATION=1 \
    FAKETIME_DONT_FAKE_MONOTONIC=1 IDEM_TEST_MOVE_HOLD=copying:3000 \
    "$CH_BIN/server/idem-coordinator" --listen "$ip:50051" --insecure --store "g1=$CH_PG_URL" \
    --store "g2=$CH_PG2_URL" --slots "$CH_SLOTS" \
    --etcd "http://$(ch_ip etcd):2379" --node-id "$n" --election-ttl "$CH_TTL" \
    --workers 16 --store-timeout-ms 1500 --reaper-interval 0 \
    >>"$CH_DIR/$n.log" 2>&1 </dev/null &
  echo $! >"$CH_DIR/pids/$n"
  disown $!
}

CH_COORDS="$(ch_ip c1):50051,$(ch_ip c2):50051"

ch_leader() { # the leading coordinator's node name (c1 or c2); 1 when none leads
  local a
  a=$(ch_in ctl "$CH_BIN/tests/chaos/idem-chaos-client" --leader "$CH_COORDS") || return 1
  case $a in "$(ch_ip c1)":*) echo c1 ;; "$(ch_ip c2)":*) echo c2 ;; *) return 1 ;; esac
}

ch_group_leader() { # GROUP (g1 or g2): the node leading it (c1 or c2); 1 when none does
  local a
  a=$(ch_in ctl "$CH_BIN/tests/chaos/idem-chaos-client" --group-leader "$1" "$CH_COORDS") || return 1
  case $a in "$(ch_ip c1)":*) echo c1 ;; "$(ch_ip c2)":*) echo c2 ;; *) return 1 ;; esac
}

ch_groups_led() { ch_in ctl "$CH_BIN/tests/chaos/idem-chaos-client" --groups-led "$CH_COORDS"; }

# ch_pair GROUP (g1 or g2): the directory of the group's Patroni pair
ch_pair() { if [ "$1" = g1 ]; then echo "$CH_DIR/patroni"; else echo "$CH_DIR/patroni2"; fi; }

# ch_up: network, both etcds, both Patroni pairs (database "idem" on each), both coordinators,
# each leading a group.
ch_up() {
  local n
  mkdir -p "$CH_DIR/pids"
  ch_net_up
  ch_etcd_start etcd
  ch_etcd_start dcs
  for n in pg1 pg2 pg3 pg4; do
    export "PATRONI_HOST_$n=$(ch_ip "$n")" "PATRONI_NETNS_$n=$CH-$n"
  done
  PATRONI_CTL_NETNS="$CH-ctl" PATRONI_HBA_NET="$CH_NET.0/24" PATRONI_WAL_LEVEL=logical
  export PATRONI_CTL_NETNS PATRONI_HBA_NET PATRONI_WAL_LEVEL
  # the two pairs bootstrap side by side
  PATRONI_PAIR="idem2 pg3 pg4" patroni_start "$CH_DIR/patroni2" "http://$(ch_ip dcs):2379" "$$" \
    >"$CH_DIR/patroni2.start" 2>&1 &
  local p2=$!
  PATRONI_PAIR="idem pg1 pg2" patroni_start "$CH_DIR/patroni" "http://$(ch_ip dcs):2379" "$$"
  wait "$p2" || { cat "$CH_DIR/patroni2.start" >&2; return 1; }
  patroni_createdb "$CH_DIR/patroni" idem
  patroni_createdb "$CH_DIR/patroni2" idem
  CH_PG_URL="$(patroni_pg_url "$CH_DIR/patroni" idem)&connect_timeout=2"
  CH_PG2_URL="$(patroni_pg_url "$CH_DIR/patroni2" idem)&connect_timeout=2"
  ch_coord_start c1
  ch_coord_start c2
  ch_wait 30 "a coordinator leads" ch_leader
  ch_wait 40 "each group led" ch_groups_led
}

# ch_down: every process by PID, then the namespaces.
ch_down() {
  local n
  for n in $(ls "$CH_DIR/pids" 2>/dev/null); do
    case $n in client* | move) ch_stop "$n" KILL ;; esac
  done
  ch_stop c1
  ch_stop c2
  [ -f "$CH_DIR/patroni/pair" ] && patroni_stop "$CH_DIR/patroni"
  [ -f "$CH_DIR/patroni2/pair" ] && patroni_stop "$CH_DIR/patroni2"
  ch_stop etcd
  ch_stop dcs
  ch_leftovers
  ch_net_down
}

# ch_leftovers: processes still running from this run's directory, by command line or environment
# (a postmaster whose agent died with it, say): named on stderr and killed by PID; 1 when there were any.
ch_leftovers() {
  local f pid found=1
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}
    pid=${pid%/cmdline}
    [ "$pid" = "$$" ] && continue
    # the coordinators carry $CH_DIR in their environment (FAKETIME_TIMESTAMP_FILE)
    if cat "$f" "/proc/$pid/environ" 2>/dev/null | tr '\0' ' ' | grep -qF "$CH_DIR/"; then
      echo "chaos: left running: $pid $(tr '\0' ' ' <"$f" | cut -c1-120)" >&2
      kill -9 "$pid" 2>/dev/null || true
      found=0
    fi
  done
  [ "$found" = 1 ]
}
