"""The peers that are not Debian packages, installed from their registries on first use.

fortio and vegeta come from the Go module proxy (`go install`), oha from crates.io
(`cargo install --locked`), each at a pinned version into `$SHRIKE_BENCH_TOOLS` (default
~/.cache/shrike-bench), so every machine measures the same builds. fortio is pinned below
v1.67: later releases need `grol.io/grol`, which this machine's module proxy refuses.
"""
import os
import shutil
import subprocess
import sys

TOOLS = os.environ.get("SHRIKE_BENCH_TOOLS", os.path.expanduser("~/.cache/shrike-bench"))
BIN = os.path.join(TOOLS, "bin")
INFERNO = ["cargo", "install", "inferno", "--locked", "--version", "0.12.3", "--root", TOOLS]
PINNED = {
    "fortio": ["go", "install", "fortio.org/fortio@v1.66.0"],
    "vegeta": ["go", "install", "github.com/tsenart/vegeta/v12@v12.13.0"],
    "oha": ["cargo", "install", "oha", "--locked", "--version", "1.16.0", "--root", TOOLS],
    # Not a peer: the flame-graph tools bench/flame.py draws with (one crate, two binaries).
    "inferno-collapse-perf": INFERNO,
    "inferno-flamegraph": INFERNO,
}


def peer(name):
    """The path of peer `name`, installing it first if it is missing; None if that fails."""
    path = os.path.join(BIN, name)
    if os.path.exists(path):
        return path
    env = dict(os.environ, GOBIN=BIN, CARGO_TARGET_DIR=os.path.join(TOOLS, "target"))
    if shutil.which(PINNED[name][0]) is None:
        print(f"warning: cannot install {name}: {PINNED[name][0]} is not installed",
              file=sys.stderr)
        return None
    print(f"installing {name}: {' '.join(PINNED[name])}", file=sys.stderr)
    os.makedirs(BIN, exist_ok=True)
    done = subprocess.run(PINNED[name], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 or not os.path.exists(path):
        print(f"warning: installing {name} failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    return path
