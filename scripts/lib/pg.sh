# scripts/lib/pg.sh — a private PostgreSQL on loopback, for quickstart, test and bench.
# Source it; then: pg_init DIR; pg_start DIR PORT [ADDRESS]; pg_stop DIR; pg_url PORT [DB].
# initdb and postgres refuse to run as root: when root, they run as the `postgres` user on a
# data directory it owns. PG_EXEC, when set, is a command prefix pg_start runs the server under
# (bench/groups-scale: its host's network namespace and cgroup).

PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}

pg__as() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg__exec() { # pg__as under $PG_EXEC (word-split on purpose: a command and its arguments)
  # shellcheck disable=SC2086
  if [ "$(id -u)" = 0 ]; then ${PG_EXEC:-} runuser -u postgres -- "$@"; else ${PG_EXEC:-} "$@"; fi
}

# A free TCP port on 127.0.0.1 (asks the kernel for one).
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# pg_init DIR: initdb into DIR/data unless it is there already.
pg_init() {
  local dir=$1
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    pg__as "$PG_BIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; return 1; }
  fi
}

# Slot moves (docs/api.md §18) replicate logically between the stores of one test server.
PG_LOGICAL="-c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20 -c max_logical_replication_workers=8 -c max_worker_processes=16"

# pg_start DIR PORT [ADDRESS]: starts postgres on ADDRESS:PORT (default 127.0.0.1), waits until
# it accepts connections.
pg_start() {
  local dir=$1 port=$2 addr=${3:-127.0.0.1}
  pg__exec "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
    -o "-c listen_addresses=$addr -p $port -c unix_socket_directories=$dir -c max_connections=300 -c fsync=on -c synchronous_commit=on $PG_LOGICAL ${IDEM_PG_EXTRA:-}" \
    start >/dev/null || { tail -n 30 "$dir/postgres.log" >&2; return 1; }
  echo "$port" >"$dir/port"
}

# pg_stop DIR: fast shutdown (no-op when not running).
pg_stop() {
  local dir=$1
  [ -f "$dir/data/postmaster.pid" ] || return 0
  pg__as "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
}

# pg_allow DIR CIDR: clients from CIDR may connect (trust), read at the next start.
pg_allow() {
  echo "host all all $2 trust" >>"$1/data/pg_hba.conf"
}

# pg_url PORT [DB]
pg_url() {
  echo "postgresql://postgres@127.0.0.1:$1/${2:-postgres}"
}

# pg_createdb PORT DB: creates DB unless it exists.
pg_createdb() {
  local port=$1 db=$2
  if ! psql -qtA "$(pg_url "$port")" -c "select 1 from pg_database where datname='$db'" | grep -q 1; then
    psql -q "$(pg_url "$port")" -c "create database \"$db\"" >/dev/null
  fi
}
