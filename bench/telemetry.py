#!/usr/bin/env python3
"""What live telemetry costs the client: CPU per request with it on and off.

Runs the same fixed-rate load against `shrike serve` (server on CPU 1, client on CPU 0) with
  on:  progress line (stderr on a pty), --stats-interval 1s, --metrics-listen 127.0.0.1:0
       scraped every second
  off: --no-progress, no telemetry flags (stderr on the same kind of pty)
alternating on/off runs, and prints the client's CPU per request (getrusage of the client
process alone; the scraper runs in this script) and the on/off ratio of the medians, with the
client's page faults per run and its send lateness p99.9 and max: a worker that stalls at tick
boundaries (2026-11-29: it made fresh histograms there) shows in both. `--before BINARY` runs
an older build the same way, interleaved.

    cargo build --release && python3 bench/telemetry.py [--duration 10 --rate 20000 --repeat 3]
        [--before BINARY]
"""
import argparse
import datetime
import json
import os
import platform
import pty
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def drain_pty(master, found, lines):
    """Reads the client's stderr (a pty) so it never blocks; reports the metrics URL."""
    buf = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            return
        if not chunk:
            return
        buf += chunk
        lines.append(chunk)
        m = re.search(rb"http://[0-9.:\[\]]+/metrics", buf)
        if m and not found:
            found.append(m.group(0).decode())
        buf = buf[-4096:]


def scrape(found, stop, scrapes):
    while not stop.is_set():
        if found:
            try:
                with urllib.request.urlopen(found[0], timeout=2) as r:
                    r.read()
                scrapes.append(1)
            except OSError:
                pass
        stop.wait(1.0)


def one_run(shrike, url, a, on):
    args = ["taskset", "-c", "0", shrike, "run", url, "--rps", str(a.rate),
            "--connections", str(a.connections), "--duration", str(a.duration),
            "--output-format", "json"]
    args += ["--stats-interval", "1s", "--metrics-listen", "127.0.0.1:0"] if on else ["--no-progress"]
    master, slave = pty.openpty()
    found, lines, scrapes, stop = [], [], [], threading.Event()
    reader = threading.Thread(target=drain_pty, args=(master, found, lines), daemon=True)
    scraper = threading.Thread(target=scrape, args=(found, stop, scrapes), daemon=True)
    reader.start()
    scraper.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
                       text=True, timeout=a.duration + 60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stop.set()
    os.close(slave)
    scraper.join()
    reader.join(timeout=2)
    os.close(master)
    if p.returncode != 0:
        sys.exit(f"client failed ({p.returncode}): {b''.join(lines).decode(errors='replace')}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    faults = after.ru_minflt - before.ru_minflt
    result = json.loads(p.stdout)
    g = next(r for r in result["results"] if r["name"] == "global")
    n = int(next(c["value"] for c in g["counters"] if c["name"] == "upstream_rq_total"))
    late = next(st for st in g["statistics"] if st["id"] == "sequencer.send_lateness")
    if on:
        # The telemetry really ran: intervals stored, progress drawn, endpoint scraped.
        assert result.get("shrike", {}).get("intervals"), "no intervals stored"
        assert b"\x1b[2K" in b"".join(lines), "no progress line drawn"
        assert scrapes, "metrics endpoint never scraped"
    return n, cpu / max(n, 1) * 1e6, faults, lateness_us(late, 0.999), lateness_us(late, 1.0)


def lateness_us(stat, q):
    """The statistic's value at quantile q, µs, from its printed percentiles."""
    return next(float(p["duration"].rstrip("s")) * 1e6 for p in stat["percentiles"]
                if p["percentile"] >= q)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--rate", type=int, default=20000, help="requests per second")
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3, help="on/off pairs")
    ap.add_argument("--shrike", default=os.path.join(ROOT, "target", "release", "shrike"))
    ap.add_argument("--before", metavar="BINARY", help="also run this build, interleaved")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(a.shrike):
        sys.exit(f"{a.shrike} not found: cargo build --release (or pass --shrike)")
    server = subprocess.Popen(["taskset", "-c", "1", a.shrike, "serve", "--listen", "127.0.0.1:0",
                               "--concurrency", "1"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    url = f"http://{server.stdout.readline().strip()}/"
    builds = [("shrike", a.shrike)] + ([("before", a.before)] if a.before else [])
    runs = {(b, on): [] for b, _ in builds for on in (False, True)}
    try:
        for _ in range(a.repeat):
            for b, path in builds:
                for on in (False, True):
                    n, us, faults, p999, top = one_run(path, url, a, on)
                    runs[(b, on)].append((us, faults, p999, top))
                    print(f"{b} telemetry {'on ' if on else 'off'}: {n} requests, {us:.2f} µs "
                          f"CPU/request, {faults} page faults, send lateness p99.9 {p999:.0f} µs, "
                          f"max {top:.0f} µs", flush=True)
    finally:
        server.terminate()
        server.wait()
    rows = []
    for b, _ in builds:
        med = {on: [statistics.median(col) for col in zip(*runs[(b, on)])] for on in (False, True)}
        ratio = med[True][0] / med[False][0]
        print(f"\n{b}: median client CPU per request off {med[False][0]:.2f} µs, on "
              f"{med[True][0]:.2f} µs, on/off {ratio:.3f}")
        for on in (False, True):
            us, faults, p999, top = med[on]
            rows.append(f"| {b} | {'on' if on else 'off'} | {us:.2f} | {faults:.0f} | "
                        f"{p999:.0f} | {top:.0f} |")
        rows.append(f"| {b} | on/off | {ratio:.3f} | | | |")
    if a.no_record:
        return
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "telemetry.md"), "a") as f:
        f.write(f"\n## {datetime.date.today()} {platform.node()} ({os.cpu_count()} CPUs)\n\n"
                f"{a.rate} rps × {a.duration}s, {a.connections} connections, {a.repeat} pairs; "
                "on = progress + --stats-interval 1s + --metrics-listen scraped every 1s. "
                "Medians per build and mode"
                + (f"; before = `{a.before}`" if a.before else "") + ".\n\n"
                "| build | telemetry | client CPU µs/req | page faults | send lateness p99.9 µs "
                "| max µs |\n|---|---|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
