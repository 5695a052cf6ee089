#!/usr/bin/env python3
"""Capture import speed: `shrike jobs import` on a pcap of at least 1 GB, generated here, in
MB of pcap per second and peak RSS, beside `tcpdump -r FILE -w /dev/null` (reading and writing
the same records, no reassembly) as the floor of what reading the file costs.

The capture: CONNECTIONS HTTP/1.1 keep-alive connections on Ethernet/IPv4, each with a
handshake, REQUESTS requests (a 400-byte GET) and answers (a 1400-byte response), and a close;
connections overlap in time, as a busy server's do. Checksums are left zero (Shrike, like
tcpdump -r, does not verify them).

    cargo build --release && python3 bench/import.py [--size-gb 1.0]

Results are printed and appended as a dated Markdown table to bench/results/import.md.
"""
import argparse
import datetime
import os
import platform
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CLIENT_CPU, ROOT, SHRIKE, scratch  # noqa: E402

REQUEST = b"GET /api/items?page=%06d HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: bench\r\n" \
          b"Accept: */*\r\nX-Pad: " + b"p" * 280 + b"\r\n\r\n"
RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-length: 1300\r\n\r\n" + b"r" * 1300


def frame(src_ip, dst_ip, sport, dport, seq, ack, flags, payload):
    """An Ethernet/IPv4/TCP frame (checksums zero)."""
    ip_len = 20 + 20 + len(payload)
    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 6, 0, src_ip, dst_ip)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    return eth + ip + tcp + payload


def write_pcap(path, target_bytes, requests):
    client, server = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    out = open(path, "wb", buffering=1 << 22)
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
    written, conns, reqs = 24, 0, 0
    t = 1_700_000_000.0
    # Connections run in overlapping waves: 64 open at a time, their packets interleaved.
    while written < target_bytes:
        wave = []
        for k in range(64):
            port = 1024 + (conns % 60000)
            conns += 1
            c, s = 1000, 5000
            pkts = [(True, c, s, 0x02, b""), (False, s, c + 1, 0x12, b"")]
            c, s = c + 1, s + 1
            for i in range(requests):
                q = REQUEST % (reqs % 1_000_000)
                reqs += 1
                pkts.append((True, c, s, 0x18, q))
                c += len(q)
                pkts.append((False, s, c, 0x18, RESPONSE))
                s += len(RESPONSE)
            pkts.append((True, c, s, 0x11, b""))
            pkts.append((False, s, c + 1, 0x11, b""))
            wave.append((port, pkts))
        for step in range(max(len(p) for _, p in wave)):
            for port, pkts in wave:
                if step >= len(pkts):
                    continue
                from_client, seq, ack, flags, payload = pkts[step]
                if from_client:
                    f = frame(client, server, port, 80, seq, ack, flags, payload)
                else:
                    f = frame(server, client, 80, port, seq, ack, flags, payload)
                t += 0.00001
                sec = int(t)
                out.write(struct.pack("<IIII", sec, int((t - sec) * 1e6), len(f), len(f)))
                out.write(f)
                written += 16 + len(f)
    out.close()
    return conns, reqs


def timed(cmd):
    """Wall seconds and peak RSS (KiB, from GNU time) of CMD, on the client CPU."""
    full = ["/usr/bin/time", "-f", "%e %M", "taskset", "-c", CLIENT_CPU] + cmd
    p = subprocess.run(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} failed:\n{p.stderr}")
    wall, rss = p.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss), p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--requests", type=int, default=8, help="requests per connection")
    args = ap.parse_args()
    tmp = scratch("import")
    pcap = os.path.join(tmp, "big.pcap")
    t = time.time()
    conns, reqs = write_pcap(pcap, int(args.size_gb * 1e9), args.requests)
    size = os.path.getsize(pcap)
    print(f"capture: {size / 1e6:.0f} MB, {conns} connections, {reqs} requests "
          f"({time.time() - t:.0f}s to write)")
    try:
        # Twice each, keeping the faster: the first read warms the page cache for both.
        td = min(timed(["tcpdump", "-r", pcap, "-w", "/dev/null"])[:2] for _ in range(2))
        jobs = os.path.join(tmp, "big.jobs")
        sh = min(timed([SHRIKE, "jobs", "import", pcap, "-o", jobs])[:2] for _ in range(2))
        _, _, report = timed([SHRIKE, "jobs", "import", pcap, "-o", jobs])
    finally:
        os.remove(pcap)
    imported = next((l for l in report.splitlines() if "imported" in l), "")
    rows = [
        ("capture", f"{size / 1e6:.0f} MB, {conns} connections, {reqs} requests"),
        ("shrike jobs import", f"{sh[0]:.1f} s, {size / 1e6 / sh[0]:.0f} MB/s, peak RSS {sh[1] / 1024:.0f} MiB"),
        ("tcpdump -r -w /dev/null", f"{td[0]:.1f} s, {size / 1e6 / td[0]:.0f} MB/s, peak RSS {td[1] / 1024:.0f} MiB"),
        ("import time / tcpdump time", f"{sh[0] / td[0]:.2f}"),
        ("report", imported.replace("[shrike] ", "")),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "import.md"), "a") as f:
        f.write(f"\n## {datetime.date.today()} — {platform.node()}, {os.cpu_count()} CPUs, "
                f"pinned to CPU {CLIENT_CPU}\n\n| measure | value |\n|---|---|\n")
        for k, v in rows:
            f.write(f"| {k} | {v} |\n")
    os.rmdir(tmp) if not os.listdir(tmp) else None


if __name__ == "__main__":
    main()
