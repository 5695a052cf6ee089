#!/usr/bin/env python3
"""Flame graphs of the client's CPU, kernel included: `perf record -g` of `shrike run` against
nginx (client on CPU 0, nginx on CPU 1), folded with inferno (installed on first use by
peers.py) into docs/flame-WORKLOAD.svg. Needs root (or perf_event_paranoid ≤ 1) for kernel
stacks. The workloads are the ones the benchmarks compare:

- paced: 5k rps over 20 connections, the default idle strategy;
- saturating: `--rps max` over 64 connections;
- h2c: `--protocol http2 --rps max`, 10 connections × 10 streams.

    cargo build --release && python3 bench/flame.py [--workloads paced,saturating,h2c]
        [--duration 4]
"""
import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h2_tls  # noqa: E402
from compare import CLIENT_CPU, ROOT, SHRIKE, scratch, start_nginx  # noqa: E402
from peers import peer  # noqa: E402

WORKLOADS = {
    "paced": (False, ["--rps", "5000", "--connections", "20"]),
    "saturating": (False, ["--rps", "max", "--connections", "64"]),
    "h2c": (True, ["--protocol", "http2", "--rps", "max", "--connections", "10",
                   "--max-concurrent-streams", "10", "--max-active-requests", "100"]),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--duration", type=int, default=4)
    a = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("perf not found (apt-get install linux-perf)")
    collapse, flame = peer("inferno-collapse-perf"), peer("inferno-flamegraph")
    if not collapse or not flame:
        sys.exit("inferno could not be installed")
    tmp = scratch("flame")
    try:
        for name in filter(None, a.workloads.split(",")):
            h2, args = WORKLOADS[name]
            server, url = h2_tls.start_nginx(tmp, False) if h2 else start_nginx(tmp)
            data = os.path.join(tmp, f"{name}.data")
            try:
                subprocess.run(["perf", "record", "-F", "2999", "-g", "-o", data, "--",
                                "taskset", "-c", CLIENT_CPU, SHRIKE, "run", url, *args,
                                "--duration", str(a.duration), "-v", "error",
                                "--output-format", "json"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            finally:
                server.terminate()
                server.wait()
            script = subprocess.run(["perf", "script", "-i", data], capture_output=True,
                                    check=True)
            folded = subprocess.run([collapse], input=script.stdout, capture_output=True,
                                    check=True)
            title = f"shrike run, {name}: client CPU against nginx ({' '.join(args)})"
            svg = subprocess.run([flame, "--title", title, "--width", "1400"],
                                 input=folded.stdout, capture_output=True, check=True)
            out = os.path.join(ROOT, "docs", f"flame-{name}.svg")
            with open(out, "wb") as f:
                f.write(svg.stdout)
            print(f"{out}: {len(folded.stdout.splitlines())} stacks", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
