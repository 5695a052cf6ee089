#!/usr/bin/env python3
"""The coordinator's overhead, side by side in one run on this machine's loopback:

- client CPU per request of one `shrike run` (no service), of one generator driven by
  `shrike run --remote` (service + coordinator), and of three generators (127.0.0.2-4) at the
  same total rate: what coordination, the sample stream and the exact merges cost;
- the time `shrike transform --merge` takes for 100 results (each with its exact histograms).

Every client process (run, coordinator, services) is pinned to CPU 0 and nginx to CPU 1. CPU is
the processes' own (utime + stime from /proc), so it does not depend on how busy nginx is.

    cargo build --release && python3 bench/fleet.py [--rps 20000] [--duration 10]

Results are printed and appended as a dated Markdown table to bench/results/fleet.md.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CLIENT_CPU, ROOT, SHRIKE, scratch, start_nginx  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def requests(result):
    g = next(r for r in result["results"] if r["name"] == "global")
    return sum(int(c["value"]) for c in g["counters"] if c["name"].startswith("benchmark.http_"))


def start_services(ips):
    services = []
    for ip in ips:
        p = subprocess.Popen(["taskset", "-c", CLIENT_CPU, SHRIKE, "service", "--listen", f"{ip}:0",
                              "--allow-target", "127.0.0.1", "--bind-address", ip],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        services.append((p, p.stdout.readline().strip()))
    return services


def run_client(cmd, extra_pids=()):
    """Runs CMD pinned to the client CPU; returns (result, CPU seconds of it and EXTRA_PIDS)."""
    before = [cpu_seconds(p) for p in extra_pids]
    t0 = os.times()
    out = subprocess.run(["taskset", "-c", CLIENT_CPU] + cmd, capture_output=True, text=True)
    t1 = os.times()
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr[-500:]}")
    own = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    others = sum(cpu_seconds(p) - b for p, b in zip(extra_pids, before))
    return json.loads(out.stdout), own + others


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rps", type=int, default=20000, help="total requests per second")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=60)
    ap.add_argument("--merges", type=int, default=100)
    args = ap.parse_args()
    tmp = scratch("fleet")
    nginx, url = start_nginx(tmp)
    rows = []
    try:
        base = ["run", url, "--rps", str(args.rps), "--duration", str(args.duration),
                "--output-format", "json", "-v", "error"]
        result, cpu = run_client([SHRIKE] + base + ["--connections", str(args.connections)])
        rows.append(("shrike run (local)", requests(result), cpu))
        for ips in (["127.0.0.2"], ["127.0.0.2", "127.0.0.3", "127.0.0.4"]):
            services = start_services(ips)
            try:
                fleet = ",".join(a for _, a in services)
                # Each generator keeps --connections of its own: give the fleet the same total.
                conns = ["--connections", str(max(1, args.connections // len(ips)))]
                cmd = [SHRIKE] + base + ["--remote", fleet, "--remote-start-delay", "500ms"] + conns
                result, cpu = run_client(cmd, [p.pid for p, _ in services])
                rows.append((f"--remote, {len(ips)} generator(s)", requests(result), cpu))
                if len(ips) == 3:
                    sample_n = requests(result)
                    sample = os.path.join(tmp, "sample.json")
                    with open(sample, "w") as f:
                        json.dump(result, f)
            finally:
                for p, _ in services:
                    p.kill()
                    p.wait()
        # The merge: 100 copies of the 3-generator result (4 statistics sets each).
        merge_dir = os.path.join(tmp, "merge")
        os.makedirs(merge_dir)
        for i in range(args.merges):
            shutil.copy(sample, os.path.join(merge_dir, f"r{i:03}.json"))
        out = os.path.join(tmp, "merged.json")
        t = time.perf_counter()
        subprocess.run([SHRIKE, "transform", "--merge", merge_dir, "-o", out], check=True)
        merge_s = time.perf_counter() - t
        merged_n = requests(json.load(open(out)))
    finally:
        nginx.kill()
        nginx.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    local_us = rows[0][2] / rows[0][1] * 1e6
    lines = ["| client | requests | client CPU s | CPU µs/request | vs local |", "|---|---:|---:|---:|---:|"]
    for name, n, cpu in rows:
        per = cpu / n * 1e6
        lines.append(f"| {name} | {n} | {cpu:.2f} | {per:.2f} | {per / local_us:.2f}× |")
    one = rows[1][2] / rows[1][1]
    three = rows[2][2] / rows[2][1]
    summary = (f"3 generators vs 1: {three / one:.2f}× CPU per request. "
               f"transform --merge of {args.merges} results: {merge_s * 1000:.0f} ms "
               f"({merge_s / args.merges * 1000:.1f} ms each); the merge counts {merged_n} requests, "
               f"{'exactly' if merged_n == args.merges * sample_n else 'NOT'} {args.merges} × {sample_n}.")
    text = "\n".join(lines) + "\n\n" + summary + "\n"
    print(text)
    stamp = datetime.date.today().isoformat()
    head = (f"\n## {stamp}: {args.rps} rps total for {args.duration}s, {args.connections} connections "
            f"in all, nginx on CPU 1, every client process on CPU 0 ({platform.node()}, "
            f"{os.cpu_count()} cores)\n\n")
    with open(os.path.join(ROOT, "bench", "results", "fleet.md"), "a") as f:
        f.write(head + text)


if __name__ == "__main__":
    main()
