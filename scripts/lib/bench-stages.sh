# scripts/lib/bench-stages.sh — scripts/bench --stages: where a step call's time goes at three
# rates. Sourced by scripts/bench; uses its $coord, $bench, $secs, $work, $root, coord_start,
# coord_stop (which start the coordinator with --metrics on $mport), run_bench and jget.
#
# stages_run [COORD_B]: pairs at 64 in flight (the maximum), then paced runs at an unloaded 100
# pairs/s, half of that maximum and 90 % of it, each on a freshly started coordinator; /metrics
# is scraped before and after each paced run and scripts/lib/bench-stages.py prints, per stage
# of BeginStep and CompleteStep, p50, p99, p99.9 and the share over 5 and 10 ms (from the bucket
# counts), beside the client-seen p99 and what is left unexplained. With COORD_B (another
# idem-coordinator binary) or BENCH_B (another idem-bench binary) every paced run is made with A
# (this tree's coordinator and idem-bench) then B (COORD_B, else this tree's coordinator, under
# BENCH_B, else this tree's idem-bench), in turn, for --stages-rounds rounds, and a last table
# sets their BeginStep figures side by side.

# --stall-probe when this run's idem-bench has it (an older one given to --stages-bench-vs may not)
stages_probe_flag() {
  "$bench" --help 2>&1 | grep -q -- --stall-probe && echo --stall-probe || true
}

stages_scrape() { # FILE
  curl -sf -m 10 -o "$1" "http://127.0.0.1:$mport/metrics" || { echo "cannot scrape /metrics" >&2; failed=1; : >"$1"; }
}

# stages_one LABEL RATE VARIANT COORDINATOR IDEM_BENCH: one paced run on a fresh coordinator,
# its tables printed
stages_one() {
  local label=$1 rate=$2 variant=$3 coord_a=$coord bench_a=$bench m
  coord=$4 bench=$5
  coord_start
  stages_scrape "$work/stages-before.prom"
  run_bench "$label$variant" --workload pairs --concurrency 64 --duration "$secs" --rate "$rate" \
    $(stages_probe_flag)
  stages_scrape "$work/stages-after.prom"
  coord_stop
  coord=$coord_a bench=$bench_a
  printf '%s\n' "$out" >"$work/stages-bench.json"
  echo "load        $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"
  echo
  for m in Coordinator/BeginStep Coordinator/CompleteStep; do
    STAGES_SUMMARY=$work/stages-summary.txt STAGES_VARIANT=${variant:-A} /usr/bin/python3 \
      "$root/scripts/lib/bench-stages.py" "$work/stages-before.prom" "$work/stages-after.prom" \
      "$work/stages-bench.json" "$label ($rate pairs/s)${variant:+, coordinator$variant}" "$m" || failed=1
  done
}

stages_run() {
  local coord_b=${1:-} bench_b=${2:-} rounds=${stages_rounds:-1} ab=0
  if [ -n "$coord_b$bench_b" ]; then
    ab=1 coord_b=${coord_b:-$coord} bench_b=${bench_b:-$bench}
  fi
  echo "== stages: idem-bench --workload pairs --concurrency 64 --duration $secs, then --rate 100, half and 90 % of the maximum"
  [ "$ab" = 0 ] || echo "A: $coord under $bench   B: $coord_b under $bench_b   ($rounds rounds of A then B at each rate)"
  coord_start
  echo "command: ${coord_cmd[*]}   (all other flags default)"
  run_bench maximum --workload pairs --concurrency 64 --duration "$secs"
  coord_stop
  local max rate label r
  max=$(jget "$out" throughput)
  echo "maximum: $max pairs/s (coordinator A)"
  : >"$work/stages-summary.txt"
  for label in unloaded half 90%; do
    case $label in
      unloaded) rate=100 ;;
      half) rate=$(awk -v t="$max" 'BEGIN {printf "%.0f", t * 0.5}') ;;
      90%) rate=$(awk -v t="$max" 'BEGIN {printf "%.0f", t * 0.9}') ;;
    esac
    [ "$rate" -ge 1 ] || rate=1
    if [ "$ab" = 0 ]; then
      stages_one "$label" "$rate" "" "$coord" "$bench"
      continue
    fi
    for r in $(seq "$rounds"); do
      stages_one "$label" "$rate" " A" "$coord" "$bench"
      stages_one "$label" "$rate" " B" "$coord_b" "$bench_b"
    done
  done
  echo "== summary (BeginStep; ms; client: idem-bench from the intended start / the RPC alone; the rest from /metrics)"
  /usr/bin/python3 - "$work/stages-summary.txt" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cols = ["client_p50", "client_p99", "client_p999", "start_late_p99", "stall_max", "client_rpc_p99", "call_p99", "call_p999", "arrive_p99", "handler_p99", "queue_p99",
        "read_p99", "write_p99", "commit_p99", "answer_p99", "reply_p99", "send_p99", "call_over10"]
print("| run | variant | got/s | " + " | ".join(cols) + " |")
print("|---|---|---|" + "---|" * len(cols))
for r in rows:
    if r["method"] != "Coordinator/BeginStep":
        continue
    print("| %s | %s | %s | " % (r["label"], r["variant"], r["got"]) +
          " | ".join("-" if r.get(c) is None else "%.2f" % r[c] for c in cols) + " |")
PY
}
