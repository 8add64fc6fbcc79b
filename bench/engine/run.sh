#!/bin/sh
# bench/engine/run.sh BIN_DIR [-j JOBS] [-n N[,N...]] [--big] [--rules R]
# [--rules-n STEPS] [--rules-only] — run the build engine benchmark
# ($BIN_DIR/bench/bench_engine): `$BIN_DIR/kiln build` against ninja, GNU
# make and a floor on the same generated graph; then the rules × files
# case: R rules over the same files, `kiln check` and `kiln build -n`
# against ninja and make loading the same graph.
#
# `make bench` calls it as `bench/engine/run.sh bin`. The generated projects
# go to a fresh folder under $KILN_BENCH_DIR (default ${TMPDIR:-/tmp}),
# which must be on the file system you want measured; it is removed at the
# end, after stopping any kilnd left running there. ninja is a peer when it
# is on PATH (Debian: scripts/ensure-deps bench). kiln failing or missing
# `kiln build` is not an error: its columns say why.
#
# Options (or environment, for `make bench`; defaults in brackets):
#   -j JOBS        KILN_BENCH_JOBS [nproc]        the -j of every side
#   -n N[,N...]    KILN_BENCH_ENGINE_N [1000,10000] sizes (sources), 10..100000
#   --big          KILN_BENCH_ENGINE_BIG=1        also N=100,000 for no-op, one
#                                                 change and restore; its full
#                                                 builds run once to set up
#                                                 (ninja ~5 min, make more)
#                  KILN_BENCH_VERBOSE [0]         1: every run's figure on stderr
#                  KILN_BENCH_MATERIALIZE []      kiln.yaml's materialize: copy
#                                                 or hardlink (none: kiln's
#                                                 default, copy)
#                  KILN_BENCH_ENGINE_BIG_N [100000] --big's N (to try --big fast)
#   --rules R      KILN_BENCH_ENGINE_RULES [4]    rules × files: rules over the
#                                                 same files
#   --rules-n S    KILN_BENCH_ENGINE_RULES_N [100000] ... and their steps
#   --rules-only                                  that case alone (~1 minute)
# The default run takes 2-3 minutes on 2 cores; a quick one:
#   bench/engine/run.sh bin -n 1000
# To look at the generated projects (kiln.yaml, build.ninja, Makefile):
#   mkdir /tmp/p && bin/bench/bench_engine --kiln bin/kiln -n 100 --gen-only /tmp/p
set -eu

if [ $# -lt 1 ]; then
	echo "usage: bench/engine/run.sh BIN_DIR [-j JOBS] [-n N[,N...]] [--big]" >&2
	exit 2
fi
bin=$1
shift
exe=$bin/bench/bench_engine
if [ ! -x "$exe" ]; then
	echo "run.sh: $exe is not built (make $exe)" >&2
	exit 2
fi
for tool in cp sh cat make rm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "run.sh: needs $tool on PATH" >&2
		exit 2
	fi
done

# A short path: kilnd's socket lives in <project>/.kiln/ and a unix socket
# path may not pass 107 bytes.
scratch=$(mktemp -d "${KILN_BENCH_DIR:-${TMPDIR:-/tmp}}/kiln-bench-engine.XXXXXX")
cleanup() {
	for pidfile in "$scratch"/*/.kiln/kilnd.pid; do
		[ -f "$pidfile" ] || continue
		pid=$(cat "$pidfile" 2>/dev/null || true)
		if [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = kilnd ]; then
			kill "$pid" 2>/dev/null || true
		fi
	done
	rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$exe" --kiln "$bin/kiln" "$@" "$scratch"
