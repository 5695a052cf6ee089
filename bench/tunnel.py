#!/usr/bin/env python3
"""Client CPU per request through a CONNECT tunnel against direct, and the proxy's own CPU per
request: the same load on Shrike's test server (HTTP/1.1 and h2c), straight and through every
kind of tunnel Shrike speaks, each through a peer proxy and through `shrike serve
--connect-proxy` where it serves that kind, in interleaved rounds:

- HTTP/1.1 CONNECT: Debian's squid, and `shrike serve`;
- HTTP/2 CONNECT streams: Go's net/http (the tests' crates/shrike/tests/connect_proxy), and
  `shrike serve` (h2c);
- HTTP/3 CONNECT streams: quic-go's HTTP/3 server (the same test proxy with -h3), and `shrike
  serve --tls --http3`;
- for HTTP/3 load, CONNECT-UDP over HTTP/2 (capsules; Go's proxy over TLS, and `shrike serve
  --tls`) and over HTTP/3 (HTTP/3 datagrams; masque-go in the same test proxy, and `shrike
  serve`).

The Go peers are built with `go` when it is there (rows without it are left out). What a TCP
tunnel costs the client is one CONNECT per connection; the requests then ride the same
stream. The proxy's CPU (user + system of its process, from /proc) is per request too, so
`shrike serve` is compared with squid and Go's as a proxy. Client on CPU 0; the server (1
worker) and the proxies on CPU 1.

    cargo build --release && python3 bench/tunnel.py [--rounds 5] [--duration 4] [--rps max]

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


def go_tool():
    return shutil.which("go") or ("/usr/local/go/bin/go"
                                  if os.path.exists("/usr/local/go/bin/go") else None)


def go_build(module, package, out):
    """Builds a test peer (crates/shrike/tests/MODULE, PACKAGE) to OUT; False without Go."""
    go = go_tool()
    if not go:
        return False
    src = os.path.join(C.ROOT, "crates", "shrike", "tests", module)
    # The tests' module and build caches (support::go_build), so their downloads are reused.
    cache = os.path.join(C.ROOT, "target", "tmp")
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-modcacherw -mod=readonly",
               GOMODCACHE=os.path.join(cache, "gomodcache"), GOCACHE=os.path.join(cache, "gocache"))
    subprocess.run([go, "build", "-o", out, package], cwd=src, env=env, check=True)
    return True


def make_cert(tmp):
    """A CA and a certificate for 127.0.0.1 under TMP: (ca, cert, key)."""
    ca, cert, key = (os.path.join(tmp, f) for f in ("ca.pem", "cert.pem", "key.pem"))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], cwd=tmp, check=True, capture_output=True)
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", ca, "-days", "2", "-subj", "/CN=ca")
    run("req", *ec, "-keyout", key, "-out", "leaf.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(tmp, "leaf.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "leaf.csr", "-CA", ca, "-CAkey", "ca.key", "-set_serial", "1",
        "-days", "2", "-extfile", "leaf.ext", "-out", cert)
    return ca, cert, key


def start_go_proxy(tmp, tls=False, h3=False):
    """Go's HTTP/2 CONNECT proxy (over TLS with a fresh certificate for 127.0.0.1, whose CA is
    returned too; with `h3`, also quic-go's HTTP/3 CONNECT and masque-go's CONNECT-UDP on the
    same port number), or Nones without a Go toolchain."""
    binary = os.path.join(tmp, "connect_proxy")
    if not go_build("connect_proxy", ".", binary):
        return None, None, None
    args, ca = [], None
    if tls or h3:
        ca, cert, key = make_cert(tmp)
        args = ["-cert", cert, "-key", key] + (["-h3"] if h3 else [])
    # Extended CONNECT (CONNECT-UDP over HTTP/2) is offered by Go's server only when asked.
    env = dict(os.environ, GODEBUG="http2xconnect=1")
    p = subprocess.Popen(["taskset", "-c", C.SERVER_CPU, binary, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=env)
    return p, p.stdout.readline().strip(), ca


def start_shrike_proxy(tls=False):
    """`shrike serve --connect-proxy` (1 worker): (process, address or https URI, CA)."""
    args = ["--tls"] if tls else []
    p = subprocess.Popen(["taskset", "-c", C.SERVER_CPU, C.SHRIKE, "serve", "--listen",
                          "127.0.0.1:0", "--concurrency", "1", "--connect-proxy",
                          *(args + ["--http3"] if tls else args)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    addr = p.stdout.readline().strip()
    if not tls:
        return p, addr, None
    ca = p.stdout.readline().strip().removeprefix("tls-ca: ")
    return p, f"https://localhost:{addr.rsplit(':', 1)[1]}", ca


def cpu_seconds(pid):
    """User + system CPU of process PID so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    ap.add_argument("--rounds", type=int, default=5)
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
    dirs = {}
    for d in ["squid", "go", "udp"]:
        dirs[d] = os.path.join(tmp, d)
        os.makedirs(dirs[d])
    server, url = C.start_shrike_server()
    procs = [server]
    squid, proxy = start_squid(dirs["squid"])
    go_proxy, go_addr, _ = start_go_proxy(dirs["go"])
    shrike_proxy, shrike_addr, _ = start_shrike_proxy()
    # Over TLS: HTTP/2 CONNECT-UDP (capsules), and with -h3 quic-go's HTTP/3 CONNECT and
    # masque-go's CONNECT-UDP on the same port number.
    udp_proxy, udp_addr, proxy_ca = start_go_proxy(dirs["udp"], h3=True)
    # `shrike serve --tls --http3 --connect-proxy`: HTTP/3 CONNECT and CONNECT-UDP, and (over
    # TLS, HTTP/2) CONNECT-UDP with capsules.
    tls_proxy, tls_uri, tls_ca = start_shrike_proxy(tls=True)
    procs += [squid, go_proxy, shrike_proxy, udp_proxy, tls_proxy]
    common = ["--rps", str(a.rps), "--duration", str(a.duration), "--connections",
              str(a.connections), "--concurrency", "1", "--output-format", "json", "-v", "error"]
    base = [C.SHRIKE, "run", url, *common]
    # (name, extra flags, the proxy's process)
    ways = [("direct", [], None), ("through squid", ["--tunnel-uri", proxy], squid),
            ("through shrike serve, CONNECT", ["--tunnel-uri", shrike_addr], shrike_proxy),
            ("through shrike serve, HTTP/2 CONNECT",
             ["--tunnel-uri", shrike_addr, "--tunnel-protocol", "http2"], shrike_proxy)]
    if go_addr:
        ways.append(("through Go, HTTP/2 CONNECT",
                     ["--tunnel-uri", go_addr, "--tunnel-protocol", "http2"], go_proxy))
    ways.append(("through shrike serve, HTTP/3 CONNECT",
                 ["--tunnel-uri", tls_uri, "--tunnel-ca", tls_ca, "--tunnel-protocol", "http3"],
                 tls_proxy))
    if udp_addr:
        ways.append(("through quic-go, HTTP/3 CONNECT",
                     ["--tunnel-uri", f"https://{udp_addr}", "--tunnel-ca", proxy_ca,
                      "--tunnel-protocol", "http3"], udp_proxy))
    table = [(f"{p}, {how}", base + ["-p", p] + extra, via)
             for p in ["http1", "http2"] for how, extra, via in ways]
    h3_server, h3_url, h3_ca = start_h3_server()
    procs += [h3_server]
    h3 = [C.SHRIKE, "run", h3_url, "-p", "http3", "--tls-ca", h3_ca, *common]
    table += [("http3, direct", h3, None),
              ("http3, through shrike serve, HTTP/2 CONNECT-UDP",
               h3 + ["--tunnel-uri", tls_uri, "--tunnel-protocol", "http2", "--tunnel-ca", tls_ca],
               tls_proxy)]
    table.append(("http3, through shrike serve, HTTP/3 CONNECT-UDP",
                  h3 + ["--tunnel-uri", tls_uri, "--tunnel-protocol", "http3", "--tunnel-ca",
                        tls_ca], tls_proxy))
    if udp_addr:
        table.append(("http3, through Go, HTTP/2 CONNECT-UDP",
                      h3 + ["--tunnel-uri", f"https://{udp_addr}", "--tunnel-protocol", "http2",
                            "--tunnel-ca", proxy_ca], udp_proxy))
        table.append(("http3, through masque-go, HTTP/3 CONNECT-UDP",
                      h3 + ["--tunnel-uri", f"https://{udp_addr}", "--tunnel-protocol", "http3",
                            "--tunnel-ca", proxy_ca], udp_proxy))
    runs = {}  # name -> [(client µs/req, proxy µs/req or None, round)]
    try:
        for r in range(a.rounds):
            k = r % len(table)
            for name, cmd, via in table[k:] + table[:k]:
                before = cpu_seconds(via.pid) if via else 0
                out, user, system, _ = C.rusage_run(cmd)
                if out.returncode != 0:
                    sys.exit(f"{name} exited {out.returncode}: {out.stderr.strip()[:300]}")
                n = max(C.shrike_answered(out.stdout)[1], 1)
                by_proxy = (cpu_seconds(via.pid) - before) / n * 1e6 if via else None
                runs.setdefault(name, []).append(((user + system) / n * 1e6, by_proxy, r))
                shown = f"{by_proxy:6.2f}" if by_proxy is not None else "     -"
                print(f"round {r}  {name:50} {n:7d} req  {(user + system) / n * 1e6:6.2f} µs/req"
                      f"  proxy {shown} µs/req", flush=True)
    finally:
        for p in procs:
            if p is None:
                continue
            p.kill()
            p.wait()
    med = statistics.median
    lines = ["| load | client CPU µs/req | vs direct (range of rounds) | proxy CPU µs/req |",
             "|---|---:|---|---:|"]
    for name, _, via in table:
        rows = runs[name]
        direct = {r: v for v, _, r in runs[name.split(",")[0] + ", direct"]}
        ratios = [v / direct[r] for v, _, r in rows]
        proxy_cpu = f"{med(p for _, p, _ in rows):.2f}" if via else "–"
        lines.append(f"| {name} | {med(v for v, _, _ in rows):.2f} | {med(ratios):.2f}× "
                     f"({min(ratios):.2f}–{max(ratios):.2f}) | {proxy_cpu} |")
    text = (f"{C.heading()}\n\n`bench/tunnel.py`: `--rps {a.rps}`, {a.connections} connections, "
            f"1 worker, against `shrike serve` (1 worker), straight and through each proxy; "
            f"client CPU (user + system) per request, medians of {a.rounds} interleaved rounds "
            f"of {a.duration} s, each round's ratio against the direct run of that round; the "
            f"proxy's CPU per request from /proc (squid, Go, quic-go and masque-go are the "
            f"peers of `shrike serve --connect-proxy`, 1 worker).\n\n"
            + "\n".join(lines) + "\n")
    C.record("tunnel.md", text, enabled=not a.no_record)


if __name__ == "__main__":
    main()
