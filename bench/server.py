#!/usr/bin/env python3
"""Test servers side by side: `shrike serve`, h2o and nginx, each on one core, loaded by h2load.

Every server is pinned to CPU 1 with one worker thread (`shrike serve --concurrency 1`, h2o
`num-threads: 1`, nginx `worker_processes 1`) and serves a 64-byte body (Shrike's filler, a
64-byte static file for h2o and nginx); h2load runs on CPU 0. Three loads:

- h1:  `h2load --h1 -c64 -m1` (HTTP/1.1 keep-alive, 64 connections)
- h2c: `h2load -c10 -m10` (HTTP/2 with prior knowledge, 10 connections x 10 streams)
- h2:  `h2load -c10 -m10` over TLS (ALPN h2, the same self-signed certificate for all three)

h2load on one core cannot saturate the fastest servers (it decodes every response), so a
server's own CPU is read from /proc over each run, and the figure compared is requests per
second of server CPU ("per core"), beside plain requests per second.

Rounds are interleaved (every server and load once per round, the order rotating) because
these VMs drift by ±30 % over minutes; each round's ratio to h2o (and to nginx) is taken from
runs seconds apart, and the medians and ranges of those ratios are printed. `--before BINARY`
adds an older Shrike build as a fourth server. Installs h2o with apt when it is missing.

    cargo build --release && python3 bench/server.py [--rounds 5] [--duration 5]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import (CLIENT_CPU, SERVER_CPU, SHRIKE, free_port, heading,  # noqa: E402
                     record, scratch, wait_port)

BODY = 64
LOADS = {
    "h1": ["--h1", "-c64", "-m1"],
    "h2c": ["-c10", "-m10"],
    "h2": ["-c10", "-m10"],
}


def ensure_h2o():
    if shutil.which("h2o"):
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "h2o"], env=env,
                   check=True, stdout=subprocess.DEVNULL)


def make_cert(tmp):
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return cert, key


def html_dir(tmp):
    html = os.path.join(tmp, "html")
    os.makedirs(html, exist_ok=True)
    with open(os.path.join(html, "file"), "wb") as f:
        f.write(b"a" * BODY)
    return html


def pinned(cmd):
    return ["taskset", "-c", SERVER_CPU] + cmd


def start_shrike(binary, tmp, tls):
    port = free_port()
    cmd = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--concurrency", "1",
           "--response-body-size", str(BODY)]
    if tls:
        cmd += ["--tls-cert", os.path.join(tmp, "cert.pem"), "--tls-key",
                os.path.join(tmp, "key.pem")]
    p = subprocess.Popen(pinned(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return p, ports(port, tls)


def ports(port, tls):
    """The loads one port serves: HTTP/1.1 and h2c in plaintext, h2 over TLS."""
    return {"h2": port} if tls else {"h1": port, "h2c": port}


def start_h2o(tmp, tls):
    port = free_port()
    ssl = ""
    if tls:
        ssl = (f"\n    ssl:\n      certificate-file: {tmp}/cert.pem\n"
               f"      key-file: {tmp}/key.pem")
    conf = os.path.join(tmp, f"h2o-{port}.conf")
    with open(conf, "w") as f:
        # h2o started as root drops to `nobody`, who cannot write the pid file here.
        f.write(f"""num-threads: 1
user: root
pid-file: {tmp}/h2o-{port}.pid
error-log: {tmp}/h2o-{port}.log
http2-max-concurrent-requests-per-connection: 1000
listen:
    host: 127.0.0.1
    port: {port}{ssl}
hosts:
  default:
    paths:
      /:
        file.dir: {html_dir(tmp)}
""")
    p = subprocess.Popen(pinned(["h2o", "-c", conf]), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    wait_port(port)
    return p, ports(port, tls)


def start_nginx(tmp, tls):
    port = free_port()
    os.makedirs(os.path.join(tmp, "logs"), exist_ok=True)
    if tls:
        listen = (f"listen 127.0.0.1:{port} ssl http2; ssl_certificate {tmp}/cert.pem; "
                  f"ssl_certificate_key {tmp}/key.pem;")
    else:
        # nginx 1.22 speaks only HTTP/2 on an `http2` port, so HTTP/1.1 gets a port of its own.
        h1_port = free_port()
        listen = f"listen 127.0.0.1:{port} http2; listen 127.0.0.1:{h1_port};"
    conf = os.path.join(tmp, f"nginx-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1;
pid {tmp}/nginx-{port}.pid; error_log {tmp}/logs/error-{port}.log;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 10000000; http2_max_concurrent_streams 1000;
  client_body_temp_path {tmp}/t; proxy_temp_path {tmp}/t; fastcgi_temp_path {tmp}/t;
  uwsgi_temp_path {tmp}/t; scgi_temp_path {tmp}/t;
  server {{ {listen} root {html_dir(tmp)}; }} }}
""")
    p = subprocess.Popen(pinned(["nginx", "-p", tmp, "-c", conf]), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    wait_port(port)
    if tls:
        return p, {"h2": port}
    wait_port(h1_port)
    return p, {"h1": h1_port, "h2c": port}


def cpu_seconds(pid):
    """User plus system time of process `pid` and all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def h2load(url, load, duration, server_pid):
    """(requests per second, requests per second of the server's CPU)."""
    cmd = ["taskset", "-c", CLIENT_CPU, "h2load", "-D", str(duration)] + LOADS[load] + [url]
    before = cpu_seconds(server_pid)
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    used = cpu_seconds(server_pid) - before
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    if not m or not done or done.group(1) != done.group(2):
        sys.exit(f"h2load failed against {url}:\n{out}")
    return float(m.group(1)), int(done.group(1)) / max(used, 0.01)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5, help="seconds per h2load run")
    ap.add_argument("--before", help="an older shrike binary to add as a server")
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()
    ensure_h2o()
    tmp = scratch("server")
    make_cert(tmp)
    servers = {"shrike": lambda tls: start_shrike(SHRIKE, tmp, tls),
               "h2o": lambda tls: start_h2o(tmp, tls),
               "nginx": lambda tls: start_nginx(tmp, tls)}
    if args.before:
        servers["before"] = lambda tls: start_shrike(args.before, tmp, tls)
    procs, urls = [], {}
    try:
        for name, start in servers.items():
            for tls in (False, True):
                p, by_load = start(tls)
                procs.append(p)
                for load, port in by_load.items():
                    scheme, host = ("https", "localhost") if tls else ("http", "127.0.0.1")
                    urls[(name, load)] = (f"{scheme}://{host}:{port}/file", p.pid)
        results = {key: [] for key in urls}
        order = list(servers)
        for r in range(args.rounds):
            rotated = order[r % len(order):] + order[:r % len(order)]
            for load in LOADS:
                for name in rotated:
                    url, pid = urls[(name, load)]
                    rps, per_core = h2load(url, load, args.duration, pid)
                    results[(name, load)].append((rps, per_core))
                    print(f"round {r + 1} {load:4} {name:7} {rps:>10,.0f} req/s "
                          f"{per_core:>10,.0f} per core", flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    lines = [heading(), "",
             f"`bench/server.py --rounds {args.rounds} --duration {args.duration}`: each server "
             f"on CPU 1 with one worker thread, h2load on CPU 0, {BODY}-byte bodies. Medians "
             "(range) of req/s and of req per second of server CPU (per core), and the median "
             "(range) of each round's per-core ratio to h2o and nginx.", "",
             "| load | server | req/s | per core | per core vs h2o | per core vs nginx |",
             "|---|---|---|---|---|---|"]

    def spread(values, fmt):
        return (f"{fmt.format(statistics.median(values))} "
                f"({fmt.format(min(values))}-{fmt.format(max(values))})")

    for load in LOADS:
        for name in servers:
            runs = results[(name, load)]
            row = (f"| {load} | {name} | {spread([r for r, _ in runs], '{:,.0f}')} | "
                   f"{spread([c for _, c in runs], '{:,.0f}')} |")
            for peer in ("h2o", "nginx"):
                ratios = [a[1] / b[1] for a, b in zip(runs, results[(peer, load)])]
                row += f" {spread(ratios, '{:.2f}×')} |"
            lines.append(row)
    record("server.md", "\n".join(lines) + "\n", enabled=not args.no_record)


if __name__ == "__main__":
    main()
