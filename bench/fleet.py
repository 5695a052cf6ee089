#!/usr/bin/env python3
"""The coordinator's overhead, side by side in one run on this machine's loopback:

- client CPU per request of one `shrike run` (no service), of one generator driven by
  `shrike run --remote` (service + coordinator), and of three generators (127.0.0.2-4) at the
  same total rate: what coordination, the sample stream and the exact merges cost;
- the time `shrike transform --merge` takes for 100 results (each with its exact histograms);
- a generator lost mid-run (SIGKILL to one of three services, 40% into the run): when the
  coordinator found it lost, how long until the fleet's rate was back at the plan (its share
  re-spread over the two left), and how much of the plan went unsent. `--baseline BIN` runs
  the overhead rows and the loss with an older build too, side by side.

Every client process (run, coordinator, services) is pinned to CPU 0 and nginx to CPU 1. CPU is
the processes' own (utime + stime from /proc), so it does not depend on how busy nginx is.

    cargo build --release && python3 bench/fleet.py [--rps 20000] [--duration 10] \
        [--baseline /work/baseline/shrike-052894c]

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


def start_services(ips, binary=SHRIKE):
    services = []
    for ip in ips:
        p = subprocess.Popen(["taskset", "-c", CLIENT_CPU, binary, "service", "--listen", f"{ip}:0",
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


def seconds(d):
    return float(d.rstrip("s"))


def loss(binary, url, rps, duration, tmp):
    """Three generators at RPS for DURATION; one SIGKILLed 40% in. Returns (lost_at, recovered
    after, sent, planned): lost_at from the result (None for builds that do not record it),
    recovered after: from the loss until a 250 ms interval's rate is back at 95% of the plan."""
    services = start_services(["127.0.0.2", "127.0.0.3", "127.0.0.4"], binary)
    try:
        fleet = ",".join(a for _, a in services)
        cmd = ["taskset", "-c", CLIENT_CPU, binary, "run", url, "--rps", str(rps), "--duration",
               str(duration), "--remote", fleet, "--remote-start-delay", "500ms",
               "--stats-interval", "250ms", "--output-format", "json", "-v", "error"]
        began = time.monotonic()
        coordinator = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0 + 0.4 * duration)
        services[1][0].kill()
        out, err = coordinator.communicate(timeout=duration + 60)
        took = time.monotonic() - began
    finally:
        for p, _ in services:
            p.kill()
            p.wait()
    result = json.loads(out)
    listed = result["options"].get("generators") or []
    lost_at = next((g.get("lost_at") for g in listed if g.get("state") == "lost"), None)
    recovered = None
    if lost_at is not None:
        for iv in result["shrike"]["intervals"]:
            start, length = seconds(iv["start"]), seconds(iv["duration"])
            n = sum(int(c["value"]) for c in iv["counters"] if c["name"] == "upstream_rq_total")
            if start >= lost_at and length > 0.2 and n / length >= 0.95 * rps:
                recovered = start + length - lost_at
                break
    return lost_at, recovered, requests(result), rps * duration, took


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rps", type=int, default=20000, help="total requests per second")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=60)
    ap.add_argument("--merges", type=int, default=100)
    ap.add_argument("--loss-rps", type=int, default=3000, help="the loss run's total rate")
    ap.add_argument("--baseline", help="an older shrike binary, run side by side")
    args = ap.parse_args()
    builds = [("this build", SHRIKE)] + ([("baseline", args.baseline)] if args.baseline else [])
    tmp = scratch("fleet")
    nginx, url = start_nginx(tmp)
    rows = []
    try:
        base = ["run", url, "--rps", str(args.rps), "--duration", str(args.duration),
                "--output-format", "json", "-v", "error"]
        for build, binary in builds:
            result, cpu = run_client([binary] + base + ["--connections", str(args.connections)])
            rows.append((f"{build}: shrike run (local)", requests(result), cpu))
            for ips in (["127.0.0.2"], ["127.0.0.2", "127.0.0.3", "127.0.0.4"]):
                services = start_services(ips, binary)
                try:
                    fleet = ",".join(a for _, a in services)
                    # Each generator keeps --connections of its own: give the fleet the same total.
                    conns = ["--connections", str(max(1, args.connections // len(ips)))]
                    cmd = [binary] + base + ["--remote", fleet, "--remote-start-delay", "500ms"] + conns
                    result, cpu = run_client(cmd, [p.pid for p, _ in services])
                    rows.append((f"{build}: --remote, {len(ips)} generator(s)", requests(result), cpu))
                    if len(ips) == 3 and binary == SHRIKE:
                        sample_n = requests(result)
                        sample = os.path.join(tmp, "sample.json")
                        with open(sample, "w") as f:
                            json.dump(result, f)
                finally:
                    for p, _ in services:
                        p.kill()
                        p.wait()
        losses = [(build, loss(binary, url, args.loss_rps, args.duration, tmp)) for build, binary in builds]
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
    lines = ["| client | requests | client CPU s | CPU µs/request | vs this build's local |",
             "|---|---:|---:|---:|---:|"]
    for name, n, cpu in rows:
        per = cpu / n * 1e6
        lines.append(f"| {name} | {n} | {cpu:.2f} | {per:.2f} | {per / local_us:.2f}× |")
    one = rows[1][2] / rows[1][1]
    three = rows[2][2] / rows[2][1]
    lines += ["", f"A generator of three SIGKILLed 40% into {args.duration} s at {args.loss_rps} rps:", "",
              "| build | found lost at | rate back at plan after | sent of planned | run took |",
              "|---|---:|---:|---:|---:|"]
    for build, (lost_at, recovered, sent, planned, took) in losses:
        at = "not recorded" if lost_at is None else f"{lost_at:.2f} s"
        back = "never (not re-spread)" if recovered is None else f"{recovered:.2f} s"
        lines.append(f"| {build} | {at} | {back} | {sent} of {planned} ({sent / planned:.1%}) | {took:.1f} s |")
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
