#!/bin/sh
# bench/cache/run.sh BIN_DIR [-n STEPS] [-r RUNS] — a build restored from a
# shared cache (a real nginx, Bazel's HTTP cache protocol) against the same
# build run, each on an empty store (cache.py says how). Needs nginx (its
# dav module: Debian's nginx package) and BIN_DIR/bench/bench_engine.
# `make bench` calls it as `bench/cache/run.sh bin`.
set -eu
if [ $# -lt 1 ]; then
	echo "usage: bench/cache/run.sh BIN_DIR [-n STEPS] [-r RUNS]" >&2
	exit 2
fi
exec python3 -u "$(dirname "$0")/cache.py" "$@"
