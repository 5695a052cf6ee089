#!/usr/bin/env python3
"""Client CPU per request through a CONNECT tunnel against direct: the same paced load on
Shrike's test server (HTTP/1.1 and h2c), straight, through Debian's squid (`--tunnel-uri`, a
CONNECT per connection) and through Go's net/http as an HTTP/2 proxy (`--tunnel-protocol
http2`, a CONNECT stream per connection; the tests' crates/shrike/tests/connect_proxy, built
with `go` when it is there), in interleaved rounds. With Go, HTTP/3 too: straight to the
server's QUIC port, and by CONNECT-UDP through the same proxy over TLS (each QUIC packet a
capsule on an HTTP/2 stream).

What a tunnel costs the client is one CONNECT per connection; the requests then ride the same
TCP stream, so per request it should cost nothing measurable. The proxy's own CPU is squid's
and is not counted. Client on CPU 0; the server (1 worker) and the proxies on CPU 1.

    cargo build --release && python3 bench/tunnel.py [--rounds 7] [--duration 4] [--rps max]

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


def start_go_proxy(tmp, tls=False):
    """Go's HTTP/2 CONNECT proxy (over TLS with a fresh certificate for 127.0.0.1, whose CA is
    returned too), or None without a Go toolchain."""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go")
                                else None)
    if not go:
        return None, None, None
    src = os.path.join(C.ROOT, "crates", "shrike", "tests", "connect_proxy")
    binary = os.path.join(tmp, "connect_proxy")
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly")
    subprocess.run([go, "build", "-o", binary, "."], cwd=src, env=env, check=True)
    args, ca = [], None
    if tls:
        ca, cert, key = (os.path.join(tmp, f) for f in ("ca.pem", "cert.pem", "key.pem"))
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run = lambda *a: subprocess.run(["openssl", *a], cwd=tmp, check=True,
                                        capture_output=True)
        run("req", "-x509", *ec, "-keyout", "ca.key", "-out", ca, "-days", "2", "-subj", "/CN=ca")
        run("req", *ec, "-keyout", key, "-out", "leaf.csr", "-subj", "/CN=127.0.0.1")
        with open(os.path.join(tmp, "leaf.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        run("x509", "-req", "-in", "leaf.csr", "-CA", ca, "-CAkey", "ca.key", "-set_serial", "1",
            "-days", "2", "-extfile", "leaf.ext", "-out", cert)
        args = ["-cert", cert, "-key", key]
    # Extended CONNECT (CONNECT-UDP over HTTP/2) is offered by Go's server only when asked.
    env = dict(os.environ, GODEBUG="http2xconnect=1")
    p = subprocess.Popen(["taskset", "-c", C.SERVER_CPU, binary, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=env)
    return p, p.stdout.readline().strip(), ca


def start_h3_server():
    """`shrike serve --tls --http3`: its URL (localhost, as its generated certificate names)
    and the certificate to trust."""
    p = subprocess.Popen(["taskset", "-c", C.SERVER_CPU, C.SHRIKE, "serve", "--listen",
                          "127.0.0.1:0", "--concurrency", "1", "--tls", "--http3",
                          "--response-body-size", str(C.BODY)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = p.stdout.readline().strip().rsplit(":", 1)[1]
    ca = p.stdout.readline().strip().removeprefix("tls-ca: ")
    return p, f"https://localhost:{port}/", ca


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--duration", type=int, default=4)
    # Unpaced by default: a paced client's CPU is mostly its idle strategy's waiting, which
    # hides what the tunnel's data path costs per request.
    ap.add_argument("--rps", default="max")
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
    go_proxy, go_addr, _ = start_go_proxy(tmp)
    common = ["--rps", str(a.rps), "--duration", str(a.duration), "--connections",
              str(a.connections), "--concurrency", "1", "--output-format", "json", "-v", "error"]
    base = [C.SHRIKE, "run", url, *common]
    ways = [("direct", []), ("through squid", ["--tunnel-uri", proxy])]
    if go_addr:
        ways.append(("through Go, HTTP/2 CONNECT",
                     ["--tunnel-uri", go_addr, "--tunnel-protocol", "http2"]))
    table = [(f"{p}, {how}", base + ["-p", p] + extra)
             for p in ["http1", "http2"] for how, extra in ways]
    h3_server = udp_proxy = None
    if go_addr:
        h3_server, h3_url, h3_ca = start_h3_server()
        udp_dir = os.path.join(tmp, "udp")
        os.makedirs(udp_dir)
        udp_proxy, udp_addr, proxy_ca = start_go_proxy(udp_dir, tls=True)
        h3 = [C.SHRIKE, "run", h3_url, "-p", "http3", "--tls-ca", h3_ca, *common]
        table += [("http3, direct", h3),
                  ("http3, through Go, HTTP/2 CONNECT-UDP",
                   h3 + ["--tunnel-uri", f"https://{udp_addr}", "--tunnel-protocol", "http2",
                         "--tunnel-ca", proxy_ca])]
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
        for p in (server, squid, go_proxy, h3_server, udp_proxy):
            if p is None:
                continue
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
    text = (f"{C.heading()}\n\n`bench/tunnel.py`: `--rps {a.rps}`, {a.connections} connections, "
            f"1 worker, against `shrike serve` (1 worker), straight, through squid (`--tunnel-uri`) "
            f"and through Go's net/http as an HTTP/2 CONNECT proxy (`--tunnel-protocol http2`; "
            f"for HTTP/3 load, CONNECT-UDP over TLS to it); "
            f"client CPU (user + system) per request, medians of {a.rounds} interleaved rounds "
            f"of {a.duration} s, each round's ratio against the direct run of that round.\n\n"
            + "\n".join(lines) + "\n")
    C.record("tunnel.md", text, enabled=not a.no_record)


if __name__ == "__main__":
    main()
