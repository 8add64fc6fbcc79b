#!/bin/sh
# bench/trace/run.sh BIN_DIR [--runs R] [-n N] — the overhead of kiln's
# file-access tracing ($BIN_DIR/libkilntrace.so) on a tool, measured by
# $BIN_DIR/bench/bench_trace: the same command untraced and traced
# (LD_PRELOAD, KILN_TRACE_FILE), alternating, medians and their ratio.
# Cases: a tool opening N (10,000) small files (target ratio <= 1.15),
# cp of one small file (what tracing adds to a short process's start and
# end, per run: the bench/engine steps' tool), and glslangValidator on a
# generated shader (target <= 1.05; skipped when glslangValidator is not
# on PATH — Debian: glslang-tools).
#
# `make bench` calls it as `bench/trace/run.sh bin`. Files go to a fresh
# folder under $KILN_BENCH_DIR (default ${TMPDIR:-/tmp}), removed at the end.
set -eu

if [ $# -lt 1 ]; then
	echo "usage: bench/trace/run.sh BIN_DIR [--runs R] [-n N]" >&2
	exit 2
fi
bin=$1
shift
exe=$bin/bench/bench_trace
shim=$bin/libkilntrace.so
for f in "$exe" "$shim"; do
	if [ ! -e "$f" ]; then
		echo "run.sh: $f is not built (make $f)" >&2
		exit 2
	fi
done
case $shim in /*) ;; *) shim=$(pwd)/$shim ;; esac
glsl=
command -v glslangValidator >/dev/null 2>&1 && glsl=--glsl

scratch=$(mktemp -d "${KILN_BENCH_DIR:-${TMPDIR:-/tmp}}/kiln-bench-trace.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
trap 'exit 130' INT TERM

echo "== file-access tracing: untraced vs traced ($(nproc) cores; $(uname -r))"
"$exe" --shim "$shim" $glsl "$@" "$scratch"
