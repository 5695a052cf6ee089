#!/usr/bin/env python3
"""What does a precise paced release cost on this machine, and does a client that does not
wake up for responses cost less? `reap-probe` (bench/reap-probe: the smallest open-loop
HTTP/1.1 loop over epoll and a timerfd, not a client) measures both:

- the floor: a thread that only sleeps on a timerfd from one period to the next (200 and
  50 µs, the release periods of one worker at 5k and 20k rps), one-shot and periodic: the CPU
  of one wake-up, which no precise pacer that sleeps between releases can avoid;
- paced at 1k, 5k and 20k rps over 20 connections against nginx, two ways: `wake` (every
  response wakes the thread, as in Shrike) and `reap` (SO_RCVLOWAT keeps responses from waking
  it; they are read at the next release and timed by the kernel's receive timestamp), beside
  `shrike run` (default `poll` strategy) and fortio, two rounds. It prints client CPU per
  request, context switches per request, send lateness and request-to-response latency.

    cargo build --release && python3 bench/reap_probe.py [--duration 4] [--no-record]
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CLIENT_CPU, ROOT, SHRIKE, heading, record, scratch  # noqa: E402
from compare import build_probe, start_nginx  # noqa: E402
from pacing import fortio as fortio_client, shrike as shrike_client  # noqa: E402
from peers import peer  # noqa: E402

CONNECTIONS = 20
PROBE = os.path.join(ROOT, "target", "reap-probe", "release", "reap-probe")



def probe(args):
    """Runs the probe pinned to the client CPU; returns its key/value output."""
    out = subprocess.run(["taskset", "-c", CLIENT_CPU, PROBE] + args, capture_output=True,
                         text=True)
    if out.returncode != 0:
        sys.exit(f"reap-probe failed: {out.stdout} {out.stderr}")
    return [dict(zip(l.split()[::2], l.split()[1::2])) for l in out.stdout.splitlines()]


def probe_client(mode):
    def run(url, rate, d):
        hostport = url.split("//")[1].split("/")[0]
        v = probe([hostport, "/file", str(CONNECTIONS), str(d), str(rate), mode, "1000",
                   "10"])[0]
        n = int(v["responses"])
        return n, float(v["cpu"]), int(v["csw"]), (float(v["late_p50_us"]),
                                                    float(v["late_p99_us"]),
                                                    float(v["latency_p50_us"]))
    return run


def with_switches(run):
    """A Shrike or peer client from bench/pacing.py, plus its context switches."""
    def wrapped(url, rate, d):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        n, cpu, late = run(url, rate, d)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cs = (after.ru_nvcsw + after.ru_nivcsw) - (before.ru_nvcsw + before.ru_nivcsw)
        return n, cpu, cs, late and (late[0], late[1], None)
    return wrapped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    build_probe("reap-probe")
    floor = []
    for period in (200, 50):
        for v in probe(["wake-cost", str(period), "2"]):
            floor.append(f"| {period} | {v['wake_cost']} | {float(v['cpu_us_per_wake']):.2f} | "
                         f"{v['late_p50_us']} / {v['late_p99_us']} |")
    clients = [("shrike (poll)", with_switches(shrike_client(SHRIKE, "poll"))),
               ("reap-probe wake", probe_client("wake")),
               ("reap-probe reap", probe_client("reap"))]
    path = peer("fortio")
    if path:
        clients.append(("fortio", with_switches(fortio_client(path))))
    tmp = scratch("reap-probe")
    server, url = start_nginx(tmp)
    rows = []
    try:
        for _ in range(2):
            for rate in (1000, 5000, 20000):
                for name, run in clients:
                    n, cpu, cs, late = run(url, rate, a.duration)
                    rows.append((rate, name, n, cpu / max(n, 1) * 1e6, cs / max(n, 1), late))
                    print(f"{rate:6} {name:18} {rows[-1][3]:7.2f} µs/req {rows[-1][4]:.2f} cs/req"
                          f" {late}", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    lines = ["| rps | client | requests | client CPU µs/req | vs fortio (same round) | "
             "context switches/req | lateness p50 / p99 µs | request→response p50 µs |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: r[0]):
        same = [x for x in rows if x[0] == r[0] and x[1] == "fortio"
                and rows.index(x) // len(clients) == rows.index(r) // len(clients)]
        ratio = f"{r[3] / same[0][3]:.2f}×" if same else "—"
        late = f"{r[5][0]:.1f} / {r[5][1]:.1f}" if r[5] else "—"
        resp = f"{r[5][2]:.1f}" if r[5] and r[5][2] is not None else "—"
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2f} | {ratio} | {r[4]:.2f} | {late} "
                     f"| {resp} |")
    text = (f"{heading()}\n\nThe floor: a thread sleeping on a timerfd from one period to the "
            f"next, 2 s, on the client CPU.\n\n| period µs | timer | CPU µs per wake-up | "
            f"wake-up lateness p50 / p99 µs |\n|---:|---|---:|---:|\n" + "\n".join(floor)
            + f"\n\nPaced, {CONNECTIONS} connections, {a.duration}s per run, two rounds, "
            f"against nginx (1 worker) on CPU 1, client on CPU 0:\n\n" + "\n".join(lines)
            + "\n")
    record("reap-probe.md", text, not a.no_record)


if __name__ == "__main__":
    main()
