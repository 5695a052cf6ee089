#!/usr/bin/env python3
"""Remakes the report screenshots the README shows: a capacity search against `shrike serve`'s
linear delay model (so it has a limit to find) and a sweep of `shrike serve` against the same
server with a 1 ms delay, each rendered by `shrike report` and photographed by headless
Chromium.

    cargo build --release && python3 docs/screenshots.py
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHRIKE = os.environ.get("SHRIKE_BIN") or os.path.join(ROOT, "target", "release", "shrike")
CHROMIUM = "/usr/bin/chromium"
MODEL = ('x-nighthawk-test-server-config: {"concurrency_based_linear_delay": '
         '{"minimal_delay": "0.002s", "concurrency_delay_factor": "0.0005s"}}')


def shrike(*args, ok=(0,)):
    out = subprocess.run([SHRIKE, *args], capture_output=True, text=True, check=False)
    if out.returncode not in ok:
        sys.exit(f"shrike {' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
    return out


def photograph(html, png, height):
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={profile}",
                        "--virtual-time-budget=5000", f"--window-size=1200,{height}",
                        f"--screenshot={png}", f"file://{html}"],
                       capture_output=True, check=True)
    print(f"wrote {png}")


def main():
    if not os.path.exists(SHRIKE):
        sys.exit("build first: cargo build --release")
    serve = subprocess.Popen([SHRIKE, "serve", "--listen", "127.0.0.1:0"],
                             stdout=subprocess.PIPE, text=True)
    url = f"http://{serve.stdout.readline().strip()}/"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cap = os.path.join(tmp, "capacity.json")
            shrike("capacity", url, "--slo", "p99<=10ms", "--slo", "p99<=20ms", "-H", MODEL,
                   "--start", "200", "--trial-duration", "1s", "--final-duration", "2s",
                   "-o", cap, ok=(0, 1))
            sweep = os.path.join(tmp, "sweep.json")
            base = f"{SHRIKE} serve --listen 127.0.0.1:0"
            shrike("sweep", "--connections", "1,2,4,8,16", "--iterations", "3", "--duration",
                   "1", "--wait", "0.2s", "--server-cmd", base,
                   "--server-cmd", f"{base} --static-delay 1ms", "-o", sweep)
            for name, doc, height in [("capacity", cap, 1500), ("sweep", sweep, 2100)]:
                html = os.path.join(tmp, f"{name}.html")
                shrike("report", doc, "-o", html)
                photograph(html, os.path.join(ROOT, "docs", f"report-{name}.png"), height)
    finally:
        serve.kill()
        serve.wait()


if __name__ == "__main__":
    main()
