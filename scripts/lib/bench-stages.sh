# scripts/lib/bench-stages.sh — scripts/bench --stages: where a step call's time goes at three
# rates. Sourced by scripts/bench after it started the coordinator with --metrics on $mport;
# uses its $bench, $cport, $secs, $work, $root, sql, run_bench and jget.
#
# stages_run: pairs at 64 in flight (the maximum), then paced runs at an unloaded 100 pairs/s,
# half of that maximum and 90 % of it; /metrics is scraped before and after each paced run and
# scripts/lib/bench-stages.py prints, per stage of BeginStep and CompleteStep, p50, p99, p99.9
# and the share over 5 and 10 ms (from the bucket counts), beside the client-seen p99 and what
# is left unexplained.

stages_scrape() { # FILE
  curl -sf -m 10 -o "$1" "http://127.0.0.1:$mport/metrics" || { echo "cannot scrape /metrics" >&2; failed=1; : >"$1"; }
}

stages_run() {
  echo "== stages: idem-bench --workload pairs --concurrency 64 --duration $secs, then --rate 100, half and 90 % of the maximum"
  run_bench maximum --workload pairs --concurrency 64 --duration "$secs"
  local max rate label
  max=$(jget "$out" throughput)
  echo "maximum: $max pairs/s"
  for label in unloaded half 90%; do
    case $label in
      unloaded) rate=100 ;;
      half) rate=$(awk -v t="$max" 'BEGIN {printf "%.0f", t * 0.5}') ;;
      90%) rate=$(awk -v t="$max" 'BEGIN {printf "%.0f", t * 0.9}') ;;
    esac
    [ "$rate" -ge 1 ] || rate=1
    stages_scrape "$work/stages-before.prom"
    run_bench "$label" --workload pairs --concurrency 64 --duration "$secs" --rate "$rate"
    stages_scrape "$work/stages-after.prom"
    printf '%s\n' "$out" >"$work/stages-bench.json"
    echo "load        $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"
    echo
    local m
    for m in Coordinator/BeginStep Coordinator/CompleteStep; do
      /usr/bin/python3 "$root/scripts/lib/bench-stages.py" "$work/stages-before.prom" \
        "$work/stages-after.prom" "$work/stages-bench.json" "$label ($rate pairs/s)" "$m" || failed=1
    done
  done
}
