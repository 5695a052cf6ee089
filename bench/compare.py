#!/usr/bin/env python3
"""Shrike vs its peers, side by side in one run, on this machine's loopback.

Runs wrk, ab and `shrike run` (closed loop, saturating) against nginx and against Shrike's own
test server, each client pinned to one CPU and each server to the other, and prints throughput
and client CPU per request with ratios against wrk. Client CPU comes from getrusage of the
client process alone, so it is independent of how busy the server is.

    cargo build --release && python3 bench/compare.py [--duration 10] [--connections 50]

Results are printed and appended as a dated Markdown table to bench/results/.
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# SHRIKE_BIN picks another build (bench/pgo.sh's, an older commit's) for every run.
SHRIKE = os.environ.get("SHRIKE_BIN") or os.path.join(ROOT, "target", "release", "shrike")
BODY = 100  # bytes per response body, for both servers
CLIENT_CPU, SERVER_CPU = "0", "1"


def scratch(name):
    """A temp dir for one bench run; exits first when the release binary is missing."""
    if not os.path.exists(SHRIKE):
        sys.exit("build first: cargo build --release")
    return tempfile.mkdtemp(prefix=f"shrike-bench-{name}-")


def build_probe(name):
    """Builds bench/NAME (a probe crate outside the workspace) into target/NAME; returns the
    binary's path."""
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(ROOT, "target", name))
    subprocess.run(["cargo", "build", "--release", "-q"], cwd=os.path.join(ROOT, "bench", name),
                   env=env, check=True)
    return os.path.join(ROOT, "target", name, "release", name)


def heading():
    """A results section's first line: the date and the machine."""
    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                      if l.startswith("model name")), "unknown CPU")
    return (f"## {datetime.date.today().isoformat()} — {os.cpu_count()} vCPU {cpu_model}, "
            f"Linux {platform.release()}")


def record(name, text, enabled=True):
    """Prints a results section and appends it to bench/results/NAME."""
    print(text)
    if enabled:
        with open(os.path.join(ROOT, "bench", "results", name), "a") as f:
            f.write(text + "\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"server on port {port} did not come up")


def write_nginx_conf(tmp, port, name, connections=4096):
    """A 1-worker nginx serving BODY bytes at /NAME from TMP; returns the config's path."""
    html = os.path.join(tmp, "html")
    os.makedirs(html, exist_ok=True)
    os.makedirs(os.path.join(tmp, "logs"), exist_ok=True)
    with open(os.path.join(html, name), "wb") as f:
        f.write(b"a" * BODY)
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1;
pid {tmp}/nginx.pid; error_log {tmp}/logs/error.log;
worker_rlimit_nofile {connections + 100};
events {{ worker_connections {connections}; }}
http {{ access_log off; keepalive_requests 10000000;
  client_body_temp_path {tmp}/t; proxy_temp_path {tmp}/t; fastcgi_temp_path {tmp}/t;
  uwsgi_temp_path {tmp}/t; scgi_temp_path {tmp}/t;
  server {{ listen 127.0.0.1:{port}; root {html}; }} }}
""")
    return conf


def start_nginx(tmp, connections=4096):
    port = free_port()
    conf = write_nginx_conf(tmp, port, "file", connections)
    p = subprocess.Popen(["taskset", "-c", SERVER_CPU, "nginx", "-p", tmp, "-c", conf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return p, f"http://127.0.0.1:{port}/file"


def start_shrike_server():
    p = subprocess.Popen(["taskset", "-c", SERVER_CPU, SHRIKE, "serve", "--listen", "127.0.0.1:0",
                          "--concurrency", "1", "--response-body-size", str(BODY)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    addr = p.stdout.readline().strip()
    return p, f"http://{addr}/"


def rusage_run(cmd, **kw):
    """Runs cmd pinned to the client CPU (extra subprocess.run arguments in kw, text by
    default); returns (the completed process, user s, system s, context switches) of the
    client alone."""
    kw.setdefault("text", True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(["taskset", "-c", CLIENT_CPU] + cmd, capture_output=True, **kw)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    switches = (after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw)
    return (out, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime,
            switches)


def timed_run(cmd, **kw):
    """Runs cmd pinned to the client CPU (extra subprocess.run arguments in kw, text by
    default); returns (the completed process, cpu seconds of the client)."""
    out, user, system, _ = rusage_run(cmd, **kw)
    if out.returncode != 0:
        err = out.stderr if isinstance(out.stderr, str) else out.stderr.decode(errors="replace")
        print(f"warning: {' '.join(cmd)} exited {out.returncode}: {err.strip()[:300]}",
              file=sys.stderr)
    return out, user + system


def timed(cmd):
    """Runs cmd pinned to the client CPU; returns (stdout, cpu seconds of the client)."""
    out, cpu = timed_run(cmd)
    return out.stdout, cpu


def wrk_requests(stdout):
    """The requests wrk's report says it completed."""
    return int(re.search(r"(\d+) requests in", stdout).group(1))


def shrike_answered(stdout):
    """`shrike run --output-format json`'s global result and its answered requests (every
    `benchmark.http_*` counter)."""
    g = next(r for r in json.loads(stdout)["results"] if r["name"] == "global")
    return g, sum(int(x["value"]) for x in g["counters"]
                  if x["name"].startswith("benchmark.http_"))


def run_wrk(url, c, d):
    out, cpu = timed(["wrk", "-t1", f"-c{c}", f"-d{d}s", url])
    n = wrk_requests(out)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return n, rps, cpu


def run_ab(url, c, d):
    out, cpu = timed(["ab", "-q", "-k", "-c", str(c), "-t", str(d), "-n", "100000000", url])
    n = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))
    rps = float(re.search(r"Requests per second:\s+([\d.]+)", out).group(1))
    return n, rps, cpu


def run_shrike(url, c, d, rps="1000000", binary=SHRIKE, extra=()):
    out, cpu = timed([binary, "run", url, "--rps", rps, "--connections", str(c),
                      "--duration", str(d), "--concurrency", "1", "--output-format", "json",
                      "-v", "error", *extra])
    g, n = shrike_answered(out)
    dur = float(g["execution_duration"].rstrip("s"))
    return n, n / dur, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--no-record", action="store_true", help="do not write bench/results/")
    ap.add_argument("--before", metavar="BINARY",
                    help="also run this (older) shrike binary, as 'shrike before', for a "
                         "before/after comparison in the same run")
    a = ap.parse_args()
    for tool in ["wrk", "ab", "nginx", "taskset"]:
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install wrk apache2-utils nginx-light util-linux")
    if not os.path.exists(SHRIKE):
        sys.exit("build first: cargo build --release")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for target, starter in [("nginx", lambda: start_nginx(tmp)),
                                ("shrike serve", start_shrike_server)]:
            server, url = starter()
            try:
                time.sleep(0.5)
                uring = ["--io-backend", "io_uring"]
                coalesce = ["--read-coalesce", "50us", "--io-backend", "epoll"]
                ring_coalesce = lambda w: ["--read-coalesce", w, "--io-backend", "io_uring"]
                clients = [("wrk", run_wrk), ("ab -k", run_ab), ("shrike", run_shrike),
                           ("shrike max", lambda u, c, d: run_shrike(u, c, d, rps="max")),
                           ("shrike io_uring", lambda u, c, d: run_shrike(u, c, d, extra=uring)),
                           ("shrike max io_uring",
                            lambda u, c, d: run_shrike(u, c, d, rps="max", extra=uring)),
                           ("shrike max coalesce 50us",
                            lambda u, c, d: run_shrike(u, c, d, rps="max", extra=coalesce)),
                           ("shrike max io_uring coalesce 50us",
                            lambda u, c, d: run_shrike(u, c, d, rps="max", extra=ring_coalesce("50us"))),
                           ("shrike max io_uring coalesce 100us",
                            lambda u, c, d: run_shrike(u, c, d, rps="max", extra=ring_coalesce("100us")))]
                if a.before:
                    # Interleaved with the current binary, so drift hits both alike.
                    clients += [("shrike before", lambda u, c, d: run_shrike(u, c, d, binary=a.before)),
                                ("shrike", run_shrike),
                                ("shrike before", lambda u, c, d: run_shrike(u, c, d, binary=a.before))]
                for name, fn in clients:
                    n, rps, cpu = fn(url, a.connections, a.duration)
                    rows.append((target, name, n, rps, cpu, cpu / max(n, 1) * 1e6))
                    print(f"{target:13} {name:19} {n:9d} req {rps:10.0f} rps  "
                          f"client cpu {cpu:6.2f}s  {rows[-1][5]:6.2f} us/req", flush=True)
            finally:
                server.terminate()
                server.wait()

    lines = [f"| target | client | requests | req/s | client CPU µs/req | CPU/req vs wrk | req/s vs wrk |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for target in ["nginx", "shrike serve"]:
        base = next(r for r in rows if r[0] == target and r[1] == "wrk")
        for r in (r for r in rows if r[0] == target):
            lines.append(f"| {target} | {r[1]} | {r[2]} | {r[3]:.0f} | {r[5]:.2f} | "
                         f"{r[5] / base[5]:.2f}× | {r[3] / base[3]:.2f}× |")
        if a.before:
            now = [r[5] for r in rows if r[0] == target and r[1] == "shrike"]
            old = [r[5] for r in rows if r[0] == target and r[1] == "shrike before"]
            lines.append(f"| {target} | **after / before** (mean of {len(now)} vs {len(old)}) | | | "
                         f"{sum(now) / len(now):.2f} vs {sum(old) / len(old):.2f} | "
                         f"**{(sum(now) / len(now)) / (sum(old) / len(old)):.3f}×** | |")
    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                      if l.startswith("model name")), "unknown CPU")
    header = (f"## {datetime.date.today().isoformat()} — {os.cpu_count()} vCPU {cpu_model}, "
              f"Linux {platform.release()}\n\nClosed loop, {a.connections} connections, "
              f"{a.duration}s per run, {BODY}-byte bodies; client pinned to CPU {CLIENT_CPU}, "
              f"server to CPU {SERVER_CPU}. shrike: `--rps 1000000 --concurrency 1` "
              f"(saturating closed loop); shrike max: `--rps max` (unpaced closed loop); "
              f"io_uring: `--io-backend io_uring`; coalesce 50us: `--rps max --read-coalesce 50us` (on epoll "
              f"unless it says io_uring).\n")
    table = header + "\n" + "\n".join(lines) + "\n"
    print("\n" + table)
    if not a.no_record:
        path = os.path.join(ROOT, "bench", "results", "h1-closed-loop.md")
        with open(path, "a") as f:
            f.write(table + "\n")
        print(f"appended to {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
