#!/usr/bin/env bash
# Serves HTTP with hyper on spargio (crates/spargio-http/examples/hyper_server.rs) and checks it
# with curl, a client that shares nothing with spargio. Usage:
#   scripts/hyper_curl.sh [port] [requests]
set -euo pipefail
cd "$(dirname "$0")/.."
port="${1:-18080}"
requests="${2:-50}"
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 0; }

cargo build --release -q -p spargio-http --example hyper_server
target/release/examples/hyper_server serve "$port" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT

for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.05
done

ok=0
for i in $(seq 1 "$requests"); do
    body=$(curl -s -f "http://127.0.0.1:$port/check/$i")
    case "$body" in
        *"GET /check/$i"*) ok=$((ok + 1)) ;;
        *) echo "unexpected response to request $i: $body"; exit 1 ;;
    esac
done
# Keep-alive: several requests over one connection.
curl -s -f "http://127.0.0.1:$port/a" "http://127.0.0.1:$port/b" | grep -c "hello from spargio" | grep -qx 2
echo "hyper on spargio answered $ok/$requests curl requests (plus 2 over one keep-alive connection)"
