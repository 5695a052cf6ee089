#!/usr/bin/env python3
"""Client CPU per request through a CONNECT tunnel against direct: the same paced load on
Shrike's test server (HTTP/1.1 and h2c), once straight and once through Debian's squid
(`--tunnel-uri`), in interleaved rounds.

What a tunnel costs the client is one CONNECT per connection; the requests then ride the same
TCP stream, so per request it should cost nothing measurable. The proxy's own CPU is squid's
and is not counted. Client on CPU 0; the server (1 worker) and squid on CPU 1.

    cargo build --release && python3 bench/tunnel.py [--rounds 7] [--duration 4] [--rps 4000]

Results are printed and appended as a dated Markdown table to bench/results/tunnel.md.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys

import compare as C


def start_squid(tmp):
    port = C.free_port()
    os.chmod(tmp, 0o777)  # started as root, squid writes its logs as its own user
    conf = os.path.join(tmp, "squid.conf")
    with open(conf, "w") as f:
        f.write(f"""http_port 127.0.0.1:{port}
pid_filename {tmp}/squid.pid
cache_log {tmp}/cache.log
access_log none
cache deny all
shutdown_lifetime 0 seconds
pinger_enable off
acl loopback src 127.0.0.0/8
http_access allow loopback
http_access deny all
""")
    p = subprocess.Popen(["taskset", "-c", C.SERVER_CPU, "squid", "-N", "-f", conf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    C.wait_port(port, timeout=20)
    return p, f"127.0.0.1:{port}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--rps", type=int, default=4000)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--no-record", action="store_true", help="do not write bench/results/")
    a = ap.parse_args()
    for tool in ["squid", "taskset"]:
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install squid util-linux")
    tmp = C.scratch("tunnel")
    server, url = C.start_shrike_server()
    squid_dir = os.path.join(tmp, "squid")
    os.makedirs(squid_dir)
    squid, proxy = start_squid(squid_dir)
    base = [C.SHRIKE, "run", url, "--rps", str(a.rps), "--duration", str(a.duration),
            "--connections", str(a.connections), "--concurrency", "1",
            "--output-format", "json", "-v", "error"]
    table = [(f"{p}, {how}", base + ["-p", p] + extra)
             for p in ["http1", "http2"]
             for how, extra in [("direct", []), ("through squid", ["--tunnel-uri", proxy])]]
    runs = {}  # name -> [(µs/req, round)]
    try:
        for r in range(a.rounds):
            k = r % len(table)
            for name, cmd in table[k:] + table[:k]:
                out, user, system, _ = C.rusage_run(cmd)
                if out.returncode != 0:
                    sys.exit(f"{name} exited {out.returncode}: {out.stderr.strip()[:300]}")
                n = max(C.shrike_answered(out.stdout)[1], 1)
                runs.setdefault(name, []).append(((user + system) / n * 1e6, r))
                print(f"round {r}  {name:24} {n:7d} req  {(user + system) / n * 1e6:6.2f} µs/req",
                      flush=True)
    finally:
        for p in (server, squid):
            p.kill()
            p.wait()
    med = statistics.median
    lines = ["| load | CPU µs/req | vs direct (range of rounds) |", "|---|---:|---|"]
    for name, _ in table:
        rows = runs[name]
        direct = {r: v for v, r in runs[name.split(",")[0] + ", direct"]}
        ratios = [v / direct[r] for v, r in rows]
        lines.append(f"| {name} | {med(v for v, _ in rows):.2f} | {med(ratios):.2f}× "
                     f"({min(ratios):.2f}–{max(ratios):.2f}) |")
    text = (f"{C.heading()}\n\n`bench/tunnel.py`: {a.rps} rps paced, {a.connections} connections, "
            f"1 worker, against `shrike serve` (1 worker), straight or through squid (`--tunnel-uri`); "
            f"client CPU (user + system) per request, medians of {a.rounds} interleaved rounds "
            f"of {a.duration} s, each round's ratio against the direct run of that round.\n\n"
            + "\n".join(lines) + "\n")
    C.record("tunnel.md", text, enabled=not a.no_record)


if __name__ == "__main__":
    main()
