#!/usr/bin/env bash
# Smoke test, not the benchmark: bench/moves/run briefly, twice, on its own PostgreSQL and etcd
# (docs/api.md §18, BENCHMARKS.md): a move of slots 0-15 under client load, then the control run
# (--burn: the same load, no move, a busy loop in its place); the move's run preloads 200 pairs. Each must exit 0, which
# idem-move-load does only when the move (or the control) completed and the history check found
# no acknowledged completion lost and no fresh key answered other than PROCEED; the figures
# themselves are not judged here.
# usage: moves_bench_smoke.sh BUILD_DIR
set -euo pipefail
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp /tmp/idem-moves-smoke.XXXXXX)
trap 'rm -f "$out"' EXIT
fail=0
check() { # check NAME PATTERN: the run's output holds PATTERN
  grep -Eq "$2" "$out" || { echo "moves smoke ($1): expected /$2/ in its output"; fail=1; }
}
for run in move control; do
  args=(--build "$build" --before 2 --after 2 --moving 4 --other 4)
  if [ "$run" = move ]; then args+=(--preload 200); else args+=(--burn 0.5:2); fi
  st=0
  "$root/bench/moves/run" "${args[@]}" >"$out" 2>&1 || st=$?
  cat "$out"
  [ "$st" = 0 ] || { echo "moves smoke ($run): bench/moves/run exited $st"; fail=1; }
  check "$run" '^history: 0 acknowledged completions of the moving slots lost, 0 fresh keys'
  if [ "$run" = move ]; then
    check move '^preloaded 200 completed pairs on the moving slots'
    check move '^move 0-15 -> g2: .* paused [0-9]+ ms'
  else check control '^control: no move'; fi
done
[ "$fail" = 0 ] && echo "moves smoke: the move and its control run passed"
exit "$fail"
