#!/bin/sh
# bench/store/run.sh BIN_DIR — run the blob store benchmark ($BIN_DIR/bench/bench_store).
#
# `make bench` calls it as `bench/store/run.sh bin`. Scratch data goes to a
# fresh folder under $KILN_BENCH_DIR (default ${TMPDIR:-/tmp}), which must be
# on the file system you want measured; it is removed at the end.
#
# Sizes (environment; defaults in brackets; a quick run:
#   KILN_BENCH_REPS=3 KILN_BENCH_BIG_MB=256 KILN_BENCH_FSYNC_REPS=0 bench/store/run.sh bin):
#   KILN_BENCH_REPS [5]           runs of every timed case (median and min–max)
#   KILN_BENCH_BIG_MB [1024]      size of the put-by-move / put-by-copy file
#   KILN_BENCH_FSYNC_REPS [3]     runs of the big KILN_DURABLE_FSYNC rows (0: skip)
#   KILN_BENCH_SMALL_FSYNC [2000] 4 KiB puts per run, KILN_DURABLE_FSYNC
#   KILN_BENCH_SMALL_NONE [20000] 4 KiB puts per run, KILN_DURABLE_NONE
#   KILN_BENCH_INDEX_N [100000]   index entries
#   KILN_BENCH_GETS [500000]      random index gets per run
#   KILN_BENCH_VERBOSE [0]        1: print every run's figure to stderr
set -eu

if [ $# -ne 1 ]; then
	echo "usage: bench/store/run.sh BIN_DIR" >&2
	exit 2
fi
exe=$1/bench/bench_store
if [ ! -x "$exe" ]; then
	echo "run.sh: $exe is not built (make $exe)" >&2
	exit 2
fi
for tool in xxh128sum cp; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "run.sh: needs $tool on PATH (Debian: scripts/ensure-deps bench)" >&2
		exit 2
	fi
done

scratch=$(mktemp -d "${KILN_BENCH_DIR:-${TMPDIR:-/tmp}}/kiln-bench-store.XXXXXX")
cleanup() {
	chmod -R u+w "$scratch" 2>/dev/null || true
	rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$exe" "$scratch"
