#!/usr/bin/python3
"""scripts/lib/bench-flush.py DIR SECONDS [GAP_MS] — the disk's own flush latency, the floor under
every durable COMMIT: writes 8 KiB and fdatasync()s it, over and over, in a file in DIR (the
store's file system) for SECONDS, GAP_MS apart (default 2: a commit stream of a few hundred a
second, like the coordinator's group commit at half load), and prints one JSON line:
{"flushes", "p50_ms", "p99_ms", "p999_ms", "max_ms", "over_5ms", "over_50ms", "dir", "fs"}.
The file is removed at the end. Nothing here talks to PostgreSQL."""
import json
import os
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    d, secs = sys.argv[1], float(sys.argv[2])
    gap = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.002
    path = os.path.join(d, "flush-probe.%d" % os.getpid())
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    size, off, buf, lat = 16 << 20, 0, b"\0" * 8192, []
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
        end = time.monotonic() + secs
        while time.monotonic() < end:
            os.pwrite(fd, buf, off)
            off = (off + len(buf)) % size
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t) * 1000)
            time.sleep(gap)
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    n = len(lat)

    def q(p):
        return round(lat[min(n - 1, max(0, -(-int(p * 1000 * n) // 1000) - 1))], 3)

    fs = subprocess.run(["df", "--output=fstype", d], capture_output=True, text=True).stdout.split()[-1]
    print(json.dumps({"flushes": n, "p50_ms": q(.5), "p99_ms": q(.99), "p999_ms": q(.999),
                      "max_ms": round(lat[-1], 3), "over_5ms": sum(1 for x in lat if x > 5),
                      "over_50ms": sum(1 for x in lat if x > 50), "dir": d, "fs": fs}))


if __name__ == "__main__":
    main()
