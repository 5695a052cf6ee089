#!/usr/bin/env python3
"""Paced (open-loop, fixed-rate) runs: Shrike with each idle strategy beside fortio, oha and
vegeta, each asked for the same rate over 20 keep-alive connections.

For every client: requests answered, client CPU (user+sys, getrusage of the client alone) per
request, and for Shrike its `sequencer.send_lateness` p50/p99 (how late each request left
against its schedule; the peers do not report theirs) and scheduled-to-response p99.

`--wire SECONDS` adds a second, shorter pass per client with tcpdump on loopback, which
measures every client's release timing the same way, from the wire: each request's offset from
an even grid at the client's own achieved rate (so a client that runs slightly slow is charged
for bunching, not for drift), anchored at the earliest send (0 is "exactly on the grid").
A precise pacer shows small offsets; one that sleeps on a millisecond timer shows its bunching.
The capture pass is separate because capturing on loopback costs the sender CPU. The client
runs on CPU 0 and the server (nginx with one worker, or `shrike serve`) on CPU 1. Peers that are
not Debian packages are installed on first use (bench/peers.py).

    cargo build --release && python3 bench/pacing.py [--duration 5] [--rates 1000,5000,20000]
        [--strategies spin,poll,sleep,poll+io_uring,late=1ms,late=100us] [--peers fortio,oha,vegeta]
        [--server nginx|shrike]
        [--before BINARY] [--wire 2]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CLIENT_CPU, SHRIKE, SERVER_CPU, heading, record, scratch  # noqa: E402
from compare import start_nginx, timed_run  # noqa: E402
from peers import peer  # noqa: E402

CONNECTIONS = 20


def wire_offsets(url, rate, run, d):
    """Runs one client under tcpdump at `rate`; returns the p50 and p99 (µs) of its requests'
    offsets from an even grid at the rate it achieved."""
    port = url.split(":")[2].split("/")[0]
    with tempfile.NamedTemporaryFile(suffix=".pcap") as cap:
        # Only segments that carry data towards the server: the requests.
        filt = (f"tcp dst port {port} and "
                "(((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)")
        dump = subprocess.Popen(["taskset", "-c", SERVER_CPU, "tcpdump", "-i", "lo", "-n",
                                 "-s", "96", "-B", "32768", "-w", cap.name, filt],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_capturing(dump)
        run(url, rate, d)
        dump.terminate()
        _, err = dump.communicate()
        if "0 packets dropped by kernel" not in err:
            print(f"warning: tcpdump: {err.strip()}", file=sys.stderr)
        read = subprocess.run(["tcpdump", "-r", cap.name, "-n", "-tt", "-q",
                               "--time-stamp-precision=nano"], capture_output=True, text=True)
    sends = sorted(float(line.split()[0]) for line in read.stdout.splitlines() if line)
    # The first 1 % is connection set-up and ramp, not pacing.
    sends = sends[len(sends) // 100:]
    if len(sends) < 100:
        return None
    # The grid's period is the least-squares slope of send time over send number: fitting
    # the endpoints alone would tilt the grid by their own jitter.
    n = len(sends)
    mean_i, mean_t = (n - 1) / 2, sum(sends) / n
    period = (sum((i - mean_i) * (t - mean_t) for i, t in enumerate(sends))
              / sum((i - mean_i) ** 2 for i in range(n)))
    offs = [t - sends[0] - i * period for i, t in enumerate(sends)]
    low = min(offs)
    offs = sorted(o - low for o in offs)
    return tuple(offs[int(q * (len(offs) - 1))] * 1e6 for q in (0.5, 0.99))


def wait_capturing(dump):
    """tcpdump says "listening on lo" once its capture is open."""
    line = dump.stderr.readline()
    if "listening" not in line:
        print(f"warning: tcpdump: {line.strip()}", file=sys.stderr)


def pct(stat, q):
    return next(float(p["duration"].rstrip("s")) for p in stat["percentiles"] if p["percentile"] >= q)


def shrike(binary, strategy):
    """A Shrike client; `strategy` is an idle strategy, optionally with `+io_uring` for the
    io_uring backend (poll+io_uring), or a lateness budget (`late=1ms`: --max-lateness 1ms)."""
    idle, _, backend = strategy.partition("+")
    pacing = (["--max-lateness", idle[len("late="):]] if idle.startswith("late=")
              else ["--sequencer-idle-strategy", idle])
    def run(url, rate, d):
        out, cpu = timed_run([binary, "run", url, "--rps", str(rate), "--connections",
                          str(CONNECTIONS), "--duration", str(d), "--concurrency", "1"]
                         + pacing + ["--io-backend", backend or "epoll",
                          "--output-format", "json", "-v", "error"], text=True)
        g = next(r for r in json.loads(out.stdout)["results"] if r["name"] == "global")
        stats = {s["id"]: s for s in g["statistics"]}
        n = sum(int(c["value"]) for c in g["counters"] if c["name"].startswith("benchmark.http_"))
        late = stats["sequencer.send_lateness"]
        sched = stats["benchmark_http_client.scheduled_to_response"]
        return n, cpu, (pct(late, 0.5) * 1e6, pct(late, 0.99) * 1e6, pct(sched, 0.99) * 1e6)
    return run


def fortio(path):
    def run(url, rate, d):
        with tempfile.NamedTemporaryFile(suffix=".json") as j:
            _, cpu = timed_run([path, "load", "-qps", str(rate), "-c", str(CONNECTIONS), "-t",
                            f"{d}s", "-uniform", "-json", j.name, "-quiet", url], text=True)
            with open(j.name) as f:
                v = json.load(f)
        n = sum(int(c) for code, c in v["RetCodes"].items() if code == "200")
        return n, cpu, None
    return run


def oha(path):
    def run(url, rate, d):
        out, cpu = timed_run([path, "-q", str(rate), "-c", str(CONNECTIONS), "-z", f"{d}s",
                          "--no-tui", "--output-format", "json", url], text=True)
        v = json.loads(out.stdout)
        return int(v["statusCodeDistribution"].get("200", 0)), cpu, None
    return run


def vegeta(path):
    def run(url, rate, d):
        with tempfile.NamedTemporaryFile(suffix=".bin") as res:
            out, cpu = timed_run([path, "attack", "-rate", f"{rate}/s", "-duration", f"{d}s",
                              "-connections", str(CONNECTIONS), "-output", res.name],
                             input=f"GET {url}\n", text=True)
            # The report is read afterwards, outside the measured client.
            rep = subprocess.run([path, "report", "-type", "json", res.name],
                                 capture_output=True, text=True, check=True)
        v = json.loads(rep.stdout)
        return int(v["status_codes"].get("200", 0)), cpu, None
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rates", default="1000,5000,20000")
    ap.add_argument("--strategies", default="spin,poll,sleep,poll+io_uring,late=1ms,late=100us")
    ap.add_argument("--peers", default="fortio,oha,vegeta")
    ap.add_argument("--server", choices=["nginx", "shrike"], default="nginx")
    ap.add_argument("--before", metavar="BINARY", help="also run this Shrike build (poll)")
    ap.add_argument("--wire", type=int, default=0, metavar="SECONDS",
                    help="also measure every client's release timing from a capture")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    tmp = scratch("pacing")
    if a.server == "nginx":
        server, url = start_nginx(tmp)
    else:
        server = subprocess.Popen(["taskset", "-c", SERVER_CPU, SHRIKE, "serve", "--listen",
                                   "127.0.0.1:0", "--concurrency", "1"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        url = f"http://{server.stdout.readline().strip()}/"
    clients = [(f"shrike {s}", shrike(SHRIKE, s)) for s in a.strategies.split(",") if s]
    if a.before:
        clients.append(("shrike before (poll)", shrike(a.before, "poll")))
    makers = {"fortio": fortio, "oha": oha, "vegeta": vegeta}
    for name in filter(None, a.peers.split(",")):
        path = peer(name)
        if path:
            clients.append((name, makers[name](path)))
    rows = []
    try:
        for rate in [int(r) for r in a.rates.split(",")]:
            for name, run in clients:
                n, cpu, late = run(url, rate, a.duration)
                wire = wire_offsets(url, rate, run, a.wire) if a.wire else None
                rows.append((rate, name, n, n / (rate * a.duration) * 100,
                             cpu / max(n, 1) * 1e6, late, wire))
                print(rows[-1], file=sys.stderr)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    lines = ["| target rps | client | requests | of planned | client CPU µs/req | vs fortio | "
             "vs cheapest peer | lateness p50 µs | lateness p99 µs | scheduled→response p99 µs |"
             + (" off-grid on the wire p50 µs | p99 µs |" if a.wire else ""),
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if a.wire else "")]
    for r in rows:
        ref = next((x[4] for x in rows if x[0] == r[0] and x[1] == "fortio"), None)
        ratio = f"{r[4] / ref:.2f}×" if ref else "—"
        peers = [x[4] for x in rows if x[0] == r[0] and not x[1].startswith("shrike")]
        ratio += f" | {r[4] / min(peers):.2f}×" if peers else " | —"
        late = " | ".join(f"{x:.1f}" for x in r[5]) if r[5] else "— | — | —"
        wire = ""
        if a.wire:
            wire = " | ".join(f"{x:.1f}" for x in r[6]) + " |" if r[6] else " — | — |"
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f}% | {r[4]:.2f} | {ratio} | {late} |"
                     + wire)
    server_name = "nginx (1 worker)" if a.server == "nginx" else "`shrike serve`"
    wire_note = (f" Off-grid offsets from a separate {a.wire}s pass under tcpdump."
                 if a.wire else "")
    text = (f"{heading()}\n\n{a.duration}s per rate and client, {CONNECTIONS} connections, "
            f"client on CPU {CLIENT_CPU} against {server_name} on CPU {SERVER_CPU}."
            f"{wire_note}\n\n"
            + "\n".join(lines) + "\n")
    record("pacing.md", text, not a.no_record)


if __name__ == "__main__":
    main()
