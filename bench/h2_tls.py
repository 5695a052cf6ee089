#!/usr/bin/env python3
"""HTTP/2 and TLS: Shrike vs h2load and ab, side by side in one run on loopback.

1. h2c throughput: h2load and `shrike run --protocol http2` (saturating closed loop) against
   nginx (`listen … http2`) and `shrike serve`, same connections and streams per connection.
2. TLS handshake rate (new connections per second, one request per connection, full
   handshakes): `ab` without keep-alive and `shrike run --max-requests-per-connection 1
   --tls-no-session-resumption`, plus Shrike with resumption on, against nginx and
   `shrike serve --tls`.

Client pinned to CPU 0, server to CPU 1; client CPU from getrusage of the client alone.

    cargo build --release && python3 bench/h2_tls.py [--duration 10]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import BODY, ROOT, SHRIKE, free_port, timed, wait_port  # noqa: E402

CONNS, STREAMS = 10, 10


def start_nginx(tmp, tls):
    port = free_port()
    html = os.path.join(tmp, "html")
    os.makedirs(html, exist_ok=True)
    os.makedirs(os.path.join(tmp, "logs"), exist_ok=True)
    with open(os.path.join(html, "file"), "wb") as f:
        f.write(b"a" * BODY)
    if tls:
        listen = (f"listen 127.0.0.1:{port} ssl http2; ssl_certificate {tmp}/cert.pem; "
                  f"ssl_certificate_key {tmp}/key.pem; ssl_session_cache shared:S:1m;")
    else:
        listen = f"listen 127.0.0.1:{port} http2;"
    conf = os.path.join(tmp, f"nginx-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1;
pid {tmp}/nginx-{port}.pid; error_log {tmp}/logs/error.log;
events {{ worker_connections 8192; }}
http {{ access_log off; keepalive_requests 10000000; http2_max_concurrent_streams 1000;
  client_body_temp_path {tmp}/t; proxy_temp_path {tmp}/t; fastcgi_temp_path {tmp}/t;
  uwsgi_temp_path {tmp}/t; scgi_temp_path {tmp}/t;
  server {{ {listen} root {html}; }} }}
""")
    p = subprocess.Popen(["taskset", "-c", "1", "nginx", "-p", tmp, "-c", conf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    scheme = "https" if tls else "http"
    return p, f"{scheme}://localhost:{port}/file"


def start_shrike(tmp, tls):
    args = ["taskset", "-c", "1", SHRIKE, "serve", "--listen", "127.0.0.1:0", "--concurrency",
            "1", "--response-body-size", str(BODY)]
    if tls:
        args += ["--tls-cert", f"{tmp}/cert.pem", "--tls-key", f"{tmp}/key.pem"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = p.stdout.readline().strip().rsplit(":", 1)[1]
    scheme = "https" if tls else "http"
    return p, f"{scheme}://localhost:{port}/"


def shrike_numbers(out):
    g = next(r for r in json.loads(out)["results"] if r["name"] == "global")
    c = {x["name"]: int(x["value"]) for x in g["counters"]}
    n = sum(v for k, v in c.items() if k.startswith("benchmark.http_"))
    return n, n / float(g["execution_duration"].rstrip("s")), c


def h2load(url, d):
    out, cpu = timed(["h2load", "-t1", f"-c{CONNS}", f"-m{STREAMS}", "-D", str(d), url])
    n = int(re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out).group(1))
    rps = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out).group(1))
    return n, rps, cpu


def shrike_h2(url, d, binary=SHRIKE, backend="epoll", rps="1000000", extra=()):
    out, cpu = timed([binary, "run", url, "--protocol", "http2", "--rps", rps,
                      "--connections", str(CONNS), "--max-concurrent-streams", str(STREAMS),
                      "--max-active-requests", str(CONNS * STREAMS), "--duration", str(d),
                      "--io-backend", backend, "--output-format", "json", "-v", "error", *extra])
    n, rps, _ = shrike_numbers(out)
    return n, rps, cpu


def ab_tls(url, d):
    out, cpu = timed(["ab", "-q", "-c", str(CONNS), "-t", str(d), "-n", "100000000", url])
    n = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))
    rps = float(re.search(r"Requests per second:\s+([\d.]+)", out).group(1))
    return n, rps, cpu


def shrike_tls(url, d, ca, resume):
    args = [SHRIKE, "run", url, "--rps", "1000000", "--connections", str(CONNS),
            "--max-requests-per-connection", "1", "--duration", str(d), "--tls-ca", ca,
            "--output-format", "json", "-v", "error"]
    if not resume:
        args.append("--tls-no-session-resumption")
    out, cpu = timed(args)
    n, rps, c = shrike_numbers(out)
    return n, rps, cpu, c.get("ssl.handshake", 0), c.get("ssl.session_reused", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--before", metavar="BINARY",
                    help="also run this (older) shrike binary over h2c, interleaved with the "
                         "current one, for a before/after comparison in the same run")
    a = ap.parse_args()
    for tool in ["h2load", "ab", "nginx", "taskset", "openssl"]:
        if not shutil.which(tool):
            sys.exit(f"{tool} not found")
    if not os.path.exists(SHRIKE):
        sys.exit("build first: cargo build --release")
    h2rows, tlsrows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-addext", "basicConstraints=critical,CA:FALSE",
                        "-keyout", f"{tmp}/key.pem", "-out", f"{tmp}/cert.pem"],
                       check=True, capture_output=True)
        ca = f"{tmp}/cert.pem"
        for target, start in [("nginx", start_nginx), ("shrike serve", start_shrike)]:
            server, url = start(tmp, False)
            try:
                time.sleep(0.3)
                runs = [("h2load", lambda: h2load(url, a.duration)),
                        ("shrike", lambda: shrike_h2(url, a.duration)),
                        ("shrike io_uring",
                         lambda: shrike_h2(url, a.duration, backend="io_uring")),
                        ("shrike max", lambda: shrike_h2(url, a.duration, rps="max")),
                        ("shrike max coalesce 50us",
                         lambda: shrike_h2(url, a.duration, rps="max",
                                           extra=["--read-coalesce", "50us"])),
                        ("shrike max io_uring coalesce 50us",
                         lambda: shrike_h2(url, a.duration, rps="max", backend="io_uring",
                                           extra=["--read-coalesce", "50us"])),
                        ("shrike max io_uring coalesce 100us",
                         lambda: shrike_h2(url, a.duration, rps="max", backend="io_uring",
                                           extra=["--read-coalesce", "100us"]))]
                if a.before:
                    before = ("shrike before", lambda: shrike_h2(url, a.duration, a.before))
                    runs += [before, runs[1], before]
                for name, fn in runs:
                    n, rps, cpu = fn()
                    h2rows.append((target, name, n, rps, cpu / max(n, 1) * 1e6))
                    print(f"h2c  {target:13} {name:15} {rps:9.0f} req/s {h2rows[-1][4]:6.2f} us/req",
                          flush=True)
            finally:
                server.terminate()
                server.wait()
            server, url = start(tmp, True)
            try:
                time.sleep(0.3)
                n, rps, cpu = ab_tls(url, a.duration)
                tlsrows.append((target, "ab (no keep-alive)", n, rps, cpu / max(n, 1) * 1e6, "", ""))
                for resume in (False, True):
                    n, rps, cpu, hs, reused = shrike_tls(url, a.duration, ca, resume)
                    name = "shrike, resumption " + ("on" if resume else "off")
                    tlsrows.append((target, name, n, rps, cpu / max(n, 1) * 1e6, hs, reused))
                for r in tlsrows[-3:]:
                    print(f"tls  {r[0]:13} {r[1]:26} {r[3]:8.0f} conn/s {r[4]:7.1f} us/conn",
                          flush=True)
            finally:
                server.terminate()
                server.wait()

    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                      if l.startswith("model name")), "unknown CPU")
    text = [f"## {datetime.date.today().isoformat()} — {os.cpu_count()} vCPU {cpu_model}, "
            f"Linux {platform.release()}", "",
            f"h2c, saturating closed loop, {CONNS} connections × {STREAMS} streams, "
            f"{a.duration}s, {BODY}-byte bodies; client on CPU 0, server on CPU 1. shrike: "
            f"`--rps 1000000`; shrike max: `--rps max`; coalesce 50us: `--rps max "
            f"--read-coalesce 50us` (on epoll unless it says io_uring).", "",
            "| target | client | req/s | client CPU µs/req | CPU/req vs h2load | req/s vs h2load |",
            "|---|---|---:|---:|---:|---:|"]
    for t in ["nginx", "shrike serve"]:
        if a.before:
            now = [r[4] for r in h2rows if r[0] == t and r[1] == "shrike"]
            old = [r[4] for r in h2rows if r[0] == t and r[1] == "shrike before"]
            print(f"h2c {t}: client CPU/req after/before = "
                  f"{(sum(now) / len(now)) / (sum(old) / len(old)):.3f}× "
                  f"({sum(now) / len(now):.2f} vs {sum(old) / len(old):.2f} us/req)")
        base = next(r for r in h2rows if r[0] == t and r[1] == "h2load")
        for r in (r for r in h2rows if r[0] == t):
            text.append(f"| {t} | {r[1]} | {r[3]:.0f} | {r[4]:.2f} | {r[4] / base[4]:.2f}× | "
                        f"{r[3] / base[3]:.2f}× |")
    text += ["", f"TLS new connections (one request per connection, {CONNS} concurrent, "
             f"ECDSA P-256 certificate), {a.duration}s:", "",
             "| target | client | connections/s | client CPU µs/conn | ssl.handshake | ssl.session_reused |",
             "|---|---|---:|---:|---:|---:|"]
    for r in tlsrows:
        text.append(f"| {r[0]} | {r[1]} | {r[3]:.0f} | {r[4]:.1f} | {r[5]} | {r[6]} |")
    out = "\n".join(text) + "\n"
    print("\n" + out)
    if not a.no_record:
        with open(os.path.join(ROOT, "bench", "results", "h2-tls.md"), "a") as f:
            f.write(out + "\n")


if __name__ == "__main__":
    main()
