#!/bin/sh
# tests/run.sh BIN_DIR — run every unit test (BIN_DIR/tests/*) and every
# end-to-end bats file (tests/e2e/*.bats, driving BIN_DIR/kiln and
# BIN_DIR/kilnd, named by $KILN and $KILND), each in TAP
# form, and end with one plain line: "N passed, N failed".
# KILN_VALGRIND=1 runs the unit tests under valgrind. TESTS="glob" filters.
set -u
bindir=${1:-bin/asan}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
passed=0
failed=0
skipped=0
failures=""
log=$(mktemp -d "${TMPDIR:-/tmp}/kiln-test-log.XXXXXX")
trap 'rm -rf "$log"' EXIT INT TERM

# count_tap NAME FILE STATUS: add a suite's TAP results to the totals.
count_tap() {
	name=$1 file=$2 status=$3
	ok=$(grep '^ok ' "$file" | grep -vic '# skip')
	skip=$(grep -Eic '^(not )?ok .*# skip' "$file")
	bad=$(grep '^not ok ' "$file" | grep -vic '# skip')
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$file" | head -n 1)
	passed=$((passed + ok))
	failed=$((failed + bad))
	skipped=$((skipped + skip))
	grep '^not ok ' "$file" | grep -vi '# skip' | while read -r line; do echo "  FAIL $name: $line"; done
	if [ -n "$plan" ] && [ $((ok + bad + skip)) -lt "$plan" ]; then
		missing=$((plan - ok - bad - skip))
		failed=$((failed + missing))
		echo "  FAIL $name: $missing case(s) never reported (crash?)"
	fi
	if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ] && [ -z "$plan" -o $((ok + bad + skip)) -ge "${plan:-0}" ]; then
		failed=$((failed + 1))
		echo "  FAIL $name: exited with status $status"
	fi
	if [ "$status" -ne 0 ] || [ "$bad" -ne 0 ]; then
		failures="$failures $name"
		sed 's/^/    | /' "$file" | grep -v '^    | ok ' | tail -n 40
	fi
	printf '%-28s %3d ok, %d failed, %d skipped\n' "$name" "$ok" "$bad" "$skip"
}

# The binaries under test, for the end-to-end tests and for unit tests that
# start a real daemon (test_libkiln).
case $bindir in
/*) abs=$bindir ;;
*) abs=$top/$bindir ;;
esac
export KILN="$abs/kiln"
export KILND="$abs/kilnd"
# kilnd reads the user's own settings ($XDG_CONFIG_HOME/kiln/config.yaml):
# never the tester's, whose shared cache would change what tests see
mkdir -p "$log/config"
export XDG_CONFIG_HOME="$log/config"

vg=""
if [ "${KILN_VALGRIND:-0}" = 1 ]; then
	vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
fi

for t in "$bindir"/tests/*; do
	[ -x "$t" ] || continue
	name=unit/$(basename "$t")
	case "$name" in ${TESTS:-*}) ;; *) continue ;; esac
	CMOCKA_MESSAGE_OUTPUT=TAP $vg "$t" >"$log/out" 2>&1
	count_tap "$name" "$log/out" $?
done

# Fuzz targets: each runs FUZZ_QUICK seconds from its seed corpus and
# counts as one case (make fuzz runs them longer).
for t in ${FUZZ_TARGETS:-}; do
	name=fuzz/$t
	case "$name" in ${TESTS:-*}) ;; *) continue ;; esac
	bin=$(dirname "$bindir")/fuzz/$t
	[ "$bindir" = "${bindir%/asan}" ] && bin=$bindir/fuzz/$t
	if tests/fuzz.sh "$bin" "fuzz/corpus/$t" "${FUZZ_QUICK:-15}" >"$log/fz" 2>&1; then
		printf '1..1\nok 1 - %s\n' "$(cat "$log/fz")" >"$log/out"
		count_tap "$name" "$log/out" 0
	else
		{ echo "1..1"; echo "not ok 1 - fuzzing $t"; sed 's/^/# /' "$log/fz"; } >"$log/out"
		count_tap "$name" "$log/out" 1
	fi
done

export KILN_TOP="$top"
export KILN_CHECK_COUNTS=1   # kiln build fails when its summary disagrees with its step events
# Known leaks inside Debian's libraries, each explained in the file.
export LSAN_OPTIONS="suppressions=$top/tests/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
for f in tests/e2e/*.bats; do
	[ -f "$f" ] || continue
	name=e2e/$(basename "$f" .bats)
	case "$name" in ${TESTS:-*}) ;; *) continue ;; esac
	bats --tap "$f" >"$log/out" 2>&1
	count_tap "$name" "$log/out" $?
done

[ -n "$failures" ] && echo "failed suites:$failures"
[ "$skipped" -gt 0 ] && echo "($skipped skipped; see the reasons above)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
