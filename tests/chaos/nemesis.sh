# tests/chaos/nemesis.sh — the faults of the campaign (scripts/chaos sources it after cluster.sh).
#
#   nemesis_inject KIND   starts the fault, holds it for its time, heals it, and writes both
#                         lines to $CH_DIR/faults.jsonl (docs/api.md §15: t, fault, phase, target)
#
# KIND               fault                                             held
# kill-leader        kill -9 of the leading coordinator; restarted     5 s
# pause-leader       SIGSTOP of the leader; SIGCONT                    2 x election TTL
# leader-etcd        the leader cut off from etcd                      6 s
# leader-pg          the leader cut off from every Postgres node       6 s
# clients-leader     the clients cut off from the leader only          6 s
# etcd-kill          kill -9 of etcd; restarted on its data            5 s
# pg-primary         g1's Postgres primary's host lost (Patroni agent  until the standby is
#                    and postmaster killed); it rejoins as standby     promoted (at most 40 s)
# clock-jump         the leader's wall clock +60 s or -60 s            8 s
# move-slots         a move of slots at random (a piece of one group's until it ends (at most
#                    range to the other group, docs/api.md §18)        90 s)
# group-pg-primary   a move at random, and mid-move the primary of     until the standby is
#                    its source's or its target's pair lost (as        promoted, then until
#                    pg-primary)                                       the move ends
# group-leader       a move at random, and mid-move kill -9 of the     5 s, then until the
#                    source group's leader (which drives the move)     move ends
# "Mid-move": the fault lands 0-1 s after the move is first seen copying (the coordinators hold
# a move 3 s in copying, IDEM_TEST_MOVE_HOLD: the phase reaches the nemesis late on a saturated
# CPU); its target line names the phase the move client saw last. The end
# line of a move's fault says how the move ended ("result": finished, rolled-back, refused when
# the cluster would not start it, unknown when no node answered).
NEMESIS_KINDS="kill-leader pause-leader leader-etcd leader-pg clients-leader etcd-kill pg-primary clock-jump
move-slots group-pg-primary group-leader"

nemesis__log() { # FAULT PHASE TARGET [RESULT]
  local extra=""
  [ -n "${4:-}" ] && extra=",\"result\":\"$4\""
  printf '{"t":%s,"fault":"%s","phase":"%s","target":"%s"%s}\n' "$(date +%s%3N)" "$1" "$2" "$3" \
    "$extra" >>"$CH_DIR/faults.jsonl"
  echo "chaos: $(date +%T) $1 $2 ($3)${4:+: $4}" >&2
}

# --- moves: one at a time, run by idem-chaos-client --move in the background ---
NEMESIS_MOVES=0
nemesis__move_start() { # starts a move at random; sets MV_PLAN ("FROM-TO SOURCE>TARGET"), MV_SRC, MV_DST
  local from to
  NEMESIS_MOVES=$((NEMESIS_MOVES + 1))
  : >"$CH_DIR/move.out"
  # ip netns exec execs: $! is the client itself
  ip netns exec "$CH-ctl" "$CH_BIN/tests/chaos/idem-chaos-client" --move "$CH_COORDS" "$RANDOM" \
    "chaos-$CH-$NEMESIS_MOVES" >"$CH_DIR/move.out" 2>>"$CH_DIR/move.log" &
  echo $! >"$CH_DIR/pids/move"
  ch_wait 10 "a move planned" grep -q '^plan ' "$CH_DIR/move.out" || return 1
  read -r _ from to MV_SRC MV_DST <"$CH_DIR/move.out"
  MV_PLAN="$from-$to $MV_SRC>$MV_DST"
}

nemesis__move_ended() { [ -z "$(ch_pid move)" ]; }

nemesis__move_end() { # waits for the move's end (at most 100 s); sets MV_RESULT
  ch_wait 100 "the move ended" nemesis__move_ended || ch_stop move KILL
  wait "$(cat "$CH_DIR/pids/move")" 2>/dev/null || true
  MV_RESULT=$(sed -n 's/^result //p' "$CH_DIR/move.out" | tr -d '"\\' | cut -c1-200)
  MV_RESULT=${MV_RESULT:-unknown the move client printed nothing}
}

nemesis__copying() { grep -q '^phase copying' "$CH_DIR/move.out" || nemesis__move_ended; }

# nemesis__mid_move: until the move client saw the move copying (or the move ended), then 0-1 s
# more (a schedule); sets MV_AT to the phase the fault lands in (the client's last "phase" line)
nemesis__mid_move() {
  ch_wait 30 "the move copying" nemesis__copying || true
  sleep "0.$((RANDOM % 10))"
  MV_AT=$(sed -n 's/^phase //p' "$CH_DIR/move.out" | tail -n 1)
  if nemesis__move_ended || [ "$MV_AT" = none ]; then MV_AT="after the move"; fi
}

# nemesis__hold SECONDS: the fault's time (a schedule, not a wait for a condition)
nemesis__hold() { sleep "$1"; }

nemesis_inject() {
  local kind=$1 target="" old jump
  case $kind in
    pg-primary) target=$(patroni_primary "$CH_DIR/patroni") || return 1 ;;
    etcd-kill) target=etcd ;;
    move-slots | group-pg-primary | group-leader)
      nemesis__move "$kind"
      return
      ;;
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
      ch_cut "$target" pg1 pg2 pg3 pg4
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

nemesis__promoted() { # OLD [PAIR_DIR]: another node of the pair answers as primary
  local p
  p=$(patroni_primary "${2:-$CH_DIR/patroni}") && [ "$p" != "$1" ]
}

# nemesis__move KIND: move-slots, group-pg-primary or group-leader (see the table above)
nemesis__move() {
  local kind=$1 target pair group old node g ready=()
  local -A primary=()
  if [ "$kind" = group-pg-primary ]; then
    # the pairs with a standby to promote, and their primaries, asked before the move starts
    # (asking takes a while on a saturated CPU: the fault would land late)
    for g in $(nemesis__standby_group); do
      primary[$g]=$(patroni_primary "$(ch_pair "$g")") || true
    done
  fi
  nemesis__move_start || {
    ch_stop move KILL
    return 1
  }
  target=$MV_PLAN
  case $kind in
    move-slots)
      nemesis__log "$kind" start "$target"
      nemesis__move_end
      ;;
    group-pg-primary)
      # the source's or the target's pair, at random among those with a standby to promote
      for g in "$MV_SRC" "$MV_DST"; do [ -z "${primary[$g]:-}" ] || ready+=("$g"); done
      group=$MV_SRC
      [ ${#ready[@]} = 0 ] || group=${ready[$((RANDOM % ${#ready[@]}))]}
      pair=$(ch_pair "$group")
      old=${primary[$group]:-}
      nemesis__mid_move
      [ -n "$old" ] || old=$(patroni_primary "$pair") || old=""
      target="$target, $group primary ${old:-none} in $MV_AT"
      nemesis__log "$kind" start "$target"
      if [ -n "$old" ]; then
        patroni_kill_host "$pair" "$old"
        ch_wait 40 "the standby promoted" nemesis__promoted "$old" "$pair" || true
        patroni_start_node "$pair" "$old"
      fi
      nemesis__move_end
      ;;
    group-leader)
      nemesis__mid_move
      node=$(ch_group_leader "$MV_SRC") || node=""
      target="$target, $MV_SRC leader ${node:-none} in $MV_AT"
      nemesis__log "$kind" start "$target"
      if [ -n "$node" ]; then
        kill -9 "$(ch_pid "$node")"
        nemesis__hold 5
        ch_coord_start "$node"
      fi
      nemesis__move_end
      ;;
  esac
  nemesis__log "$kind" end "$target" "$MV_RESULT"
}

# nemesis_ready KIND: the cluster is whole enough for KIND: each group led; for pg-primary, g1's pair also has a streaming synchronous standby (one to
# promote); for group-pg-primary, at least one pair has (the fault picks among those). A wait
# of 3 s or more is said on stderr.
nemesis_ready() {
  local t0=$SECONDS rc=0
  ch_wait 40 "each group led" ch_groups_led || rc=1
  case $1 in
    pg-primary) patroni_wait_ready "$CH_DIR/patroni" 60 || rc=1 ;;
    group-pg-primary) ch_wait 60 "a pair with a standby" nemesis__standby_group || rc=1 ;;
  esac
  [ $((SECONDS - t0)) -lt 3 ] || echo "chaos: whole again for $1 after $((SECONDS - t0)) s" >&2
  return $rc
}

# nemesis__standby_group: the groups whose pair has a streaming synchronous standby; 1 when none
nemesis__standby_group() {
  local g found=1
  for g in g1 g2; do
    if patroni__ready "$(ch_pair "$g")"; then
      echo "$g"
      found=0
    fi
  done
  return $found
}
