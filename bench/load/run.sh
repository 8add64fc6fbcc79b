#!/bin/sh
# bench/load/run.sh BIN_DIR — run the description loader benchmark ($BIN_DIR/bench/bench_load).
#
# `make bench` calls it as `bench/load/run.sh bin`. The generated project
# goes to a fresh folder under $KILN_BENCH_DIR (default ${TMPDIR:-/tmp}),
# which must be on the file system you want measured; it is removed at the
# end. ninja is a peer when it is on PATH (Debian: scripts/ensure-deps bench);
# without it, its row says it was skipped.
#
# Sizes (environment; defaults in brackets; a quick run:
#   KILN_BENCH_REPS=3 KILN_BENCH_LOAD_N=10000 bench/load/run.sh bin):
#   KILN_BENCH_LOAD_N [100000]    source files in the generated project
#   KILN_BENCH_REPS [5]           timed runs of kiln and of every peer
#   KILN_BENCH_VERBOSE [0]        1: print every run's figure to stderr
set -eu

if [ $# -ne 1 ]; then
	echo "usage: bench/load/run.sh BIN_DIR" >&2
	exit 2
fi
exe=$1/bench/bench_load
if [ ! -x "$exe" ]; then
	echo "run.sh: $exe is not built (make $exe)" >&2
	exit 2
fi
if ! command -v find >/dev/null 2>&1; then
	echo "run.sh: needs find on PATH" >&2
	exit 2
fi

scratch=$(mktemp -d "${KILN_BENCH_DIR:-${TMPDIR:-/tmp}}/kiln-bench-load.XXXXXX")
cleanup() {
	rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$exe" "$scratch"
