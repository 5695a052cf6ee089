#!/usr/bin/env python3
"""Release-timing precision per idle strategy: sequencer.send_lateness, achieved rate, CPU.

Runs `shrike run` against `shrike serve` (client on CPU 0, server on CPU 1) at 1k and 10k rps
with --sequencer-idle-strategy spin, poll and sleep, and prints send-lateness p50/p99, the
achieved rate against the target, scheduled-to-response p99 and client CPU per request.

    cargo build --release && python3 bench/pacing.py [--duration 5] [--strategies spin,poll]
"""
import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHRIKE = os.path.join(ROOT, "target", "release", "shrike")


def pct(stat, q):
    return next(float(p["duration"].rstrip("s")) for p in stat["percentiles"] if p["percentile"] >= q)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rates", default="1000,10000")
    ap.add_argument("--strategies", default="spin,poll,sleep")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(SHRIKE):
        sys.exit("build first: cargo build --release")
    server = subprocess.Popen(["taskset", "-c", "1", SHRIKE, "serve", "--listen", "127.0.0.1:0",
                               "--concurrency", "1"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    url = f"http://{server.stdout.readline().strip()}/"
    rows = []
    try:
        for strategy in a.strategies.split(","):
            for rate in a.rates.split(","):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                out = subprocess.run(["taskset", "-c", "0", SHRIKE, "run", url, "--rps", rate,
                                      "--connections", "20", "--duration", str(a.duration),
                                      "--sequencer-idle-strategy", strategy,
                                      "--output-format", "json", "-v", "error"],
                                     capture_output=True, text=True, check=True).stdout
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                g = next(r for r in json.loads(out)["results"] if r["name"] == "global")
                stats = {s["id"]: s for s in g["statistics"]}
                n = int(next(c["value"] for c in g["counters"] if c["name"] == "upstream_rq_total"))
                late = stats["sequencer.send_lateness"]
                sched = stats["benchmark_http_client.scheduled_to_response"]
                # The plan for the run: rate × duration releases; a pacer that cannot keep up
                # (or releases late past the deadline) falls short of it.
                planned = float(rate) * a.duration
                rows.append((strategy, rate, n, (n / planned - 1) * 100, pct(late, 0.5) * 1e6,
                             pct(late, 0.99) * 1e6, pct(sched, 0.99) * 1e6, cpu / n * 1e6))
    finally:
        server.terminate()
        server.wait()
    lines = ["| idle strategy | target rps | requests | vs planned | lateness p50 µs | "
             "lateness p99 µs | scheduled→response p99 µs | client CPU µs/req |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:+.2f}% | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.1f} "
              f"| {r[7]:.2f} |" for r in rows]
    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                      if l.startswith("model name")), "unknown CPU")
    text = (f"## {datetime.date.today().isoformat()} — {os.cpu_count()} vCPU {cpu_model}, "
            f"Linux {platform.release()}\n\n{a.duration}s per rate and strategy, 20 connections, "
            f"client on CPU 0 against `shrike serve` on CPU 1.\n\n"
            + "\n".join(lines) + "\n")
    print(text)
    if not a.no_record:
        with open(os.path.join(ROOT, "bench", "results", "pacing.md"), "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
