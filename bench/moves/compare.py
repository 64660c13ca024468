"""bench/moves/compare.py — the table of bench/moves/run --compare: for each round, the other
slots' p99 before (before2) and during the throttled move, the no-move control and the unthrottled
move, each run's during/before ratio, and the throttled run's ratio against the control's.
Arguments: the runs' file prefix (PREFIX.tN, .cN, .uN: idem-move-load --json), rounds, the rate."""
import json
import sys

prefix, rounds, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def load(kind, r):
    with open("%s.%s%d" % (prefix, kind, r)) as f:
        j = json.loads(f.read().strip().splitlines()[-1])
    w = {(x["window"], x["class"]): x for x in j["windows"]}
    return j, w


print("throttle: %s rows/s; other slots' p99 (ms), before2 -> during the move (or its control)" % rate)
print("%-5s %-18s %9s %9s %7s %8s %9s %8s %5s %4s" % ("round", "run", "before2", "during",
      "ratio", "move s", "paused ms", "rows", "lost", "dup"))
for r in range(1, rounds + 1):
    ratios = {}
    for kind, name in (("t", "throttled move"), ("c", "control, no move"), ("u", "unthrottled move")):
        j, w = load(kind, r)
        b, d = w[("before2", "other")]["p99_ms"], w[("during", "other")]["p99_ms"]
        ratios[kind] = d / b if b else float("nan")
        moved = j["steps_moved"] + j["sagas_moved"]
        print("%-5d %-18s %9.2f %9.2f %7.2f %8.2f %9s %8s %5d %4d" % (
            r, name, b, d, ratios[kind], j["move_s"], j["paused_ms"] if kind != "c" else "-",
            moved if kind != "c" else "-", j["lost"], j["dup_proceed"]))
        if kind != "c" and not j["move_ok"]:
            print("      the move failed: %s" % j["move_error"])
    print("      throttled/control during p99: %.2f; unthrottled/control: %.2f" % (
        load("t", r)[1][("during", "other")]["p99_ms"] / max(load("c", r)[1][("during", "other")]["p99_ms"], 1e-9),
        load("u", r)[1][("during", "other")]["p99_ms"] / max(load("c", r)[1][("during", "other")]["p99_ms"], 1e-9)))
