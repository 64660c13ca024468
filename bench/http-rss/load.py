#!/usr/bin/python3
"""load.py PORT PID N BYTES — N concurrent POSTs (each its own Idempotency-Key) asking the server
for BYTES-byte answers, read and dropped; prints the server's RSS before (after a warm-up) and
its peak during (VmHWM, reset first through /proc/PID/clear_refs), and the time."""
import socket
import sys
import threading
import time
import uuid

port, pid, n, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def status(field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise SystemExit(f"no {field} for pid {pid}")


def post(nbytes, got, i):
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    req = (f"POST /download HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: rss-{uuid.uuid4()}\r\n"
           f"Response-Bytes: {nbytes}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}")
    s.sendall(req.encode())
    buf = bytearray(1 << 20)
    total = 0
    head = b""
    while True:
        k = s.recv_into(buf)
        if not k:
            break
        if len(head) < 4096:
            head += bytes(buf[:min(k, 4096)])
        total += k
    s.close()
    got[i] = (head.split(b"\r\n", 1)[0].decode(errors="replace"), total)


warm = [None]
post(100000, warm, 0)
with open(f"/proc/{pid}/clear_refs", "w") as f:
    f.write("5")
base = status("VmRSS")
got = [None] * n
t0 = time.monotonic()
threads = [threading.Thread(target=post, args=(size, got, i)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
secs = time.monotonic() - t0
peak = status("VmHWM")
ok = all(g and g[0].split(" ")[1] == "200" and g[1] > size for g in got)
print(f"{n} x {size >> 20} MB in {secs:.1f} s; RSS {base >> 20} MB before, peak {peak >> 20} MB "
      f"(+{(peak - base) >> 20} MB){'' if ok else '; ANSWERS WRONG: ' + repr(got)}")
sys.exit(0 if ok else 1)
