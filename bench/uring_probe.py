#!/usr/bin/env python3
"""Would an io_uring backend make the HTTP/1.1 client cheaper than wrk? `uring-probe`
(bench/uring-probe: the smallest keep-alive loop over io_uring, not a client) beside wrk and
`shrike run --rps max`, each with 64 connections against nginx (1 worker), client on CPU 0 and
server on CPU 1, two rounds. The probe runs three ways: one completion per wait, and batches of
up to 32 and 64 completions whose wait is bounded by 50 and 100 µs (what batching could add to
a measured latency).

Then paced: the probe releasing on an even schedule at 1k, 5k and 20k rps over 20
connections, its wait for completions carrying the time to the next release as its timeout
(the release timer and the I/O wait in one system call), beside `shrike run` with the default
`poll` strategy and fortio (bench/peers.py), two rounds.

    cargo build --release && python3 bench/uring_probe.py [--duration 5] [--no-record]
"""
import argparse
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ROOT, SHRIKE, heading, record, run_shrike, run_wrk, scratch  # noqa: E402
from compare import build_probe, start_nginx, timed_run  # noqa: E402
from pacing import fortio as fortio_client, shrike as shrike_client  # noqa: E402
from peers import peer  # noqa: E402

CONNECTIONS = 64
PROBE = os.path.join(ROOT, "target", "uring-probe", "release", "uring-probe")



def probe_run(url, d, connections, batch=1, timeout_us=0, rate=0):
    """One probe run: (responses, client CPU seconds, lateness p50/p99 µs when paced)."""
    hostport = url.split("//")[1].split("/")[0]
    out, cpu = timed_run([PROBE, hostport, "/file", str(connections), str(d), str(batch),
                          str(timeout_us), str(rate)])
    m = re.search(r"responses (\d+) odd (\d+)", out.stdout)
    if not m or m.group(2) != "0":
        sys.exit(f"uring-probe failed: {out.stdout} {out.stderr}")
    late = re.search(r"late_p50_us ([\d.]+) late_p99_us ([\d.]+)", out.stdout)
    return int(m.group(1)), cpu, late and (float(late.group(1)), float(late.group(2)))


def probe_closed(batch, timeout_us):
    """The probe in closed loop as the first table runs it: (url, seconds) -> (n, cpu)."""
    return lambda url, d: probe_run(url, d, CONNECTIONS, batch, timeout_us)[:2]


def paced_table(url, d):
    clients = [("shrike poll (epoll + timerfd)", shrike_client(SHRIKE, "poll")),
               ("uring-probe (one io_uring_enter with a timeout)",
                lambda url, rate, d: probe_run(url, d, 20, rate=rate))]
    path = peer("fortio")
    if path:
        clients.append(("fortio", fortio_client(path)))
    rows = []
    for _ in range(2):
        for rate in (1000, 5000, 20000):
            for name, run in clients:
                n, cpu, late = run(url, rate, d)
                rows.append((rate, name, n, cpu / max(n, 1) * 1e6, late))
                print(f"{rate:6} {name:48} {rows[-1][3]:7.2f} µs/req {late}", file=sys.stderr,
                      flush=True)
    lines = ["| rps | client | requests | client CPU µs/req | lateness p50 / p99 µs |",
             "|---:|---|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: r[0]):
        late = f"{r[4][0]:.1f} / {r[4][1]:.1f}" if r[4] else "—"
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2f} | {late} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    build_probe("uring-probe")
    clients = [("wrk", lambda url, d: run_wrk(url, CONNECTIONS, d)[::2]),
               ("shrike --rps max (epoll)",
                lambda url, d: run_shrike(url, CONNECTIONS, d, rps="max")[::2]),
               ("uring-probe, 1 completion per wait", probe_closed(1, 0)),
               ("uring-probe, up to 32 per wait, ≤ 50 µs", probe_closed(32, 50)),
               ("uring-probe, up to 64 per wait, ≤ 100 µs", probe_closed(64, 100))]
    tmp = scratch("uring-probe")
    server, url = start_nginx(tmp)
    rows = []
    try:
        for _ in range(2):
            for name, run in clients:
                n, cpu = run(url, a.duration)
                rows.append((name, n, n / a.duration, cpu / max(n, 1) * 1e6))
                print(f"{name:42} {rows[-1][2]:9.0f} req/s {rows[-1][3]:6.2f} µs/req",
                      file=sys.stderr, flush=True)
        paced = paced_table(url, a.duration)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    lines = ["| client | requests | req/s | client CPU µs/req | vs wrk (same round) |",
             "|---|---:|---:|---:|---:|"]
    per_round = len(clients)
    for i, r in enumerate(rows):
        ref = rows[i - i % per_round][3]
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:.0f} | {r[3]:.2f} | {r[3] / ref:.2f}× |")
    text = (f"{heading()}\n\n{CONNECTIONS} keep-alive connections, {a.duration}s per run, two "
            f"rounds, against nginx (1 worker) on CPU 1, client on CPU 0.\n\n"
            + "\n".join(lines) + "\n\nPaced, 20 connections, the same nginx:\n\n"
            + paced + "\n")
    record("uring-probe.md", text, not a.no_record)


if __name__ == "__main__":
    main()
