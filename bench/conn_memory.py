#!/usr/bin/env python3
"""Client memory per connection: Shrike, wrk and oha each holding N keep-alive connections
(9,000 by default: the machine's 20,000-fd limit has to fit the client and nginx) to a
one-worker nginx.

Each client runs twice, with one connection (Shrike: at 20 rps) and with N; a sampler reads its
VmRSS and counts its open sockets (/proc/PID/fd) every 100 ms. Bytes per connection are (RSS
with N − RSS with one) / sockets, both taken while the most sockets were open, so a client that
opens fewer than asked is not flattered.
wrk and oha keep every connection busy; Shrike runs twice: at 3,000 rps spread over every
connection (`lru`, so each has served requests and holds its buffers), and prefetched at 20 rps
(most connections never used).

    cargo build --release && python3 bench/conn_memory.py [--connections 9000] [--before BINARY]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CLIENT_CPU, SHRIKE, SERVER_CPU, heading, record, scratch  # noqa: E402
from compare import start_nginx  # noqa: E402
from peers import peer  # noqa: E402

SECONDS = 6


def sockets(pid):
    n = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
            except OSError:
                pass
    except OSError:
        pass
    return n


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def peak(cmd):
    """Runs cmd on the client CPU; returns (RSS kB, sockets) while it held the most sockets:
    the highest RSS among the samples with at least 98% of the most sockets seen. (RSS at the
    very end, with the sockets closing and the result being written, is not the figure.)"""
    p = subprocess.Popen(["taskset", "-c", CLIENT_CPU] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    samples = []
    deadline = time.time() + SECONDS + 30
    while p.poll() is None:
        if time.time() > deadline:
            p.kill()
            break
        samples.append((sockets(p.pid), rss_kb(p.pid)))
        time.sleep(0.1)
    p.wait()
    most = max((s for s, _ in samples), default=0)
    rss = max((r for s, r in samples if s >= most * 0.98), default=0)
    return rss, most


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=9000)
    ap.add_argument("--before", metavar="BINARY", help="also measure this Shrike build")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    tmp = scratch("conn-memory")
    nginx, url = start_nginx(tmp, connections=a.connections + 500)
    d = str(SECONDS)

    def shrike(binary, rps, extra):
        return lambda c: [binary, "run", url, "--rps", str(rps), "--connections", str(c),
                          "--prefetch-connections", "--duration", d, "--concurrency", "1",
                          "--timeout", "30", "-v", "error", "--output-format", "json"] + extra
    lru = ["--experimental-h1-connection-reuse-strategy", "lru"]
    uring = ["--io-backend", "io_uring"]
    clients = [("shrike, every connection used", shrike(SHRIKE, 3000, lru)),
               ("shrike, prefetched, mostly idle", shrike(SHRIKE, 20, [])),
               ("shrike io_uring, every connection used", shrike(SHRIKE, 3000, lru + uring)),
               ("shrike io_uring, prefetched, mostly idle", shrike(SHRIKE, 20, uring))]
    if a.before:
        clients += [("shrike before, every connection used", shrike(a.before, 3000, lru)),
                    ("shrike before, prefetched, mostly idle", shrike(a.before, 20, [])),
                    ("shrike before io_uring, every connection used",
                     shrike(a.before, 3000, lru + uring)),
                    ("shrike before io_uring, prefetched, mostly idle",
                     shrike(a.before, 20, uring))]
    clients.append(("wrk", lambda c: ["wrk", "-t1", f"-c{c}", f"-d{d}s", "--timeout", "30s",
                                      url]))
    oha = peer("oha")
    if oha:
        clients.append(("oha", lambda c: [oha, "-c", str(c), "-z", f"{d}s", "--no-tui",
                                          "--output-format", "quiet", url]))
    rows = []
    try:
        for name, cmd in clients:
            # Shrike's baseline is one connection at 20 rps whatever the case: the same process
            # with nothing to hold.
            # (on the same I/O backend).
            backend = uring if "io_uring" in name else []
            base = shrike(cmd(1)[0], 20, backend) if name.startswith("shrike") else cmd
            one, _ = peak(base(1))
            rss, socks = peak(cmd(a.connections))
            per = (rss - one) * 1024 / max(socks, 1)
            rows.append((name, socks, one, rss, per))
            print(rows[-1], file=sys.stderr)
    finally:
        nginx.terminate()
        nginx.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    wrk = next((r[4] for r in rows if r[0] == "wrk"), None)
    lines = ["| client | sockets open | RSS with 1 (MB) | RSS with N (MB) | bytes per connection "
             "| vs wrk | 100k connections, extrapolated |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, socks, one, rss, per in rows:
        ratio = f"{per / wrk:.2f}×" if wrk else "—"
        at100k = (one * 1024 + per * 100_000) / 1e6
        lines.append(f"| {name} | {socks} | {one / 1024:.1f} | {rss / 1024:.1f} | {per:,.0f} | "
                     f"{ratio} | {at100k:,.0f} MB |")
    text = (f"{heading()}\n\n{a.connections} keep-alive connections to nginx "
            f"(1 worker, CPU {SERVER_CPU}) for {SECONDS}s, client on CPU {CLIENT_CPU}; peak "
            f"RSS sampled every 100 ms, taken while the most sockets were open.\n\n" + "\n".join(lines) + "\n")
    record("conn-memory.md", text, not a.no_record)


if __name__ == "__main__":
    main()
