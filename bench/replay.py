#!/usr/bin/env python3
"""Replay at scale: many concurrent jobs, each holding its own connection, against Shrike's
test server, reporting whether the replay kept the captured timing (send lateness p50/p99/max:
how long after its captured time each request left), the request rate, and peak RSS.

The jobs file is generated here: JOBS sessions that all start within the first second (or
RAMP seconds) and each send a request every INTERVAL for DURATION, so JOBS sessions (and
connections) are running at once for most of the replay. Each job's connection opened ahead of
its first request by a lead drawn from 5-50 ms (`--connect-ahead 50`: a client's round trip
before it sends, as a capture's SYN shows it; 0 writes no lead). Client on CPU 0, server on
CPU 1.

The floor beside it: a do-nothing pacer (a busy-wait on CPU 0 for each release time at the
replay's request rate, for up to 5 s before the replay) says how late this host alone makes a
release, whatever the pacer: its p99 is the best any replay here can reach.

    cargo build --release && python3 bench/replay.py [--jobs 10000] [--duration 10] [--ramp 1]

Goal (issue 12): lateness p99 <= 1 ms at 10,000 concurrent jobs. Results are printed and
appended as a dated Markdown table to bench/results/replay.md.
"""
import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CLIENT_CPU, ROOT, SERVER_CPU, SHRIKE, free_port, scratch, wait_port  # noqa: E402


def write_jobs(path, jobs, duration, interval, ramp=1.0, ahead_ms=50.0):
    """JOBS sessions starting spread over the first RAMP seconds, a GET every INTERVAL each,
    each connection opened 5..AHEAD_MS ms before its first request (none when 0)."""
    rng = random.Random(1)
    n = int(duration / interval)
    with open(path, "w") as f:
        f.write('{"shrike_jobs": 1, "protocol": "http", "source": "bench/replay.py"}\n')
        starts = sorted(rng.random() * ramp for _ in range(jobs))
        for i, start in enumerate(starts):
            reqs = [
                {"at": round(k * interval, 6), "text": f"GET /j{i}/{k} HTTP/1.1\r\nhost: x\r\n\r\n"}
                for k in range(n)
            ]
            job = {"job": i + 1, "start": round(start, 6), "requests": reqs}
            if ahead_ms > 0:
                job["connect_ahead"] = round(rng.uniform(min(5.0, ahead_ms), ahead_ms) / 1e3, 6)
            f.write(json.dumps(job) + "\n")
    return jobs * n


def floor(seconds, rate):
    """The host's floor: a pacer that does nothing but busy-wait for each release time (RATE
    a second, for SECONDS) on the client's CPU, and how late it saw each. (p50, p99, max) s."""
    script = f"""
import time
period, late, k = 1.0 / {rate}, [], 0
t0 = time.perf_counter()
while k * period < {seconds}:
    due = t0 + k * period
    now = time.perf_counter()
    while now < due:
        now = time.perf_counter()
    late.append(now - due)
    k += 1
late.sort()
print(late[len(late) // 2], late[int(len(late) * 0.99)], late[-1])
"""
    out = subprocess.run(["taskset", "-c", CLIENT_CPU, sys.executable, "-c", script],
                         capture_output=True, text=True, check=True).stdout.split()
    return tuple(float(x) for x in out)


def peak_rss_kib(pid, stop):
    """Polls /proc/PID/status for VmHWM (the kernel's own peak) until STOP() says so."""
    peak = 0
    while not stop():
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            break
        time.sleep(0.2)
    return peak


def stat(result, sid):
    for s in result["results"][-1]["statistics"]:
        if s["id"] == sid:
            return s
    return None


def pct(s, q):
    """The value at the first listed percentile at or above Q (Nighthawk's list has 0.99)."""
    for p in s.get("percentiles", []):
        if float(p["percentile"]) >= q - 1e-9:
            return float(p["duration"].rstrip("s"))
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--ramp", type=float, default=1.0,
                    help="jobs start spread over this many seconds")
    ap.add_argument("--connect-ahead", type=float, default=50.0,
                    help="each connection opens 5..this many ms before its first request "
                         "(0: no lead recorded, opened with the first request)")
    args = ap.parse_args()
    tmp = scratch("replay")
    jobs_path = os.path.join(tmp, "bench.jobs")
    t = time.time()
    total = write_jobs(jobs_path, args.jobs, args.duration, args.interval, args.ramp,
                       args.connect_ahead)
    size = os.path.getsize(jobs_path)
    print(f"jobs file: {args.jobs} jobs, {total} requests, {size / 1e6:.1f} MB "
          f"({time.time() - t:.1f}s to write)")
    rate = args.jobs / args.interval
    floor_p50, floor_p99, floor_max = floor(min(args.duration, 5.0), rate)
    port = free_port()
    server = subprocess.Popen(
        ["taskset", "-c", SERVER_CPU, SHRIKE, "serve", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        out_path = os.path.join(tmp, "result.json")
        cmd = ["taskset", "-c", CLIENT_CPU, SHRIKE, "replay", jobs_path,
               "--target", f"127.0.0.1:{port}", "--concurrency", str(args.workers),
               "--output-format", "json", "-o", out_path]
        t0 = time.time()
        client = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        peak = peak_rss_kib(client.pid, lambda: client.poll() is not None)
        err = client.communicate()[1]
        wall = time.time() - t0
        if client.returncode != 0:
            sys.exit(f"replay failed ({client.returncode}):\n{err}")
    finally:
        server.terminate()
        server.wait()
    result = json.load(open(out_path))
    g = result["results"][-1]
    counters = {c["name"]: int(c["value"]) for c in g["counters"]}
    late = stat(result, "sequencer.send_lateness")
    rows = [
        ("concurrent jobs", f"{args.jobs}"),
        ("requests", f"{counters.get('upstream_rq_total', 0)} of {total}"),
        ("connections", f"{counters.get('upstream_cx_total', 0)}"),
        ("2xx", f"{counters.get('benchmark.http_2xx', 0)}"),
        ("rate", f"{counters.get('upstream_rq_total', 0) / wall:.0f}/s over {wall:.1f}s"),
        ("lateness p50", f"{pct(late, 0.5) * 1e6:.0f} µs"),
        ("lateness p99", f"{pct(late, 0.99) * 1e6:.0f} µs"),
        ("lateness max", f"{float(late['max'].rstrip('s')) * 1e6:.0f} µs"),
        ("peak RSS", f"{peak / 1024:.1f} MiB"),
        ("floor p50/p99/max", f"{floor_p50 * 1e6:.0f} / {floor_p99 * 1e6:.0f} / "
                              f"{floor_max * 1e6:.0f} µs (a do-nothing pacer at {rate:.0f}/s)"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    ok = pct(late, 0.99) <= 1e-3
    print(f"goal lateness p99 <= 1 ms: {'met' if ok else 'NOT met'}")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "replay.md"), "a") as f:
        f.write(f"\n## {datetime.date.today()} — {platform.node()}, {os.cpu_count()} CPUs, "
                f"{args.workers} worker(s), {args.duration:.0f}s, a request per "
                f"{args.interval}s per job, jobs starting over {args.ramp:g} s, "
                f"connections opened {'5-' + format(args.connect_ahead, 'g') + ' ms ahead' if args.connect_ahead > 0 else 'with their first request'}\n\n"
                f"| measure | value |\n|---|---|\n")
        for k, v in rows:
            f.write(f"| {k} | {v} |\n")
        f.write(f"\nGoal lateness p99 ≤ 1 ms: {'met' if ok else 'not met'}.\n")


if __name__ == "__main__":
    main()
