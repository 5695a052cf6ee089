#!/usr/bin/env python3
"""Does `shrike capacity` give the same answer twice? Twenty searches against `shrike serve`'s
linear delay model, whose boundary is known analytically, first on a quiet machine, then with
a CPU hog on the server's core.

The model: each response is delayed by m + n·f with n requests in flight. An open loop at λ/s
holds n = λ·d in flight (Little's law), so d = m / (1 − λ·f), and d ≤ L holds up to
λ* = (1 − m/L) / f. With m = 10 ms, f = 2 ms and the objective p99 ≤ 40 ms, λ* = 375/s.

Goals (issue 35): quiet, every answer within ±10 % of 375/s; hogged, max/min of the answers
at most 1.3, and a search that could not settle says so (NOT SETTLED) instead of answering.
`--batches quiet,server,client,both` also runs batches with the busy loop on the client's CPU,
and with one on each CPU.
Every answer is printed and appended, dated, to bench/results/capacity-noise.md.

    cargo build --release && python3 bench/capacity_noise.py [--searches 20]
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
from compare import CLIENT_CPU, ROOT, SERVER_CPU, SHRIKE  # noqa: E402

M, F, L = 0.010, 0.002, 0.040
BOUNDARY = (1 - M / L) / F
CONFIG = ('x-nighthawk-test-server-config: {"concurrency_based_linear_delay": '
          f'{{"minimal_delay": "{M}s", "concurrency_delay_factor": "{F}s"}}}}')


def start_server():
    p = subprocess.Popen(["taskset", "-c", SERVER_CPU, SHRIKE, "serve", "--listen", "127.0.0.1:0",
                          "--concurrency", "1"], stdout=subprocess.PIPE, text=True)
    addr = p.stdout.readline().strip()
    return p, f"http://{addr}/"


def search(url, trial, final):
    t0 = time.time()
    out = subprocess.run(
        ["taskset", "-c", CLIENT_CPU, SHRIKE, "capacity", url, "--slo", f"p99<={int(L * 1000)}ms",
         "-H", CONFIG, "--start", "50", "--trial-duration", trial, "--final-duration", final,
         "--connections", "50", "--output-format", "json", "-v", "warn"],
        capture_output=True, text=True, check=False)
    took = time.time() - t0
    if out.returncode not in (0, 1):
        sys.exit(f"shrike capacity failed ({out.returncode}):\n{out.stderr}")
    doc = json.loads(out.stdout)
    goal = doc["capacity"]["goals"][0]
    trials = len(doc["capacity"]["trials"])
    return goal, trials, took


def run_batch(name, url, n, trial, final):
    rows = []
    for i in range(n):
        goal, trials, took = search(url, trial, final)
        answer = goal["max"] if goal["status"] == "found" else None
        rows.append((goal["status"], answer, goal["max"], goal["failed_at"], trials, took))
        shown = f"{answer:.0f}/s" if answer else f"{goal['status']} ({goal['summary']})"
        print(f"{name} {i + 1:2}: {shown}, {trials} trials, {took:.1f} s", flush=True)
    return rows


def summarize(name, rows):
    answers = [r[1] for r in rows if r[1] is not None]
    unsettled = [r for r in rows if r[1] is None]
    within = [a for a in answers if abs(a - BOUNDARY) <= 0.1 * BOUNDARY]
    spread = max(answers) / min(answers) if answers else float("nan")
    line = (f"{name}: {len(answers)} answers, {len(unsettled)} said they could not settle; "
            f"{len(within)}/{len(answers)} within ±10 % of {BOUNDARY:.0f}/s; "
            f"min {min(answers, default=0):.0f}, max {max(answers, default=0):.0f}, "
            f"max/min {spread:.2f}; mean trials {sum(r[4] for r in rows) / len(rows):.1f}, "
            f"mean {sum(r[5] for r in rows) / len(rows):.1f} s a search")
    print(line)
    return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--searches", type=int, default=20)
    ap.add_argument("--trial-duration", default="1s")
    ap.add_argument("--final-duration", default="2s")
    ap.add_argument("--batches", default="quiet,server",
                    help="which of quiet, server (a busy loop on the server's CPU), client (on "
                         "the client's CPU), both (one on each) to run")
    args = ap.parse_args()
    if not shutil.which("taskset"):
        sys.exit("taskset not found: apt-get install util-linux")
    if not os.path.exists(SHRIKE):
        sys.exit("build first: cargo build --release")
    server, url = start_server()
    batches = []
    try:
        for batch in args.batches.split(","):
            cpus = {"quiet": [], "server": [SERVER_CPU], "client": [CLIENT_CPU],
                    "both": [SERVER_CPU, CLIENT_CPU]}[batch]
            name = {"quiet": "quiet", "both": "hog on both CPUs"}.get(
                batch, f"hog on the {batch}'s CPU")
            # A busy loop on a CPU: the host noise the issue saw.
            hogs = [subprocess.Popen(["taskset", "-c", c, sys.executable, "-c",
                                      "while True: pass"]) for c in cpus]
            try:
                batches.append((name, run_batch(name, url, args.searches, args.trial_duration,
                                                args.final_duration)))
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
    finally:
        server.kill()
        server.wait()
    lines = [summarize(name, rows) for name, rows in batches]
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    out = os.path.join(ROOT, "bench", "results", "capacity-noise.md")
    with open(out, "a") as f:
        f.write(f"\n## {datetime.date.today()} — {os.cpu_count()} CPUs ({cpu}), "
                f"Linux {platform.release()}\n\n")
        f.write(f"Binary: `{SHRIKE}`.\n\n")
        f.write(f"Boundary {BOUNDARY:.0f}/s (m {M * 1e3:.0f} ms, f {F * 1e3:.0f} ms, p99 ≤ "
                f"{L * 1e3:.0f} ms); trials {args.trial_duration}, confirmations "
                f"{args.final_duration}; server pinned to CPU {SERVER_CPU}, client to CPU "
                f"{CLIENT_CPU}; hog: a busy loop on one CPU.\n\n")
        for line in lines:
            f.write(f"- {line}\n")
        f.write("\n| batch | # | status | answer | highest pass | lowest fail | trials | seconds |\n")
        f.write("|---|---:|---|---:|---:|---:|---:|---:|\n")
        for name, rows in batches:
            for i, r in enumerate(rows):
                fmt = lambda v: "–" if v is None else f"{v:.0f}"
                f.write(f"| {name} | {i + 1} | {r[0]} | {fmt(r[1])} | {fmt(r[2])} | {fmt(r[3])} "
                        f"| {r[4]} | {r[5]:.1f} |\n")
    print(f"appended to {out}")


if __name__ == "__main__":
    main()
