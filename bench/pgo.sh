#!/usr/bin/env bash
# A profile-guided (PGO) release build of shrike, reproducible from a clean checkout:
#
#   bench/pgo.sh            # -> target/pgo/release/shrike
#
# 1. builds an instrumented binary (target/pgo-gen),
# 2. trains it on loopback: `shrike serve` answering `shrike run` over HTTP/1.1 (saturating
#    and paced), HTTP/2 and TLS, a few seconds each, so client and server paths both count,
# 3. merges the profiles with the llvm-profdata that matches rustc's LLVM (rustup's
#    llvm-tools component, installed here if missing),
# 4. builds target/pgo/release/shrike with the profile.
#
# The plain `cargo build --release` stays the default build (and what CI tests): the
# profile-guided one is for measuring, and for users who want its few per cent.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
data=$root/target/pgo-data
rm -rf "$data"
mkdir -p "$data"

rustup component add llvm-tools >/dev/null 2>&1 || true
sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=$sysroot/lib/rustlib/$host/bin/llvm-profdata
[[ -x $profdata ]] || { echo "pgo: $profdata not found (rustup component add llvm-tools)" >&2; exit 2; }

echo "pgo: building the instrumented binary" >&2
RUSTFLAGS="-Cprofile-generate=$data" CARGO_TARGET_DIR=$root/target/pgo-gen \
    cargo build --release -q -p shrike
gen=$root/target/pgo-gen/release/shrike

tmp=$(mktemp -d)
server_pid=""
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# Starts `shrike serve` with the given flags; sets server_pid and addr. The profile is only
# written on a clean exit, so the server is stopped with SIGINT, which it handles.
serve() {
    "$gen" serve --listen 127.0.0.1:0 --listener-address-file "$tmp/addr" "$@" \
        >/dev/null 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do [[ -s $tmp/addr ]] && break; sleep 0.05; done
    addr=$(cat "$tmp/addr")
}
stop() {
    kill -INT "$server_pid"
    wait "$server_pid" || true
    server_pid=""
    rm -f "$tmp/addr"
}
train() { "$gen" run "$@" --duration 3 -v error --output-format json >/dev/null; }

echo "pgo: training" >&2
serve --concurrency 1
train "http://$addr/" --rps max --connections 64
train "http://$addr/" --rps 5000 --connections 20
train "http://$addr/" --protocol http2 --rps max --connections 10 \
    --max-concurrent-streams 10 --max-active-requests 100
stop
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
serve --concurrency 1 --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem"
train "https://$addr/" --tls-ca "$tmp/cert.pem" --rps max --connections 16
train "https://$addr/" --tls-ca "$tmp/cert.pem" --rps max --connections 4 \
    --max-requests-per-connection 1
stop

"$profdata" merge -o "$data/merged.profdata" "$data"/*.profraw
echo "pgo: building with the profile" >&2
RUSTFLAGS="-Cprofile-use=$data/merged.profdata" CARGO_TARGET_DIR=$root/target/pgo \
    cargo build --release -q -p shrike
echo "$root/target/pgo/release/shrike"
