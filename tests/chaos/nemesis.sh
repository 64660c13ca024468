# tests/chaos/nemesis.sh — the faults of the campaign (scripts/chaos sources it after cluster.sh).
#
#   nemesis_inject KIND   starts the fault, holds it for its time, heals it, and writes both
#                         lines to $CH_DIR/faults.jsonl (docs/api.md §15: t, fault, phase, target)
#
# KIND               fault                                             held
# kill-leader        kill -9 of the leading coordinator; restarted     5 s
# pause-leader       SIGSTOP of the leader; SIGCONT                    2 x election TTL
# leader-etcd        the leader cut off from etcd                      6 s
# leader-pg          the leader cut off from both Postgres nodes       6 s
# clients-leader     the clients cut off from the leader only          6 s
# etcd-kill          kill -9 of etcd; restarted on its data            5 s
# pg-primary         the Postgres primary's host lost (Patroni agent   until the standby is
#                    and postmaster killed); it rejoins as standby     promoted (at most 40 s)
# clock-jump         the leader's wall clock +60 s or -60 s            8 s
NEMESIS_KINDS="kill-leader pause-leader leader-etcd leader-pg clients-leader etcd-kill pg-primary clock-jump"

nemesis__log() { # FAULT PHASE TARGET
  printf '{"t":%s,"fault":"%s","phase":"%s","target":"%s"}\n' "$(date +%s%3N)" "$1" "$2" "$3" \
    >>"$CH_DIR/faults.jsonl"
  echo "chaos: $(date +%T) $1 $2 ($3)" >&2
}

# nemesis__hold SECONDS: the fault's time (a schedule, not a wait for a condition)
nemesis__hold() { sleep "$1"; }

nemesis_inject() {
  local kind=$1 target="" old jump
  case $kind in
    pg-primary) target=$(patroni_primary "$CH_DIR/patroni") || return 1 ;;
    etcd-kill) target=etcd ;;
    *) target=$(ch_leader) || return 1 ;;
  esac
  if [ "$kind" = clock-jump ]; then
    if [ $((RANDOM % 2)) = 0 ]; then jump="+60s"; else jump="-60s"; fi
    old=$target
    target="$target $jump"
  fi
  nemesis__log "$kind" start "$target"
  case $kind in
    kill-leader)
      kill -9 "$(ch_pid "$target")"
      nemesis__hold 5
      ch_coord_start "$target"
      ;;
    pause-leader)
      kill -STOP "$(ch_pid "$target")"
      nemesis__hold $((2 * CH_TTL))
      kill -CONT "$(ch_pid "$target")"
      ;;
    leader-etcd)
      ch_cut "$target" etcd
      nemesis__hold 6
      ch_heal "$target"
      ;;
    leader-pg)
      ch_cut "$target" pg1 pg2
      nemesis__hold 6
      ch_heal "$target"
      ;;
    clients-leader)
      ch_cut "$target" cli
      nemesis__hold 6
      ch_heal "$target"
      ;;
    etcd-kill)
      kill -9 "$(ch_pid etcd)"
      nemesis__hold 5
      ch_etcd_start etcd
      ;;
    pg-primary)
      patroni_kill_host "$CH_DIR/patroni" "$target"
      old=$target
      ch_wait 40 "the standby promoted" nemesis__promoted "$old" || true
      patroni_start_node "$CH_DIR/patroni" "$old"
      ;;
    clock-jump)
      echo "$jump" >"$CH_DIR/$old.faketime"
      nemesis__hold 8
      echo "+0" >"$CH_DIR/$old.faketime"
      ;;
    *) echo "chaos: unknown fault $kind" >&2; return 1 ;;
  esac
  nemesis__log "$kind" end "$target"
}

nemesis__promoted() { # OLD: another node answers as primary
  local p
  p=$(patroni_primary "$CH_DIR/patroni") && [ "$p" != "$1" ]
}

# nemesis_ready: the cluster is whole again before the next fault: a leader, and a primary with
# a streaming synchronous standby (so that a second pg-primary finds a standby to promote).
nemesis_ready() {
  ch_wait 40 "a coordinator leads" ch_leader || return 1
  patroni_wait_ready "$CH_DIR/patroni" 60
}
