#!/usr/bin/python3
"""scripts/lib/test_summary.py RESULTS_DIR [--slowest N] [--banner LINE] — the end of scripts/test's output.

scripts/test keeps every suite's output in RESULTS_DIR (test-results/ by default):
  ctest-BUILD-PART.xml  ctest's JUnit report of one ctest run (BUILD: release, asan)
  tests-BUILD.json      `ctest --show-only=json-v1` of that build: each test's labels and timeout
  steps.tsv             the steps that are not ctest tests (builds, checks, the campaign, the
                        fuzzers): name, build, label, seconds, pass|fail, the file of their output
This writes each test's own output to RESULTS_DIR/BUILD/NAME.log and prints, last of all, for
each failing test its name, build, label, seconds and the last 40 lines of its output, then one
closing line "N passed, N failed". The last 12,000 characters of a failed run hold the first
failures in full (lines are clipped at 200 characters; past ten failures, only their names).
Standard library only: it runs with Debian's /usr/bin/python3 before anything else is installed.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

TAIL_LINES = 40
LINE_CHARS = 200
MAX_DETAILED = 10


def labels_of(results, build):
    """{test name: (labels, timeout)} from tests-BUILD.json."""
    path = os.path.join(results, f"tests-{build}.json")
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return out
    for t in info.get("tests", []):
        labels, timeout = [], None
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                labels = p.get("value") or []
            elif p.get("name") == "TIMEOUT":
                timeout = float(p.get("value"))
        out[t.get("name")] = (labels, timeout)
    return out


def ctest_results(results):
    """Each test a dict: name, build, label, seconds, ok, log, note."""
    rows = []
    # in the order the runs ended (the normal build's before the sanitizers')
    names = [fn for fn in os.listdir(results) if fn.startswith("ctest-") and fn.endswith(".xml")]
    for fn in sorted(names, key=lambda fn: os.path.getmtime(os.path.join(results, fn))):
        build = fn[len("ctest-"):-len(".xml")].split("-")[0]
        meta = labels_of(results, build)
        try:
            root = ET.parse(os.path.join(results, fn)).getroot()
        except (OSError, ET.ParseError) as e:
            rows.append(dict(name=fn, build=build, label="ctest", seconds=0.0, ok=False,
                             log=None, note=f"unreadable JUnit report: {e}"))
            continue
        os.makedirs(os.path.join(results, build), exist_ok=True)
        for tc in root.iter("testcase"):
            name = tc.get("name")
            secs = float(tc.get("time") or 0)
            status = tc.get("status")
            out = tc.findtext("system-out") or ""
            log = os.path.join(results, build, f"{name}.log")
            with open(log, "w", encoding="utf-8", errors="replace") as f:
                f.write(out)
            labels, timeout = meta.get(name, ([], None))
            note = ""
            if status != "run" and timeout and secs >= timeout - 0.5:
                note = f"timed out after {timeout:.0f} s"
            elif status == "notrun":
                note = "not run (no executable?)"
            rows.append(dict(name=name, build=build, label=";".join(labels) or "-",
                             seconds=secs, ok=(status == "run"), log=log, note=note))
    return rows


def step_results(results):
    rows = []
    path = os.path.join(results, "steps.tsv")
    if not os.path.exists(path):
        return rows
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 6:
                continue
            name, build, label, secs, status, log = parts
            rows.append(dict(name=name, build=build, label=label, seconds=float(secs),
                             ok=(status == "pass"), log=log or None, note=""))
    return rows


def tail(path, n):
    if not path or not os.path.exists(path):
        return ["(no output file)"]
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    if not lines:
        return ["(no output)"]
    return [l if len(l) <= LINE_CHARS else l[:LINE_CHARS] + " [...]" for l in lines[-n:]]


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    results = argv[1]
    slowest = int(argv[argv.index("--slowest") + 1]) if "--slowest" in argv else 0
    banner = argv[argv.index("--banner") + 1] if "--banner" in argv else ""
    rows = step_results(results) + ctest_results(results)
    failed = [r for r in rows if not r["ok"]]
    passed = len(rows) - len(failed)

    if slowest:
        print(f"== the {slowest} slowest tests")
        for r in sorted((r for r in rows if r["label"] not in ("build", "setup", "check")),
                        key=lambda r: -r["seconds"])[:slowest]:
            print(f"{r['seconds']:8.1f} s  {r['name']} ({r['build']}, {r['label']})")

    print("== summary (every output is in " + results + ")")
    for i, r in enumerate(failed):
        head = (f"FAILED: {r['name']}  build {r['build']}  label {r['label']}  "
                f"{r['seconds']:.1f} s" + (f"  ({r['note']})" if r["note"] else ""))
        print(head)
        if i < MAX_DETAILED:
            print(f"-- its last {TAIL_LINES} lines ({r['log'] or 'no file'}):")
            for l in tail(r["log"], TAIL_LINES):
                print("   | " + l)
            print("-- end of " + r["name"])
    if failed:
        print("failed: " + ", ".join(f"{r['name']} ({r['build']})" for r in failed))
    if banner:
        print(banner)
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
