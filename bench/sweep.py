#!/usr/bin/env python3
"""Saturation sweeps with one command: `shrike sweep` against nginx (1 worker) and against
`shrike serve`, each server started by the sweep (--server-cmd) and pinned to one CPU, the
client to the other, with the server's CPU and memory sampled over every run.

This replaces the webserver-benchmarking guide's setup (wrk runs per connection count,
pidstat beside them, a spreadsheet for the peak) with one command per server; the script
prints the peak, the curve and how long each sweep took, and appends a dated Markdown table
to bench/results/sweep.md.

    cargo build --release && python3 bench/sweep.py [--duration 3] [--iterations 3]
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The same nginx and pinning as the peer comparison.
from compare import BODY, CLIENT_CPU, ROOT, SERVER_CPU, SHRIKE, free_port, write_nginx_conf  # noqa: E402


def nginx_cmd(tmp):
    port = free_port()
    # The sweep targets "/": nginx serves index.html there.
    conf = write_nginx_conf(tmp, port, "index.html")
    # nginx prints nothing: say where it listens, then become it.
    return f"echo 127.0.0.1:{port}; exec taskset -c {SERVER_CPU} nginx -p {tmp} -c {conf}"


def shrike_cmd():
    return (f"exec taskset -c {SERVER_CPU} {SHRIKE} serve --listen 127.0.0.1:0 "
            f"--concurrency 1 --response-body-size {BODY}")


def sweep(cmd, grid, duration, iterations):
    t0 = time.time()
    out = subprocess.run(
        ["taskset", "-c", CLIENT_CPU, SHRIKE, "sweep", "--connections", grid, "--iterations",
         str(iterations), "--duration", str(duration), "--wait", "0.5s", "--server-cmd", cmd,
         "--output-format", "json", "-v", "warn"],
        capture_output=True, text=True, check=False)
    took = time.time() - t0
    if out.returncode != 0:
        sys.exit(f"shrike sweep failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout), took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=3)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--grid", default="1,2,4,8,16,32,64")
    args = ap.parse_args()
    for tool in ["nginx", "taskset"]:
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install nginx util-linux")
    if not os.path.exists(SHRIKE):
        sys.exit("build first: cargo build --release")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, cmd in [("nginx (1 worker)", nginx_cmd(tmp)), ("shrike serve (1 thread)", shrike_cmd())]:
            doc, took = sweep(cmd, args.grid, args.duration, args.iterations)
            peak = doc["peak"]
            curve = [(p["level"], p["throughput_rps"]["mean"],
                      sum(i["server"]["cpu_cores"] or 0 for i in p["iterations"]) / len(p["iterations"]))
                     for p in doc["sweep"]["points"]]
            usl = peak.get("usl") or {}
            rows.append((name, peak, curve, usl, took))
            print(f"{name}: peak {peak['throughput_rps']['mean']:.0f} ± {peak['throughput_rps']['sd']:.0f}"
                  f" rps at {peak['connections']} connections, p99 {peak['p99_s'] * 1e6:.0f} µs,"
                  f" server CPU {peak['server_cpu_cores']:.2f}, saturated {peak['saturated']};"
                  f" sweep took {took:.1f} s")
            for lvl, tp, cpu in curve:
                print(f"  {lvl:>4} connections: {tp:>9.0f} rps, server CPU {cpu:.2f}")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [f"\n## {datetime.date.today()} — {os.cpu_count()} vCPU {cpu}, Linux {platform.release()}\n",
             f"`python3 bench/sweep.py --duration {args.duration} --iterations {args.iterations}"
             f" --grid {args.grid}` (client on CPU {CLIENT_CPU}, server on CPU {SERVER_CPU})\n",
             "| server | peak rps (± sd) | at connections | p99 at peak | server CPU at peak | saturated |"
             " USL σ / κ / predicted peak | sweep wall time |",
             "|---|---|---|---|---|---|---|---|"]
    for name, peak, curve, usl, took in rows:
        pred = usl.get("predicted_peak_concurrency")
        lines.append(
            f"| {name} | {peak['throughput_rps']['mean']:.0f} (± {peak['throughput_rps']['sd']:.0f}) |"
            f" {peak['connections']} | {peak['p99_s'] * 1e6:.0f} µs | {peak['server_cpu_cores']:.2f} |"
            f" {peak['saturated']} | {usl.get('sigma', float('nan')):.4f} / {usl.get('kappa', float('nan')):.2e} /"
            f" {'none' if pred is None else f'{pred:.1f}'} | {took:.1f} s |")
    lines.append("\nCurves (connections: mean rps, server CPU cores):\n")
    for name, peak, curve, usl, took in rows:
        lines.append(f"- {name}: " + ", ".join(f"{l}: {tp:.0f} ({c:.2f})" for l, tp, c in curve))
    path = os.path.join(ROOT, "bench", "results", "sweep.md")
    new = not os.path.exists(path)
    with open(path, "a") as f:
        if new:
            f.write("# `shrike sweep`: saturation peaks in one command\n")
        f.write("\n".join(lines) + "\n")
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
