#!/usr/bin/env bash
# h2load for the soak (scripts/soak.sh): rounds of `h2load -n 4000 -c 4
# -m 8` until SECONDS have passed, cycling through h2c GET /, h2c POST
# /echo (16 KiB), HTTPS by ALPN h2 GET / and GET /big/65536, and HTTP/1.1
# over TLS. A connection quiet for 10 s counts as h2load's `timeout`; a
# round still running after 60 s is a hang (the loop stops there).
#
#   h2load_rounds.sh SECONDS HTTP_PORT HTTPS_PORT BODY_FILE
#
# Prints each round's `requests:` line behind its arguments, then
# `h2load-summary rounds=N` (with `hung` when a round did not finish).
set -euo pipefail

[ $# -eq 4 ] || { echo "usage: $0 SECONDS HTTP_PORT HTTPS_PORT BODY_FILE" >&2; exit 2; }
seconds=$1 http=$2 https=$3 body=$4

urls=(
  "http://127.0.0.1:$http/"
  "-d $body http://127.0.0.1:$http/echo"
  "https://127.0.0.1:$https/"
  "https://127.0.0.1:$https/big/65536"
  "--h1 https://127.0.0.1:$https/"
)
end=$((SECONDS + seconds))
round=0
while [ "$SECONDS" -lt "$end" ] && [ "$round" -lt 100000 ]; do
  args=${urls[round % ${#urls[@]}]}
  round=$((round + 1))
  # shellcheck disable=SC2086 # the options before the URL are words of their own
  if ! out=$(timeout -k 5 60 h2load -n 4000 -c 4 -m 8 -t 1 -N 10 $args 2>&1); then
    echo "round $round ($args): h2load failed or ran over 60 s:"
    tail -5 <<<"$out"
    echo "h2load-summary rounds=$round hung"
    exit 1
  fi
  grep '^requests:' <<<"$out" | sed "s|^|$args |"
done
echo "h2load-summary rounds=$round"
