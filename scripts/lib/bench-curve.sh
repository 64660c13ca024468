# scripts/lib/bench-curve.sh — the latency curve of scripts/bench (sourced; uses its $bench,
# $cport, $pgbench, $url, $secs, $work, $base_best, sql, failed). One run, one machine:
#   1. idem-bench --sweep: pairs closed-loop for the maximum, then paced at 100 pairs/s (the
#      unloaded floor) and at 10/25/50/75/90 % of the maximum, 64 in flight; every latency counts
#      from the operation's intended start (no coordinated omission), percentiles from a
#      high-dynamic-range histogram;
#   2. plain PostgreSQL on the same pair of durable transactions (bench/baseline/pair.sql) under
#      pgbench -R at each of those rates it sustains (up to 90 % of its best pairs/s measured
#      above), 64 clients, its per-transaction log (pgbench measures from the scheduled start);
#   3. the table: per rate, idem's BeginStep and pair p50/p99/p99.9 beside plain PostgreSQL's pair
#      and the machine's own stalls during idem's run (idem-bench --stall-probe: how late a 2 ms
#      sleep woke, p99.9 / max, and the wake-ups more than 5 ms late);
#      the targets at half of the maximum; with --plot FILE a PNG drawn by gnuplot.
# curve_run writes $work/curve.dat (one line per rate) and prints the table. curve_control URL
# (scripts/bench --control-tmpfs, the coordinator already started on URL, a PostgreSQL in
# /dev/shm) runs the same sweep with the curve's rates as numbers and prints idem's BeginStep
# beside the curve's; $work/control.dat feeds the plot.

curve_pct() { # LOGFILE... -> "p50 p99 p99.9" in ms of pgbench's per-transaction latency (column 3, us)
  /usr/bin/python3 - "$@" <<'PY'
import sys
v = []
for f in sys.argv[1:]:
    for line in open(f):
        p = line.split()
        if len(p) >= 3 and p[2].isdigit():
            v.append(int(p[2]))
v.sort()
def pct(q):
    if not v: return 0.0
    i = max(0, min(len(v) - 1, -(-int(q * 1000 * len(v)) // 1000) - 1))
    return v[i] / 1000.0
print("%.3f %.3f %.3f %d" % (pct(.50), pct(.99), pct(.999), len(v)))
PY
}

curve_run() {
  local lines rc=0
  echo "== latency curve: idem-bench --workload pairs --concurrency 64 --duration $secs --sweep 100,10%,25%,50%,75%,90%"
  sql "checkpoint"
  lines=$(timeout -k 10 $((secs * 8 + 600)) "$bench" --addr "127.0.0.1:$cport" --tenant bench --json \
    --workload pairs --concurrency 64 --duration "$secs" --sweep 100,10%,25%,50%,75%,90% --stall-probe) || rc=$?
  [ "$rc" = 0 ] || { echo "idem-bench --sweep exit $rc"; failed=1; }
  printf '%s\n' "$lines" >"$work/sweep.jsonl"
  # rate(target) throughput begin p50 p99 p999 pair p50 p99 p999, per line (the maximum first)
  /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"): continue
    r = json.loads(line)
    print(r["phase"].replace(" ", "_"), r["rate"], r["throughput"], r["begin_p50_ms"], r["begin_p99_ms"],
          r["begin_p999_ms"], r["p50_ms"], r["p99_ms"], r["p999_ms"], sum(r["errors"].values()),
          "%s/%s(%s)" % (r.get("stall_p999_ms", "-"), r.get("stall_max_ms", "-"), r.get("stalls_over_5ms", "-")))
' "$work/sweep.jsonl" >"$work/sweep.txt"
  local max floor_p99 half_line
  max=$(awk '$1 == "maximum" {print $3}' "$work/sweep.txt")
  floor_p99=$(awk '$1 == "100_per_s" {print $5}' "$work/sweep.txt")
  : >"$work/curve.dat"
  echo "# rate idem_tput begin_p50 begin_p99 begin_p999 pair_p50 pair_p99 pair_p999 pg_tput pg_p50 pg_p99 pg_p999" >>"$work/curve.dat"
  printf '%-22s %10s | %-24s | %-24s | %-22s | %s\n' "rate (pairs/s)" "got/s" "idem BeginStep p50/p99/p99.9" \
    "idem pair p50/p99/p99.9" "stalls p99.9/max(>5ms)" "plain PostgreSQL pair p50/p99/p99.9 (got/s)"
  local phase rate tput b50 b99 b999 p50 p99 p999 errs stall pg pgt
  while read -r phase rate tput b50 b99 b999 p50 p99 p999 errs stall; do
    [ "$phase" = maximum ] && {
      printf '%-22s %10s | %-24s | %-24s | %-22s | %s\n' "maximum (closed loop)" "$tput" "$b50/$b99/$b999" "$p50/$p99/$p999" "$stall" "-"
      continue
    }
    pg="not sustained" pgt=0
    local pr=${rate%.*}
    if awk -v r="$rate" -v b="$base_best" 'BEGIN {exit !(r <= 0.9 * b)}'; then
      sql "checkpoint" </dev/null
      rm -f "$work"/pglog.*
      if timeout -k 10 $((secs + 120)) "$pgbench" -n -M prepared -f bench/baseline/pair.sql \
          -D run="$(date +%s%N)" -D n=0 -T "$secs" -c 64 -j 2 -R "$pr" --log --log-prefix="$work/pglog" \
          "$url" </dev/null >"$work/pgbench-R$pr.log" 2>&1; then
        read -r a b c n <<<"$(curve_pct "$work"/pglog.*)"
        pgt=$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.1f", n / s}')
        pg="$a/$b/$c ($pgt)"
        printf '%s\n' "$rate $tput $b50 $b99 $b999 $p50 $p99 $p999 $pgt $a $b $c" >>"$work/curve.dat"
      else
        tail -n 5 "$work/pgbench-R$pr.log"
        pg="pgbench failed"
        printf '%s\n' "$rate $tput $b50 $b99 $b999 $p50 $p99 $p999 NaN NaN NaN NaN" >>"$work/curve.dat"
      fi
    else
      printf '%s\n' "$rate $tput $b50 $b99 $b999 $p50 $p99 $p999 NaN NaN NaN NaN" >>"$work/curve.dat"
    fi
    printf '%-22s %10s | %-24s | %-24s | %-22s | %s%s\n' "${phase//_/ } = $pr" "$tput" "$b50/$b99/$b999" \
      "$p50/$p99/$p999" "$stall" "$pg" "$([ "$errs" = 0 ] || echo "  (idem errors: $errs)")"
    [ "$phase" = "50%_of_the_maximum" ] && half_line="$b99 $b999 $tput $rate $stall"
  done <"$work/sweep.txt"
  if [ -n "${half_line:-}" ] && [ -n "$floor_p99" ]; then
    read -r b99 b999 tput rate stall <<<"$half_line"
    echo "targets at half of the maximum ($tput of ${rate%.*} pairs/s): BeginStep p99 $b99 ms (< 5: $(awk -v a="$b99" 'BEGIN {print (a < 5) ? "yes" : "no"}')), " \
      "$(awk -v a="$b99" -v f="$floor_p99" 'BEGIN {printf "%.1fx", (f > 0 ? a / f : 0)}') the floor's p99 $floor_p99 ms (<= 3x: $(awk -v a="$b99" -v f="$floor_p99" 'BEGIN {print (f > 0 && a <= 3 * f) ? "yes" : "no"}')), " \
      "p99.9 $b999 ms (< 15: $(awk -v a="$b999" 'BEGIN {print (a < 15) ? "yes" : "no"}')); " \
      "the machine's stalls in that run p99.9/max(wake-ups > 5 ms late) $stall"
  fi
  curve_floor=$floor_p99 curve_max=$max
}

curve_control() {
  local url2=$1 rates lines rc=0 fs
  fs=$(stat -f -c %T "$work") # the first sweep's store: "tmpfs" too under --store-dir /dev/shm
  rates=$(awk '$1 != "maximum" {printf "%s%s", sep, int($2 + 0.5); sep = ","}' "$work/sweep.txt")
  echo "== the control: the same rates against a PostgreSQL in /dev/shm (tmpfs: fsync returns at once), a fresh coordinator"
  psql -qtAX "$url2" -c checkpoint
  lines=$(timeout -k 10 $((secs * 8 + 600)) "$bench" --addr "127.0.0.1:$cport" --tenant bench --json \
    --workload pairs --concurrency 64 --duration "$secs" --sweep "$rates" --stall-probe) || rc=$?
  [ "$rc" = 0 ] || { echo "idem-bench --sweep (control) exit $rc"; failed=1; }
  printf '%s\n' "$lines" >"$work/control.jsonl"
  /usr/bin/python3 - "$work/sweep.jsonl" "$work/control.jsonl" "$work/control.dat" "$fs" <<'PY'
import json, sys
def rows(f):
    return [json.loads(l) for l in open(f) if l.strip().startswith("{")]
disk, tmp = rows(sys.argv[1]), rows(sys.argv[2])
f = lambda r: "%.3f/%.3f/%.3f" % (r["begin_p50_ms"], r["begin_p99_ms"], r["begin_p999_ms"])
st = lambda r: "%s/%s(%s)" % (r.get("stall_p999_ms", "-"), r.get("stall_max_ms", "-"), r.get("stalls_over_5ms", "-"))
print("%-22s | %-28s | %-28s | %s" % ("rate (pairs/s)", "%s: BeginStep p50/p99/p99.9" % sys.argv[4], "tmpfs: BeginStep p50/p99/p99.9",
                                       "tmpfs run: got/s, stalls p99.9/max(>5ms)"))
with open(sys.argv[3], "w") as out:
    out.write("# rate tmpfs_tput begin_p50 begin_p99 begin_p999\n")
    for d, t in zip(disk, tmp):
        name = "maximum (closed loop)" if d["rate"] == 0 else "%.0f" % d["rate"]
        print("%-22s | %-28s | %-28s | %.1f, %s" % (name, f(d), f(t), t["throughput"], st(t)))
        if t["rate"] > 0:
            out.write("%s %s %s %s %s\n" % (t["rate"], t["throughput"], t["begin_p50_ms"], t["begin_p99_ms"], t["begin_p999_ms"]))
PY
}

curve_plot() { # PNG: the curve of $work/curve.dat, drawn by gnuplot
  local png=$1
  gnuplot <<GP || { echo "gnuplot failed"; failed=1; return; }
set terminal pngcairo size 1100,650 font ",11"
set output "$png"
set title "BeginStep and pair latency against rate (64 in flight, one 2-core machine; $(date -u +%Y-%m-%d), $(git rev-parse --short HEAD))"
set xlabel "offered rate (pairs/s)"
set ylabel "latency (ms, log scale)"
set logscale y
set grid
set key outside right
plot "$work/curve.dat" using 1:3 with linespoints lw 2 title "idem BeginStep p50", \
     "" using 1:4 with linespoints lw 2 title "idem BeginStep p99", \
     "" using 1:5 with linespoints lw 2 title "idem BeginStep p99.9", \
     "" using 1:7 with linespoints dt 2 title "idem pair p99", \
     "" using 1:10 with linespoints dt 3 lw 2 title "plain PostgreSQL pair p50", \
     "" using 1:11 with linespoints dt 3 lw 2 title "plain PostgreSQL pair p99", \
     ${curve_floor:-0} with lines dt 4 title "unloaded floor: BeginStep p99 at 100/s", \
     5 with lines dt 2 lc rgb "red" title "target: BeginStep p99 < 5 ms at half load"$(
  [ -s "$work/control.dat" ] && printf ', \\\n     "%s" using 1:4 with linespoints dt 5 lw 2 title "control: BeginStep p99, store on tmpfs"' "$work/control.dat")
GP
  echo "plot written to $png"
}
