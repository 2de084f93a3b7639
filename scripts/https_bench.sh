#!/usr/bin/env bash
# Real-client HTTPS benchmark: hyper over spargio-tls against hyper over
# tokio-rustls under wrk. The HTTPS mode of scripts/http_bench.sh (see its
# header for what is measured and the environment it reads).
exec env SCHEME=https "$(dirname "$0")/http_bench.sh" "$@"
