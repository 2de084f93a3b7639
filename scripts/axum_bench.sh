#!/usr/bin/env bash
# Real-client axum benchmark: one axum Router served by spargio-http on
# spargio against axum::serve on tokio, under wrk (HTTP/1.1) and h2load
# (HTTP/2), with client and server sharing the cores and split (server on
# CPU 0 with one worker, client on CPU 1), plus the memory of 5,000 idle
# keep-alive connections. The axum mode of scripts/http_bench.sh (see its
# header for what is measured and the environment it reads).
exec env SERVER=axum_server "$(dirname "$0")/http_bench.sh" "$@"
