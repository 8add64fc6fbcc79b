#!/bin/sh
# bench/proto/run.sh BIN_DIR — kilnd over ipc:// against bare nng, in one
# run ($BIN_DIR/bench/bench_proto with $BIN_DIR/kilnd): status round-trip
# latency (median, p99) and blob get throughput of a 256 MiB blob, with the
# ratios the project targets (status <= 2x bare; get >= 0.7 of bare).
#
# `make bench` calls it as `bench/proto/run.sh bin`. Sizes (environment):
#   KILN_BENCH_ROUND_TRIPS [5000]  status round trips (and as many echoes)
#   KILN_BENCH_REPS [9]            timed transfers of each kind (median)
#   KILN_BENCH_BLOB_MIB [256]      the blob's size
# Scratch data goes under ${TMPDIR:-/tmp} and is removed at the end.
set -eu

if [ $# -ne 1 ]; then
	echo "usage: bench/proto/run.sh BIN_DIR" >&2
	exit 2
fi
exe=$1/bench/bench_proto
for f in "$exe" "$1/kilnd"; do
	if [ ! -x "$f" ]; then
		echo "run.sh: $f is not built (make $f)" >&2
		exit 2
	fi
done
exec "$exe" "$1/kilnd" "${KILN_BENCH_ROUND_TRIPS:-5000}" \
	"${KILN_BENCH_REPS:-9}" "${KILN_BENCH_BLOB_MIB:-256}"
