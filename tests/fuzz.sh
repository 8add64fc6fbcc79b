#!/bin/sh
# tests/fuzz.sh BINARY CORPUS_DIR SECONDS — run one libFuzzer target for a
# bounded time, starting from a copy of its seed corpus (the repository's
# corpus is never written). Exit 0 when it ran out of time without a
# crash, leak or sanitizer report; else print the report and the input.
set -u
bin=$1 corpus=$2 secs=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-fuzz-run.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$work/corpus" "$work/crash"
[ -d "$corpus" ] && cp "$corpus"/* "$work/corpus/" 2>/dev/null
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	-artifact_prefix="$work/crash/" "$work/corpus" >"$work/log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
	echo "fuzz: $(basename "$bin") failed (exit $rc):"
	grep -E 'ERROR|SUMMARY|Running|Test unit written' "$work/log" | tail -n 20
	for f in "$work"/crash/*; do
		[ -f "$f" ] || continue
		mkdir -p fuzz/crashes && cp "$f" fuzz/crashes/
		echo "input saved as fuzz/crashes/$(basename "$f"); reproduce: $bin fuzz/crashes/$(basename "$f")"
	done
	exit 1
fi
runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$work/log" | tail -n 1)
echo "fuzz: $(basename "$bin"): ${runs:-?} inputs in ${secs}s, no crash"
