#!/usr/bin/env python3
"""A soak: `shrike serve` under a steady HTTP/1.1 and HTTP/2 load for ten minutes.

Two `shrike run` clients (h1 and h2, each at --rps, with --stats-interval 10s) load one
`shrike serve` for --duration seconds; the clients are pinned to CPU 0 and the server to
CPU 1. Every --every seconds the script samples each process's resident memory (VmRSS) and
open file descriptors from /proc. After a warm-up (the first tenth), a least-squares line
through each series gives its trend over the run: the verdict is flat when RSS grows less than
2 MiB (or 5%) and open files by at most 2. Open files may go up and down without a trend: the
server closes keep-alive connections a client leaves idle past its --idle-timeout (60 s), and
the client opens them again when its load needs them.

    cargo build --release && python3 bench/soak.py [--duration 600] [--rps 1000]

Writes bench/results/soak-trace-DATE.csv (every sample), bench/results/soak-DATE.svg (the
plot) and appends the summary to bench/results/soak.md.
"""
import argparse
import csv
import datetime
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
CLIENT_CPU, SERVER_CPU = "0", "1"


def sample(pid):
    """(RSS KiB, open fds) of `pid`, or None once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None


def trend(ts, ys):
    """Least-squares slope of ys over ts (units per second)."""
    n = len(ts)
    mt, my = sum(ts) / n, sum(ys) / n
    var = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / var if var else 0.0


def svg(path, rows, names, duration):
    """RSS (MiB) and open files over time, one line per process, as a self-contained SVG."""
    w, h, pad = 900, 560, 60
    colors = {"server": "#d62728", "h1": "#1f77b4", "h2": "#2ca02c"}
    panels = [("RSS (MiB)", lambda r, n: r[f"{n}_rss_kib"] / 1024), ("open files", lambda r, n: r[f"{n}_fds"])]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>']
    ph = (h - 3 * pad) / 2
    for i, (label, get) in enumerate(panels):
        top = pad + i * (ph + pad)
        vals = [get(r, n) for r in rows for n in names if r.get(f"{n}_fds") is not None]
        lo, hi = 0, max(vals) * 1.15 if vals else 1
        x = lambda t: pad + (w - 2 * pad) * t / duration
        y = lambda v: top + ph - ph * (v - lo) / (hi - lo)
        out.append(f'<rect x="{pad}" y="{top}" width="{w - 2 * pad}" height="{ph}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{pad}" y="{top - 8}">{label}</text>')
        for k in range(5):
            v = lo + (hi - lo) * k / 4
            out.append(f'<text x="{pad - 6}" y="{y(v) + 4}" text-anchor="end">{v:.0f}</text>')
        for k in range(7):
            t = duration * k / 6
            out.append(f'<text x="{x(t)}" y="{top + ph + 16}" text-anchor="middle">{t:.0f}s</text>')
        for n in names:
            pts = " ".join(f"{x(r['t']):.1f},{y(get(r, n)):.1f}" for r in rows if r.get(f"{n}_fds") is not None)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colors[n]}" stroke-width="1.5"/>')
        for j, n in enumerate(names):
            out.append(f'<text x="{w - pad - 200 + j * 70}" y="{top - 8}" fill="{colors[n]}">{n}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=int, default=600)
    ap.add_argument("--rps", type=int, default=1000, help="per client")
    ap.add_argument("--every", type=float, default=5.0, help="sampling period, seconds")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "shrike"))
    args = ap.parse_args()
    if not os.path.exists(args.bin):
        sys.exit("build first: cargo build --release")
    tmp = subprocess.check_output(["mktemp", "-d"], text=True).strip()
    addr_file = os.path.join(tmp, "addr")
    server = subprocess.Popen(["taskset", "-c", SERVER_CPU, args.bin, "serve", "--listen", "127.0.0.1:0",
                               "--concurrency", "1", "--listener-address-file", addr_file],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while not (os.path.exists(addr_file) and open(addr_file).read().strip()):
            if time.time() > deadline:
                sys.exit("the server did not start")
            time.sleep(0.05)
        url = f"http://{open(addr_file).read().strip()}/"
        clients = {}
        for name, proto in [("h1", "http1"), ("h2", "http2")]:
            out = open(os.path.join(tmp, f"{name}.json"), "w")
            err = open(os.path.join(tmp, f"{name}.err"), "w")
            clients[name] = subprocess.Popen(
                ["taskset", "-c", CLIENT_CPU, args.bin, "run", url, "--protocol", proto, "--rps", str(args.rps),
                 "--duration", str(args.duration), "--connections", "20", "--stats-interval", "10s",
                 "--output-format", "json"], stdout=out, stderr=err)
        pids = {"server": server.pid, **{n: c.pid for n, c in clients.items()}}
        names = list(pids)
        rows, t0 = [], time.time()
        while any(c.poll() is None for c in clients.values()):
            row = {"t": round(time.time() - t0, 1)}
            for n, pid in pids.items():
                s = sample(pid)
                if s:
                    row[f"{n}_rss_kib"], row[f"{n}_fds"] = s
            rows.append(row)
            time.sleep(args.every)
        results = {n: json.load(open(os.path.join(tmp, f"{n}.json"))) for n in clients}
    finally:
        server.terminate()
        server.wait(timeout=30)

    date = datetime.date.today().isoformat()
    os.makedirs(RESULTS, exist_ok=True)
    trace = os.path.join(RESULTS, f"soak-trace-{date}.csv")
    fields = ["t"] + [f"{n}_{k}" for n in names for k in ("rss_kib", "fds")]
    with open(trace, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=fields)
        wr.writeheader()
        wr.writerows(rows)
    svg(os.path.join(RESULTS, f"soak-{date}.svg"), rows, names, args.duration)

    # The verdict: trends after the warm-up, while every process still runs (the clients'
    # last sample may be after the end of their load).
    steady = [r for r in rows if r["t"] >= args.duration / 10 and r["t"] <= args.duration - args.every
              and all(f"{n}_fds" in r for n in names)]
    lines = [f"\n## {date}: {args.duration} s, {args.rps} rps per client (h1 and h2), "
             f"{platform.node()} ({os.cpu_count()} CPUs, Linux {platform.release()})\n",
             "| process | RSS first→last steady sample (KiB) | RSS trend over the run | open files min–max | open-files trend | verdict |",
             "|---|---|---|---|---|---|"]
    flat_all = True
    for n in names:
        ts = [r["t"] for r in steady]
        rss = [r[f"{n}_rss_kib"] for r in steady]
        fds = [r[f"{n}_fds"] for r in steady]
        growth = trend(ts, rss) * (ts[-1] - ts[0])
        fd_growth = trend(ts, fds) * (ts[-1] - ts[0])
        flat = growth < max(2048, 0.05 * rss[0]) and fd_growth <= 2
        flat_all &= flat
        lines.append(f"| {n} | {rss[0]}→{rss[-1]} | {growth:+.0f} KiB | {min(fds)}–{max(fds)} | "
                     f"{fd_growth:+.1f} | {'flat' if flat else 'GROWS'} |")
    lines.append("")
    for n, v in results.items():
        g = next(r for r in v["results"] if r["name"] == "global")
        counters = {c["name"]: int(c["value"]) for c in g.get("counters", [])}
        ok, planned = counters.get("benchmark.http_2xx", 0), args.rps * args.duration
        errors = sum(counters.get(k, 0) for k in ("benchmark.pool_connection_failure", "upstream_rq_timeout",
                                                    "benchmark.stream_resets", "upstream_cx_protocol_error"))
        lines.append(f"- {n}: {ok} of {planned} planned requests answered 2xx, {errors} errors")
    lines.append(f"\nTrace: `soak-trace-{date}.csv`; plot: `soak-{date}.svg`.")
    text = "\n".join(lines) + "\n"
    print(text)
    md = os.path.join(RESULTS, "soak.md")
    if not os.path.exists(md):
        with open(md, "w") as f:
            f.write("# Soak: RSS and open files of `shrike serve` and two clients under a steady load\n"
                    "\nMade by `bench/soak.py`; the test suite's `tests/integration/soak.rs` checks the same property in 16 s.\n")
    with open(md, "a") as f:
        f.write(text)
    sys.exit(0 if flat_all else 1)


if __name__ == "__main__":
    main()
