#!/usr/bin/env bash
# tests/run.sh BIN_DIR — run every unit test (BIN_DIR/tests/*), each fuzz
# target named in $FUZZ_TARGETS for FUZZ_QUICK seconds, and every
# end-to-end bats file (tests/e2e/*.bats, driving BIN_DIR/kiln and
# BIN_DIR/kilnd, named by $KILN and $KILND), each in TAP form, and end
# with one plain line: "N passed, N failed".
#
# Suites run side by side, KILN_TEST_JOBS at a time (default: the number
# of cores plus one; most suites wait on the daemon more than they
# compute). Each writes its TAP to a log of its own; a suite's summary
# line (with its seconds) and any failure details are printed in a fixed
# order (units, fuzz, e2e, each sorted by name) as soon as the suites
# before it have ended, so the output reads the same however the runs
# interleaved. The fuzz targets and the slowest e2e suites start first.
# Suites share nothing: each case of a bats file has its own temp dir
# (bats), its own ports (free_port in daemon_helpers.bash) and its own
# daemon; each suite its own $XDG_CONFIG_HOME.
#
# KILN_VALGRIND=1 runs the unit tests under valgrind. TESTS="glob"
# filters (e.g. TESTS='e2e/live' or TESTS='unit/*'); TESTS="glob glob
# ..." (space-separated) runs what matches any of them. KILN_TSAN=1 (make
# tsan, BIN_DIR built with -fsanitize=thread): every process of a suite
# writes its ThreadSanitizer reports into that suite's folder, and a
# suite during which a report appears fails, naming the file and showing
# it (KILN_TSAN_KEEP=DIR keeps them). KILN_TEST_JOBS=1
# runs one suite at a time. KILN_WAIT is how long the e2e tests wait
# for a condition before failing (60 s; daemon_helpers.bash).
set -u
bindir=${1:-bin/asan}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
passed=0
failed=0
skipped=0
failures=""
log=$(mktemp -d "${TMPDIR:-/tmp}/kiln-test-log.XXXXXX")
trap 'rm -rf "$log"' EXIT
trap 'kill $(jobs -p) 2>/dev/null; exit 130' INT TERM
ncores=$(nproc 2>/dev/null || echo 2)
njobs=${KILN_TEST_JOBS:-$((ncores + 1))}
[ "$njobs" -ge 1 ] 2>/dev/null || njobs=1

# count_tap NAME FILE STATUS SECONDS: add a suite's TAP results to the totals.
count_tap() {
	name=$1 file=$2 status=$3 secs=$4
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
	if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ] && { [ -z "$plan" ] || [ $((ok + bad + skip)) -ge "${plan:-0}" ]; }; then
		failed=$((failed + 1))
		echo "  FAIL $name: exited with status $status"
	fi
	if [ "$status" -ne 0 ] || [ "$bad" -ne 0 ]; then
		failures="$failures $name"
		sed 's/^/    | /' "$file" | grep -v '^    | ok ' | tail -n 40
	fi
	printf '%-28s %3d ok, %d failed, %d skipped %5ds\n' "$name" "$ok" "$bad" "$skip" "$secs"
}

# tsan_check NAME I: fail suite NAME (number I) if any of its processes
# wrote a ThreadSanitizer report.
tsan_check() {
	[ "${KILN_TSAN:-0}" = 1 ] || return 0
	reports=$(ls "$log/tsan/$2" 2>/dev/null)
	[ -n "$reports" ] || return 0
	n=$(echo "$reports" | wc -l)
	failed=$((failed + 1))
	case " $failures " in *" $1 "*) ;; *) failures="$failures $1" ;; esac
	echo "  FAIL $1: $n ThreadSanitizer report file(s):"
	for r in $reports; do
		echo "    == $r"
		sed 's/^/    | /' "$log/tsan/$2/$r" | head -n 80
		if [ -n "${KILN_TSAN_KEEP:-}" ]; then
			mkdir -p "$KILN_TSAN_KEEP"
			cp "$log/tsan/$2/$r" "$KILN_TSAN_KEEP/$(echo "$1" | tr / _).$r"
		fi
	done
}

# The binaries under test, for the end-to-end tests and for unit tests that
# start a real daemon (test_libkiln).
case $bindir in
/*) abs=$bindir ;;
*) abs=$top/$bindir ;;
esac
export KILN="$abs/kiln"
export KILND="$abs/kilnd"
export KILN_TOP="$top"
export KILN_CHECK_COUNTS=1   # kiln build fails when its summary disagrees with its step events
# Known leaks inside Debian's libraries, each explained in the file.
lsan="suppressions=$top/tests/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

tsan_opts=""
if [ "${KILN_TSAN:-0}" = 1 ]; then
	# report every race of a process (not only its first), make it exit
	# non-zero at the end, and write to the suite's folder (log_path.PID),
	# whoever started it (a kilnd auto-started by kiln has no terminal)
	tsan_opts="halt_on_error=0:exitcode=66:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
	[ -f "$top/tests/tsan.supp" ] && tsan_opts="suppressions=$top/tests/tsan.supp:$tsan_opts"
fi

vg=""
if [ "${KILN_VALGRIND:-0}" = 1 ]; then
	vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
fi

# The suites, in the order their results are printed: names[i] and the
# kind of run kinds[i] with its argument args[i].
names=() kinds=() args=()
add() {
	local pat hit=0
	set -f
	for pat in ${TESTS:-*}; do
		case "$1" in $pat) hit=1 ;; esac
	done
	set +f
	[ "$hit" = 1 ] || return 0
	names+=("$1") kinds+=("$2") args+=("$3")
}
for t in "$bindir"/tests/*; do
	[ -x "$t" ] && add "unit/$(basename "$t")" unit "$t"
done
for t in ${FUZZ_TARGETS:-}; do
	add "fuzz/$t" fuzz "$t"
done
for f in tests/e2e/*.bats; do
	[ -f "$f" ] && add "e2e/$(basename "$f" .bats)" e2e "$f"
done

# No suite may run for ever: one hung case (a client waiting on a
# daemon that is gone) used to hold the whole run until CI's limit.
suite_limit=${KILN_SUITE_LIMIT:-1200}

# run_one I: run suite I, its TAP into $log/I.out, then its exit status
# and seconds into $log/I.rc (written last: its presence means done).
# Every suite has its own config folder: kilnd reads the user's settings
# ($XDG_CONFIG_HOME/kiln/config.yaml), never the tester's, whose shared
# cache would change what tests see.
run_one() {
	local i=$1 start=$SECONDS rc bin out=$log/$1.out
	mkdir -p "$log/$i.config"
	export XDG_CONFIG_HOME="$log/$i.config"
	if [ -n "$tsan_opts" ]; then
		mkdir -p "$log/tsan/$i"
		export TSAN_OPTIONS="log_path=$log/tsan/$i/report:$tsan_opts"
	fi
	case ${kinds[$i]} in
	unit)
		CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 10 "$suite_limit" $vg "${args[$i]}" >"$out" 2>&1
		rc=$? ;;
	fuzz)
		# each runs FUZZ_QUICK seconds from its seed corpus and counts
		# as one case (make fuzz runs them longer)
		bin=$(dirname "$bindir")/fuzz/${args[$i]}
		[ "$bindir" = "${bindir%/asan}" ] && bin=$bindir/fuzz/${args[$i]}
		if tests/fuzz.sh "$bin" "fuzz/corpus/${args[$i]}" "${FUZZ_QUICK:-15}" >"$log/$i.fz" 2>&1; then
			printf '1..1\nok 1 - %s\n' "$(cat "$log/$i.fz")" >"$out"
			rc=0
		else
			{ echo "1..1"; echo "not ok 1 - fuzzing ${args[$i]}"; sed 's/^/# /' "$log/$i.fz"; } >"$out"
			rc=1
		fi ;;
	e2e)
		LSAN_OPTIONS=$lsan timeout -k 10 "$suite_limit" bats --tap "${args[$i]}" >"$out" 2>&1
		rc=$? ;;
	esac
	# a hung case is a failure that says so, not a run that never ends
	# (timeout signals the suite's whole process group)
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		echo "not ok 999 - ${names[$i]} did not end within $suite_limit s (KILN_SUITE_LIMIT): killed; the case after the last one above hung" >>"$out"
	fi
	echo "$rc $((SECONDS - start))" >"$log/$i.rc.tmp"
	mv "$log/$i.rc.tmp" "$log/$i.rc"
}

# The start order: fuzz targets (a fixed FUZZ_QUICK seconds of a core
# each), then the e2e suites that take longest (measured on two cores),
# then everything else in print order.
slow=" e2e/sample e2e/trust e2e/cache e2e/agents e2e/ui e2e/limits e2e/build e2e/live e2e/watch e2e/enospc e2e/trace e2e/events e2e/edits e2e/daemon e2e/store_cli "
order=()
for i in "${!names[@]}"; do [ "${kinds[$i]}" = fuzz ] && order+=("$i"); done
for s in $slow; do
	for i in "${!names[@]}"; do [ "${names[$i]}" = "$s" ] && order+=("$i"); done
done
for i in "${!names[@]}"; do
	[ "${kinds[$i]}" = fuzz ] && continue
	case "$slow" in *" ${names[$i]} "*) continue ;; esac
	order+=("$i")
done

# print_ready: print, in print order, every ended suite whose
# predecessors have all been printed.
next=0
print_ready() {
	local rc secs
	while [ "$next" -lt "${#names[@]}" ] && [ -f "$log/$next.rc" ]; do
		read -r rc secs <"$log/$next.rc"
		count_tap "${names[$next]}" "$log/$next.out" "$rc" "$secs"
		tsan_check "${names[$next]}" "$next"
		next=$((next + 1))
	done
}

t0=$SECONDS
running=0
for i in "${order[@]}"; do
	while [ "$running" -ge "$njobs" ]; do
		wait -n
		running=$((running - 1))
		print_ready
	done
	run_one "$i" &
	running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
	wait -n
	running=$((running - 1))
	print_ready
done
wait
print_ready

[ -n "$failures" ] && echo "failed suites:$failures"
[ "$skipped" -gt 0 ] && echo "($skipped skipped; see the reasons above)"
echo "($((SECONDS - t0)) s, $njobs suites at a time)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
