#!/usr/bin/env python3
"""What Nighthawk's API and tracing cost, side by side in one run on this machine's loopback:

- client CPU per request of `shrike run` alone, and of `shrike run --nighthawk-service` (the
  client plus the service that runs the test and answers with Nighthawk's Output);
- client CPU per request with `--trace` at sample rates 0.01 and 1 (every request carries B3
  headers and becomes a Zipkin span posted to a collector in this script, whose own CPU is not
  counted: it stands in for Zipkin on another machine), and the spans the collector received.

Every client process is pinned to CPU 0 and nginx to CPU 1; CPU is the processes' own
(utime + stime).

    cargo build --release && python3 bench/nighthawk.py [--rps 20000] [--duration 10]

Results are printed and appended as a dated Markdown table to bench/results/nighthawk.md.
"""
import argparse
import datetime
import http.server
import json
import os
import platform
import shutil
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ROOT, SHRIKE, scratch, start_nginx  # noqa: E402
from fleet import requests, run_client, start_services  # noqa: E402


class Collector(http.server.BaseHTTPRequestHandler):
    spans = 0
    posts = 0

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        Collector.spans += len(json.loads(body))
        Collector.posts += 1
        self.send_response(202)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rps", type=int, default=20000)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=60)
    args = ap.parse_args()
    tmp = scratch("nighthawk")
    nginx, url = start_nginx(tmp)
    collector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    zipkin = f"zipkin://127.0.0.1:{collector.server_address[1]}/api/v2/spans"
    rows = []
    try:
        base = [SHRIKE, "run", url, "--rps", str(args.rps), "--duration", str(args.duration),
                "--connections", str(args.connections), "--output-format", "json", "-v", "error"]
        result, cpu = run_client(base)
        rows.append(("shrike run (local)", requests(result), cpu, ""))
        services = start_services(["127.0.0.1"])
        try:
            (service, addr), = services
            result, cpu = run_client(base + ["--nighthawk-service", f"grpc://{addr}"], [service.pid])
            rows.append(("--nighthawk-service (client + service)", requests(result), cpu, ""))
        finally:
            for p, _ in services:
                p.kill()
                p.wait()
        for rate in ("0.01", "1"):
            Collector.spans = Collector.posts = 0
            result, cpu = run_client(base + ["--trace", zipkin, "--trace-sample-rate", rate])
            n = requests(result)
            note = f"{Collector.spans} spans in {Collector.posts} posts ({Collector.spans / n:.3f} of requests)"
            rows.append((f"--trace, sample rate {rate}", n, cpu, note))
    finally:
        collector.shutdown()
        nginx.kill()
        nginx.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    local_us = rows[0][2] / rows[0][1] * 1e6
    lines = ["| client | requests | client CPU s | CPU µs/request | vs local | spans |",
             "|---|---:|---:|---:|---:|---|"]
    for name, n, cpu, note in rows:
        per = cpu / n * 1e6
        lines.append(f"| {name} | {n} | {cpu:.2f} | {per:.2f} | {per / local_us:.2f}× | {note} |")
    text = "\n".join(lines) + "\n"
    print(text)
    stamp = datetime.date.today().isoformat()
    head = (f"\n## {stamp}: {args.rps} rps for {args.duration}s, {args.connections} connections, "
            f"nginx on CPU 1, client processes on CPU 0 ({platform.node()}, {os.cpu_count()} cores)\n\n")
    with open(os.path.join(ROOT, "bench", "results", "nighthawk.md"), "a") as f:
        f.write(head + text)


if __name__ == "__main__":
    main()
