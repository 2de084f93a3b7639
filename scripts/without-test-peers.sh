#!/usr/bin/env bash
# Runs a command the way it runs on a machine with only the Rust
# toolchain: the interop tests' peers (openssl, curl, Python and its
# packages, h2load, nginx, Node, wrk; see crates/spargio-test-peers) are
# hidden, SPARGIO_REQUIRE_PEERS is unset.
#
#   scripts/without-test-peers.sh cargo test -p spargio-ws
#
# PATH becomes a directory of links to every program in the system
# directories except the peers, plus the directory cargo is in;
# PYTHONPATH and PYTHONHOME are unset. Nothing else in the environment
# changes (RUSTFLAGS, CARGO_*, RUSTUP_*), and no build script here
# watches PATH, so cargo reuses the build the same command made with the
# peers visible.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 COMMAND [ARGS...]" >&2
  exit 2
fi

cargo_dir=$(dirname "$(command -v cargo)")
system_dirs=(/usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin)

farm=$(mktemp -d "${TMPDIR:-/tmp}/spargio-no-peers.XXXXXX")
trap 'rm -rf "$farm"' EXIT
for dir in "${system_dirs[@]}"; do
  [ -d "$dir" ] || continue
  for prog in "$dir"/*; do
    name=${prog##*/}
    case "$name" in
      openssl | curl | h2load | nginx | wrk) continue ;;
      python | python[0-9]* | pip | pip[0-9]* | pydoc* | idle[0-9]*) continue ;;
      node | nodejs | npm | npx | corepack) continue ;;
    esac
    # The first directory wins, as in PATH order.
    [ -e "$farm/$name" ] || [ -L "$farm/$name" ] || ln -s "$prog" "$farm/$name"
  done
done

path=$farm
case " ${system_dirs[*]} " in
  *" $cargo_dir "*) ;; # a distribution's cargo: its links are in the farm
  *) path=$path:$cargo_dir ;;
esac

status=0
env -u PYTHONPATH -u PYTHONHOME -u SPARGIO_REQUIRE_PEERS PATH="$path" "$@" || status=$?
exit "$status"
