# scripts/lib/patroni.sh — a Patroni pair on loopback: two PostgreSQL nodes (pg1, pg2 unless named), each
# managed by its own `patroni` agent, with the etcd3 DCS on an etcd the caller runs, synchronous
# replication (synchronous_mode: true, not strict: see docs/ha.md) and the REST API on loopback.
# For scripts/quickstart --ha, scripts/bench --ha and tests/ha. Installs nothing (deps.sh does).
#
# Source it; then:
#   patroni_start DIR ETCD_URL [OWNER_PID]  configs into DIR (first start: free ports, owned by
#                       postgres), starts both agents, waits (deadline) until one node is primary
#                       and the other a streaming synchronous standby; a second start on the same
#                       DIR finds the data and the ports. With OWNER_PID, a watcher stops the pair
#                       when that process is gone (a killed test cannot leave it running).
#   patroni_wait_ready DIR [SECONDS]        that wait alone (default 90 s); 0 when ready
#   patroni_primary DIR                     the name of the node that answers GET /primary 200
#   patroni_standby DIR                     the other one
#   patroni_agent_pid DIR NAME              the agent's PID (empty when not running)
#   patroni_postmaster_pid DIR NAME         the postmaster's PID: line 1 of postmaster.pid (the
#                                           agent daemonizes the postmaster; its parent is PID 1)
#   patroni_start_node DIR NAME             starts one agent again (after a kill)
#   patroni_kill_host DIR NAME              kill -9 of the agent, the postmaster and its children:
#                                           a dead host
#   patroni_switchover DIR                  a planned switchover to the standby (patronictl)
#   patroni_pg_url DIR [DB]                 the multi-host URL, target_session_attrs=read-write
#   patroni_createdb DIR DB                 creates DB on the primary unless it exists
#   patroni_env DIR                         shell assignments: ports, PIDs, REST URLs, settings
#   patroni_stop DIR                        stops both agents (and their postmasters) by PID
# Placement (scripts/chaos): PATRONI_HOST_<name> is the address node <name> listens on (default
# 127.0.0.1), PATRONI_NETNS_<name> the network namespace its agent runs in, PATRONI_CTL_NETNS the
# namespace this script's own probes (curl, psql, patronictl) run from, PATRONI_START_NICE a
# niceness increment for the agents patroni_start_node starts, and PATRONI_HBA_NET one
# more network that may connect (e.g. 10.77.0.0/24).
# A second pair (scripts/chaos: a store group of its own): PATRONI_PAIR="SCOPE NODE_A NODE_B" at
# its first patroni_start names its Patroni scope and its two nodes (default "idem pg1 pg2"); DIR
# remembers them (DIR/pair), so every other call finds them. Both pairs may share one DCS.
# PATRONI_WAL_LEVEL (default replica; logical for slot moves, docs/api.md §18: Patroni then
# leaves logical slots alone, ignore_slots) is written at bootstrap.
# Timing: PATRONI_TTL (default 10), PATRONI_LOOP_WAIT (1), PATRONI_RETRY_TIMEOUT (4) seconds,
# written into the DCS at bootstrap. Every process is found and stopped by PID only.

PATRONI_TTL=${PATRONI_TTL:-10}
PATRONI_LOOP_WAIT=${PATRONI_LOOP_WAIT:-1}
PATRONI_RETRY_TIMEOUT=${PATRONI_RETRY_TIMEOUT:-4}
PATRONI_PG_BIN=${PATRONI_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
PATRONI_NODES="pg1 pg2" # the default pair's nodes
PATRONI_WAL_LEVEL=${PATRONI_WAL_LEVEL:-replica}

patroni__pair() { # DIR: "SCOPE NODE_A NODE_B" of the pair in DIR
  cat "$1/pair" 2>/dev/null || echo "idem $PATRONI_NODES"
}
patroni__nodes() { # DIR: the pair's two node names
  local s a b
  read -r s a b <<<"$(patroni__pair "$1")"
  echo "$a $b"
}
patroni__scope() { # DIR
  local s a b
  read -r s a b <<<"$(patroni__pair "$1")"
  echo "$s"
}

patroni__host() { # NAME: the node's address
  local v="PATRONI_HOST_$1"
  echo "${!v:-127.0.0.1}"
}

patroni__ctl() { # CMD...: CMD where the probes run (PATRONI_CTL_NETNS, else here)
  if [ -n "${PATRONI_CTL_NETNS:-}" ]; then ip netns exec "$PATRONI_CTL_NETNS" "$@"; else "$@"; fi
}

patroni__port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# patroni__as CMD...: as the postgres user (initdb and postgres refuse root).
patroni__as() {
  if [ "$(id -u)" = 0 ]; then
    setpriv --reuid=postgres --regid=postgres --init-groups --reset-env -- "$@"
  else
    "$@"
  fi
}

# patroni__get DIR NAME KEY: a value of the node's state file DIR/NAME.env.
patroni__get() {
  sed -n "s/^$3=//p" "$1/$2.env" 2>/dev/null
}

patroni__http() { # patroni__http URL: the status code (000 when nothing answers)
  patroni__ctl curl -s -m 1 -o /dev/null -w '%{http_code}' "$1" 2>/dev/null || true
}

patroni__write_config() { # DIR NAME ETCD_URL
  local dir=$1 name=$2 etcd=$3 pg api host hba="" ignore=""
  [ "$PATRONI_WAL_LEVEL" = logical ] && ignore="
    ignore_slots:
    - type: logical"
  host=$(patroni__host "$name")
  if [ -n "${PATRONI_HBA_NET:-}" ]; then
    hba="
  - host all all $PATRONI_HBA_NET trust
  - host replication all $PATRONI_HBA_NET trust"
  fi
  pg=$(patroni__get "$dir" "$name" PG_PORT)
  api=$(patroni__get "$dir" "$name" API_PORT)
  local hostport=${etcd#http://}
  hostport=${hostport%%/*}
  cat >"$dir/$name.yml" <<YML
scope: $(patroni__scope "$dir")
namespace: /idem-patroni/
name: $name
log:
  level: INFO
restapi:
  listen: $host:$api
  connect_address: $host:$api
etcd3:
  hosts: [$hostport]
  protocol: http
bootstrap:
  dcs:
    ttl: $PATRONI_TTL
    loop_wait: $PATRONI_LOOP_WAIT
    retry_timeout: $PATRONI_RETRY_TIMEOUT
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: false$ignore
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 300
        wal_level: $PATRONI_WAL_LEVEL
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        synchronous_commit: "on"
        fsync: "on"
        wal_keep_size: 256MB
        logging_collector: "on"
  initdb:
  - encoding: UTF8
  - auth: trust
postgresql:
  listen: $host:$pg
  connect_address: $host:$pg
  data_dir: $dir/$name/data
  bin_dir: $PATRONI_PG_BIN
  pgpass: $dir/$name/pgpass
  parameters:
    unix_socket_directories: $dir/$name
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust$hba
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
YML
}

# patroni_start_node DIR NAME: starts the node's agent (its config must exist).
# setpriv and env exec: $! is the agent's own PID.
patroni_start_node() {
  local dir=$1 name=$2 ns="PATRONI_NETNS_$2" pre=()
  # no shell function in the background job: $! must be the process that becomes the agent
  [ -n "${!ns:-}" ] && pre=(ip netns exec "${!ns}")
  [ -n "${PATRONI_START_NICE:-}" ] && pre=(nice -n "$PATRONI_START_NICE" "${pre[@]}")
  if [ "$(id -u)" = 0 ]; then
    "${pre[@]}" setpriv --reuid=postgres --regid=postgres --init-groups --reset-env -- \
      env HOME="$dir" /usr/bin/patroni "$dir/$name.yml" >>"$dir/$name/agent.log" 2>&1 </dev/null &
  else
    "${pre[@]}" env HOME="$dir" /usr/bin/patroni "$dir/$name.yml" >>"$dir/$name/agent.log" 2>&1 </dev/null &
  fi
  echo $! >"$dir/$name/agent.pid"
  disown $! # killed on purpose by fault tests: no job notice
}

patroni_agent_pid() {
  local pid
  pid=$(cat "$1/$2/agent.pid" 2>/dev/null) || return 0
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q patroni "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
  return 0
}

patroni_postmaster_pid() {
  local pid
  pid=$(head -n 1 "$1/$2/data/postmaster.pid" 2>/dev/null) || return 0
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q postgres "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
  return 0
}

patroni_primary() {
  local n
  for n in $(patroni__nodes "$1"); do
    if [ "$(patroni__http "http://$(patroni__host "$n"):$(patroni__get "$1" "$n" API_PORT)/primary")" = 200 ]; then
      echo "$n"
      return 0
    fi
  done
  return 1
}

patroni_standby() {
  local p n
  p=$(patroni_primary "$1") || return 1
  for n in $(patroni__nodes "$1"); do [ "$n" = "$p" ] || echo "$n"; done
}

# 0 when the primary streams to a synchronous standby that the DCS knows as such.
patroni__ready() {
  local dir=$1 p s
  p=$(patroni_primary "$dir") || return 1
  s=$(patroni_standby "$dir")
  [ "$(patroni__http "http://$(patroni__host "$s"):$(patroni__get "$dir" "$s" API_PORT)/sync")" = 200 ] || return 1
  [ "$(patroni__ctl psql -qtAX -h "$(patroni__host "$p")" -p "$(patroni__get "$dir" "$p" PG_PORT)" -U postgres -d postgres \
    -c "select count(*) from pg_stat_replication where state = 'streaming' and sync_state = 'sync'" \
    2>/dev/null)" = 1 ]
}

patroni_wait_ready() {
  local dir=$1 secs=${2:-90} until
  until=$((SECONDS + secs))
  while ! patroni__ready "$dir"; do
    if [ "$SECONDS" -ge "$until" ]; then
      echo "patroni: no primary with a streaming synchronous standby within ${secs} s" >&2
      local n
      for n in $(patroni__nodes "$dir"); do tail -n 15 "$dir/$n/agent.log" >&2 2>/dev/null || true; done
      return 1
    fi
    sleep 0.2
  done
}

# patroni_watch DIR OWNER_PID: in the background, stops the pair once OWNER_PID is gone.
patroni_watch() {
  local dir=$1 owner=$2
  (
    trap '' INT
    while kill -0 "$owner" 2>/dev/null && [ -f "$dir/pair" ]; do sleep 1; done
    [ -f "$dir/pair" ] && patroni_stop "$dir"
  ) </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/watcher.pid"
}

patroni_start() {
  local dir=$1 etcd=$2 owner=${3:-} n a b
  mkdir -p "$dir"
  [ -f "$dir/pair" ] || echo "${PATRONI_PAIR:-idem $PATRONI_NODES}" >"$dir/pair"
  read -r a b <<<"$(patroni__nodes "$dir")"
  for n in $a $b; do
    mkdir -p "$dir/$n"
    if [ ! -f "$dir/$n.env" ]; then
      printf 'PG_PORT=%s\nAPI_PORT=%s\n' "$(patroni__port)" "$(patroni__port)" >"$dir/$n.env"
    fi
    patroni__write_config "$dir" "$n" "$etcd"
  done
  if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$dir"; fi
  chmod 755 "$dir"
  [ -n "$owner" ] && patroni_watch "$dir" "$owner"
  # the first node bootstraps (a fresh DIR): the other then clones it with pg_basebackup
  patroni_start_node "$dir" "$a"
  local until=$((SECONDS + 60))
  if [ ! -f "$dir/$b/data/PG_VERSION" ]; then
    while ! patroni_primary "$dir" >/dev/null; do
      if [ "$SECONDS" -ge "$until" ]; then
        echo "patroni: $a did not become primary within 60 s" >&2
        tail -n 30 "$dir/$a/agent.log" >&2
        return 1
      fi
      sleep 0.2
    done
  fi
  patroni_start_node "$dir" "$b"
  patroni_wait_ready "$dir" 90
}

# The postmaster is stopped first (it forks no more), then it and every child it forked are
# killed: no backend of the dead host commits anything afterwards.
patroni_kill_host() {
  local dir=$1 name=$2 a m
  a=$(patroni_agent_pid "$dir" "$name")
  m=$(patroni_postmaster_pid "$dir" "$name")
  [ -n "$a" ] && kill -9 "$a"
  if [ -n "$m" ]; then
    kill -STOP "$m"
    # shellcheck disable=SC2046
    kill -9 $(ps -o pid= --ppid "$m") "$m" 2>/dev/null || true
  fi
  return 0
}

patroni_switchover() {
  local dir=$1 p s
  p=$(patroni_primary "$dir") || return 1
  s=$(patroni_standby "$dir")
  local ctl=(env HOME="$dir" /usr/bin/patronictl -c "$dir/$p.yml" switchover "$(patroni__scope "$dir")" --master "$p" --candidate "$s" --force)
  if [ "$(id -u)" = 0 ]; then
    patroni__ctl setpriv --reuid=postgres --regid=postgres --init-groups --reset-env -- "${ctl[@]}"
  else
    patroni__ctl "${ctl[@]}"
  fi
}

patroni_pg_url() {
  local dir=$1 db=${2:-postgres}
  local a b
  read -r a b <<<"$(patroni__nodes "$dir")"
  echo "postgresql://postgres@$(patroni__host "$a"):$(patroni__get "$dir" "$a" PG_PORT),$(patroni__host "$b"):$(patroni__get "$dir" "$b" PG_PORT)/$db?target_session_attrs=read-write"
}

patroni_createdb() {
  local dir=$1 db=$2 p port
  p=$(patroni_primary "$dir") || return 1
  port=$(patroni__get "$dir" "$p" PG_PORT)
  if ! patroni__ctl psql -qtAX -h "$(patroni__host "$p")" -p "$port" -U postgres -d postgres \
    -c "select 1 from pg_database where datname='$db'" | grep -q 1; then
    patroni__ctl psql -q -h "$(patroni__host "$p")" -p "$port" -U postgres -d postgres -c "create database \"$db\"" >/dev/null
  fi
}

patroni_env() {
  local dir=$1 n
  echo "PATRONI_TTL=$PATRONI_TTL PATRONI_LOOP_WAIT=$PATRONI_LOOP_WAIT PATRONI_RETRY_TIMEOUT=$PATRONI_RETRY_TIMEOUT"
  for n in $(patroni__nodes "$dir"); do
    echo "${n}_PG_PORT=$(patroni__get "$dir" "$n" PG_PORT) ${n}_API_PORT=$(patroni__get "$dir" "$n" API_PORT)" \
      "${n}_AGENT_PID=$(patroni_agent_pid "$dir" "$n") ${n}_POSTMASTER_PID=$(patroni_postmaster_pid "$dir" "$n")"
  done
  echo "PRIMARY=$(patroni_primary "$dir" || true)"
}

# patroni__wait_gone PID SECONDS: 0 when PID is gone in time.
patroni__wait_gone() {
  local pid=$1 until=$((SECONDS + $2))
  while [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do
    [ "$SECONDS" -ge "$until" ] && return 1
    sleep 0.1
  done
}

patroni_stop() {
  local dir=$1 n a m w
  w=$(cat "$dir/watcher.pid" 2>/dev/null || true)
  rm -f "$dir/watcher.pid"
  if [ -n "$w" ] && [ "$w" != "${BASHPID:-$$}" ] && [ -d "/proc/$w" ]; then kill "$w" 2>/dev/null || true; fi
  # the standby first: the primary then stops without waiting for a synchronous standby
  local order
  order="$(patroni_standby "$dir" 2>/dev/null || true) $(patroni_primary "$dir" 2>/dev/null || true)"
  [ "$order" = " " ] && order=$(patroni__nodes "$dir")
  for n in $order; do
    a=$(patroni_agent_pid "$dir" "$n")
    if [ -n "$a" ]; then
      kill -TERM "$a" 2>/dev/null || true
      patroni__wait_gone "$a" 30 || kill -9 "$a" 2>/dev/null || true
    fi
    m=$(patroni_postmaster_pid "$dir" "$n") # an agent killed earlier left it running
    if [ -n "$m" ]; then
      kill -QUIT "$m" 2>/dev/null || true # immediate shutdown
      patroni__wait_gone "$m" 10 || kill -9 "$m" 2>/dev/null || true
    fi
  done
}
