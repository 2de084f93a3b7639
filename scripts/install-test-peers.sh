#!/usr/bin/env bash
# Installs the external peers the interop tests talk to, so that
# `cargo test --workspace` runs them instead of skipping them (the list
# matches `Peer` in crates/spargio-test-peers/src/lib.rs):
#
#   apt-get: openssl curl python3 python3-pip nghttp2-client (h2load)
#            nginx nodejs wrk postgresql redis-server
#   pip:     websockets aioquic grpcio prometheus_client
#
# PostgreSQL and Redis are only installed: the tests start private
# servers of their own (temp dir, free port) and never use a system
# instance; the install starts no service (policy-rc.d below).
#
# Idempotent: whatever is present already is left alone. Runs as root
# (CI) or through sudo. Debian/Ubuntu.
#
#   scripts/install-test-peers.sh          install what is missing
#   scripts/install-test-peers.sh --check  only say what is missing (exit 1 if any)
set -euo pipefail

check_only=0
case "${1:-}" in
  --check) check_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

has() { command -v "$1" >/dev/null 2>&1; }

# `import` lines the tests' own probes use (spargio-test-peers).
py_module() {
  case "$1" in
    websockets) echo "websockets.sync.client, websockets.asyncio.server" ;;
    aioquic) echo "aioquic" ;;
    grpcio) echo "grpc" ;;
    prometheus_client) echo "prometheus_client.parser" ;;
  esac
}

# As the tests' probe: some /usr/lib/postgresql/<version>/bin has both
# initdb and postgres (the server binaries are not on the PATH).
pg_bindir() {
  local dir best=""
  for dir in $(printf "%s\n" /usr/lib/postgresql/*/bin | sort -V); do
    [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] && best=$dir
  done
  [ -n "$best" ] && echo "$best"
}

py_has() { has python3 && python3 -c "import $(py_module "$1")" >/dev/null 2>&1; }

missing_apt() {
  local need=()
  has openssl || need+=(openssl)
  has curl || need+=(curl)
  has python3 || need+=(python3)
  python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
  has h2load || need+=(nghttp2-client)
  # nginx lives in /usr/sbin, which a non-root PATH may leave out.
  has nginx || [ -x /usr/sbin/nginx ] || need+=(nginx)
  has node || need+=(nodejs)
  has wrk || need+=(wrk)
  pg_bindir >/dev/null || need+=(postgresql)
  has redis-server || [ -x /usr/bin/redis-server ] || need+=(redis-server)
  echo "${need[@]}"
}

missing_pip() {
  local need=()
  for pkg in websockets aioquic grpcio prometheus_client; do
    py_has "$pkg" || need+=("$pkg")
  done
  echo "${need[@]}"
}

read -r -a apt_need <<<"$(missing_apt)"
read -r -a pip_need <<<"$(missing_pip)"

if [ "$check_only" = 1 ]; then
  [ ${#apt_need[@]} -gt 0 ] && echo "missing (apt-get): ${apt_need[*]}"
  [ ${#pip_need[@]} -gt 0 ] && echo "missing (pip): ${pip_need[*]}"
  [ ${#apt_need[@]} -eq 0 ] && [ ${#pip_need[@]} -eq 0 ] && echo "every test peer is installed"
  [ ${#apt_need[@]} -eq 0 ] && [ ${#pip_need[@]} -eq 0 ]
  exit
fi

if [ ${#apt_need[@]} -gt 0 ]; then
  echo "apt-get install ${apt_need[*]}"
  # Maintainer scripts must not start services while we install (nginx
  # would take port 80, postgresql and redis-server 5432 and 6379, and a
  # failed start fails the install): a
  # policy-rc.d that denies every start, unless the host has one.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod +x /usr/sbin/policy-rc.d
    trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_need[@]}" >/dev/null
fi

# Installing python3 or pip above can change what pip sees.
read -r -a pip_need <<<"$(missing_pip)"
if [ ${#pip_need[@]} -gt 0 ]; then
  echo "pip install ${pip_need[*]}"
  # Debian 12+ and Ubuntu 23.04+ refuse pip outside a venv unless told
  # (PEP 668); older pips do not know the flag.
  python3 -m pip install -q -U --break-system-packages "${pip_need[@]}" 2>/dev/null \
    || python3 -m pip install -q -U "${pip_need[@]}"
fi

# What the tests will find.
read -r -a apt_need <<<"$(missing_apt)"
read -r -a pip_need <<<"$(missing_pip)"
if [ ${#apt_need[@]} -gt 0 ] || [ ${#pip_need[@]} -gt 0 ]; then
  echo "still missing: ${apt_need[*]} ${pip_need[*]}" >&2
  exit 1
fi
echo "test peers: $(openssl version | cut -d' ' -f1-2), curl $(curl --version | head -1 | cut -d' ' -f2)," \
  "$(python3 --version)," \
  "websockets $(python3 -c 'import websockets; print(websockets.__version__)')," \
  "aioquic $(python3 -c 'import aioquic; print(aioquic.__version__)')," \
  "grpcio $(python3 -c 'import grpc; print(grpc.__version__)')," \
  "$(h2load --version 2>&1 | head -1)," \
  "$( (nginx -v 2>&1 || /usr/sbin/nginx -v 2>&1) | head -1)," \
  "node $(node --version), $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)," \
  "$("$(pg_bindir)/postgres" --version)," \
  "$( (redis-server --version 2>/dev/null || /usr/bin/redis-server --version) | cut -d' ' -f1-3)"
