#!/usr/bin/env python3
"""Saturating HTTP/1.1 against nginx: wrk and Shrike's configurations in interleaved rounds.

On these shared VMs one client's CPU per request moves by ±30 % between runs a minute apart
(the host's load, not the client), so a single pair of runs says little. This script runs
every client once per round, in an order that rotates from round to round, and reports per
client the medians of user, system and total CPU per request (getrusage of the client alone,
user and system apart), the median and range of its per-round ratio to wrk, context switches
per request and throughput. Client on CPU 0, nginx (1 worker) on CPU 1.

    cargo build --release && python3 bench/h1_rounds.py [--rounds 11] [--duration 4] \
        [--only 'epoll$'] [--baseline path/to/an/older/shrike]

Results are printed and appended as a dated Markdown table to bench/results/h1-closed-loop.md.
"""
import argparse
import os
import re
import shutil
import statistics
import sys

import compare as C


def run(cmd):
    """Runs cmd pinned to the client CPU; returns (stdout, user s, system s, context switches)."""
    out, user, system, switches = C.rusage_run(cmd)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()[:300]}")
    return out.stdout, user, system, switches


def shrike_count(stdout):
    return C.shrike_answered(stdout)[1]


def clients(url, c, d, baseline=None):
    """(name, command, request counter) for every client; wrk first, as the reference. With
    `baseline` (another build's binary), its default epoll run too, beside this build's."""
    def args(binary):
        return [binary, "run", url, "--rps", "max", "--connections", str(c), "--duration", str(d),
                "--concurrency", "1", "--output-format", "json", "-v", "error"]
    shrike = args(C.SHRIKE)
    before = [("shrike baseline, epoll", args(baseline) + ["--io-backend", "epoll"], shrike_count)]
    return [
        ("wrk -t1", ["wrk", "-t1", f"-c{c}", f"-d{d}s", url], C.wrk_requests),
        *(before if baseline else []),
        ("shrike, epoll", shrike + ["--io-backend", "epoll"], shrike_count),
        ("shrike, epoll, `--read-coalesce 100us`",
         shrike + ["--io-backend", "epoll", "--read-coalesce", "100us"], shrike_count),
        ("shrike, io_uring", shrike + ["--io-backend", "io_uring"], shrike_count),
        ("shrike, io_uring, `--read-coalesce 100us`",
         shrike + ["--io-backend", "io_uring", "--read-coalesce", "100us"], shrike_count),
        ("shrike, io_uring, `--read-coalesce 200us`",
         shrike + ["--io-backend", "io_uring", "--read-coalesce", "200us"], shrike_count),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--no-record", action="store_true", help="do not write bench/results/")
    ap.add_argument("--baseline", help="another build's shrike binary, run beside this one")
    ap.add_argument("--only", help="run only the clients whose name this regex finds (and wrk)")
    a = ap.parse_args()
    try:
        re.compile(a.only or "")
    except re.error as e:
        sys.exit(f"--only {a.only!r} is no regular expression: {e}")
    if a.baseline and not os.access(a.baseline, os.X_OK):
        sys.exit(f"--baseline {a.baseline}: no executable there")
    for tool in ["wrk", "nginx", "taskset"]:
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install wrk nginx-light util-linux")
    tmp = C.scratch("h1-rounds")
    server, url = C.start_nginx(tmp)
    runs = {}  # name -> [(user µs/req, sys µs/req, total µs/req, switches/req, req/s, round)]
    try:
        table = [t for t in clients(url, a.connections, a.duration, a.baseline)
                 if t[0] == "wrk -t1" or not a.only or re.search(a.only, t[0])]
        for r in range(a.rounds):
            # Rotating the order keeps a client from always following the same neighbour.
            k = r % len(table)
            for name, cmd, count in table[k:] + table[:k]:
                stdout, user, system, switches = run(cmd)
                n = max(count(stdout), 1)
                row = (user / n * 1e6, system / n * 1e6, (user + system) / n * 1e6,
                       switches / n, n / a.duration, r)
                runs.setdefault(name, []).append(row)
                print(f"round {r:2d}  {name:42} {n:8d} req  user {row[0]:5.2f}  sys {row[1]:5.2f}"
                      f"  total {row[2]:5.2f} µs/req", flush=True)
    finally:
        server.terminate()
        server.wait()

    wrk = {row[5]: row for row in runs["wrk -t1"]}
    med = statistics.median
    lines = ["| client | user µs/req | user vs wrk (range of rounds) | system µs/req | CPU µs/req "
             "| CPU vs wrk (range of rounds) | context switches/req | req/s |",
             "|---|---:|---|---:|---:|---|---:|---:|"]

    def ratio(rows, k):
        r = [row[k] / wrk[row[5]][k] for row in rows]
        return f"{med(r):.2f}× ({min(r):.2f}–{max(r):.2f})"
    for name, _, _ in table:
        rows = runs[name]
        lines.append(f"| {name} | {med(x[0] for x in rows):.2f} | {ratio(rows, 0)} | "
                     f"{med(x[1] for x in rows):.2f} | {med(x[2] for x in rows):.2f} | "
                     f"{ratio(rows, 2)} | {med(x[3] for x in rows):.3f} | "
                     f"{med(x[4] for x in rows):,.0f} |")
    text = (f"{C.heading()}\n\n`bench/h1_rounds.py`: saturating HTTP/1.1 against nginx (1 worker) "
            f"on CPU {C.SERVER_CPU}, client on CPU {C.CLIENT_CPU}, {a.connections} connections, "
            f"{a.rounds} interleaved rounds of {a.duration} s runs (the order rotates each round). "
            f"Medians over the rounds; each round's ratio is against wrk's run in the same round"
            + (f"; the baseline is `{a.baseline}`" if a.baseline else "") + ".\n\n"
            + "\n".join(lines) + "\n")
    C.record("h1-closed-loop.md", text, enabled=not a.no_record)


if __name__ == "__main__":
    main()
