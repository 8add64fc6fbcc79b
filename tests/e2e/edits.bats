#!/usr/bin/env bats
# edits.bats — files edited while a build runs (issue 23, "edits during a
# build"): a running tool whose input changed is cancelled and runs again,
# a step the build already decided is decided again within that build, and
# no output or record is ever stale. One-shot `kiln build`s, no kiln watch:
# the build itself must get it right.
#
# The tools log each run's start and end outside the project ($RUNS), so
# that a cancelled run shows as a start without its end.

bats_require_minimum_version 1.5.0

load daemon_helpers

# edit_project SLEEP: a slow step (sleeps SLEEP seconds, then copies
# src/slow.txt) and a fast one (copies src/fast.txt), and a step after the
# fast one (@fast.txt, copied).
edit_project() {
	RUNS="$BATS_TEST_TMPDIR/runs.log"
	: >"$RUNS"
	mkdir -p src
	printf 'slow1\n' >src/slow.txt
	printf 'fast1\n' >src/fast.txt
	cat >kiln.yaml <<YAML
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  slow:
    shell: true
    trace: false   # it writes \$RUNS, outside its scratch folder
    run: 'echo "start \${in}" >>$RUNS; sleep $1; cat "\${in}" >"\${out}"; echo "end \${in}" >>$RUNS'
  copy: { run: [cp, "\${in}", "\${out}"] }
assets:
  - url: slow.txt
    tool: slow
    inputs: [src/slow.txt]
  - url: fast.txt
    tool: copy
    inputs: [src/fast.txt]
  - url: after.txt
    tool: copy
    inputs: ["@fast.txt"]
YAML
}

# save FILE TEXT: an editor's atomic save (a temp file renamed over).
save() {
	printf '%s\n' "$2" >"$1.tmp"
	mv "$1.tmp" "$1"
}

output_is() {
	[ -f "build/pc/$1" ] && [ "$(cat "build/pc/$1")" = "$2" ]
}

# subscribed_more N: the daemon reports more than N subscriptions (a
# running kiln build holds one of its own).
subscribed_more() {
	[ "$(status_field subscribers)" -gt "$1" ]
}

# first_run_sleeps: slow.txt's tool (edit_project 30) sleeps its 30 s only
# while $BATS_TEST_TMPDIR/second does not exist, looked at before its start
# line is written: a run that logged its start has made its choice (it
# used to look after, and beside stress-ng the first run saw the file
# the test created once it had seen that start, and ended by itself).
first_run_sleeps() {
	python3 - "$BATS_TEST_TMPDIR/second" <<'PY'
import sys
p = 'kiln.yaml'
y = open(p).read()
start = y[y.index('echo "start'):y.index('sleep 30;') + len('sleep 30;')]
log = start[:start.index(';') + 1]
y = y.replace(start, 'if [ -e "%s" ]; then %s else %s sleep 30; fi;' % (sys.argv[1], log, log))
open(p, 'w').write(y)
PY
	grep -q 'else echo "start' kiln.yaml || { cat kiln.yaml; false; }
}

starts() {
	grep -c "^start" "$RUNS" || true
}

@test "an edit to a running tool's input cancels the tool; the step runs again and the build ends with the new content" {
	# the first run sleeps until it is cancelled (a fixed 5 s could end
	# before a loaded machine's daemon saw the edit); the second ends
	edit_project 30
	first_run_sleeps
	"$KILN" build -j 2 >out 2>&1 &
	bpid=$!
	wait_for grep -q '^start' "$RUNS"
	touch "$BATS_TEST_TMPDIR/second"
	save src/slow.txt slow2
	wait "$bpid" || { cat out; false; }
	output_is slow.txt slow2 || { cat build/pc/slow.txt out "$RUNS"; false; }
	# the first run was killed (no end), the second ran to its end
	[ "$(printf 'start src/slow.txt\nstart src/slow.txt\nend src/slow.txt')" = "$(cat "$RUNS")" ] ||
		{ cat "$RUNS"; false; }
	grep -q 'cancelling it' .kiln/kilnd.log
	# recorded under the new content's key: the next build reuses it
	run "$KILN" build
	[ "$status" -eq 0 ]
	[ "$(starts)" -eq 2 ]
}

@test "a tool that ignores SIGTERM is killed after the grace period and its step runs again" {
	edit_project 30
	sed -i 's/echo "start/trap "" TERM; echo "start/' kiln.yaml
	# only the first run sleeps long: the second must end
	first_run_sleeps
	"$KILN" build -j 2 >out 2>&1 &
	bpid=$!
	wait_for grep -q '^start' "$RUNS"
	touch "$BATS_TEST_TMPDIR/second"
	save src/slow.txt slow2
	wait "$bpid" || { cat out; false; }
	output_is slow.txt slow2
	[ "$(starts)" -eq 2 ]
	[ "$(grep -c '^end' "$RUNS")" -eq 1 ]
}

@test "an edit to a file the running build already decided is rebuilt within that build, and what depends on it" {
	# slow.txt runs until the test lets it end (a fixed 2 s was not
	# always longer than fast.txt and after.txt took on a loaded machine)
	edit_project 2
	sed -i "s|sleep 2;|while [ ! -e $BATS_TEST_TMPDIR/go ]; do sleep 0.1; done;|" kiln.yaml
	grep -q 'go ]' kiln.yaml
	"$KILN" build -j 2 >out 2>&1 &
	bpid=$!
	# fast.txt and after.txt are done while slow.txt waits
	wait_for output_is after.txt fast1
	running "$bpid"
	EV="$BATS_TEST_TMPDIR/ev.out"
	subs=$(status_field subscribers)
	"$KILN" events --timeout 60 >"$EV" 2>&1 &
	ev=$!
	wait_for subscribed_more "$subs"
	save src/fast.txt fast2
	# the daemon has seen the edit (its changed event comes after the
	# build's edits were queued) before slow.txt may end
	wait_for grep -q ' changed .*src/fast.txt' "$EV" || { cat "$EV"; kill "$ev"; false; }
	kill "$ev"
	touch "$BATS_TEST_TMPDIR/go"
	wait "$bpid" || { cat out; false; }
	# the build's end reflects the edit: no second build needed
	output_is fast.txt fast2 || { cat build/pc/fast.txt; cat .kiln/kilnd.log; false; }
	output_is after.txt fast2
	output_is slow.txt slow1
	grep -q 'files were edited while it ran' .kiln/kilnd.log
	# and the next build finds everything up to date
	run "$KILN" build --json
	[ "$status" -eq 0 ]
	! grep -q '"result":"ran"' <<<"$output" || false
}

@test "50 edits at random moments of a running step: never a stale output, never a stale record" {
	edit_project 0.2
	run "$KILN" build
	[ "$status" -eq 0 ]
	for i in $(seq 2 51); do
		"$KILN" build -j 2 slow.txt >out 2>&1 &
		bpid=$!
		# anywhere from before the tool starts to after it ended
		sleep "0.$(printf '%02d' $((RANDOM % 35)))"
		save src/slow.txt "slow$i"
		wait "$bpid" || { cat out; false; }
		# the build may have ended before the edit reached it: the next
		# one must then build it, and the output never shows an old text
		# once a build that began after the edit ended
		run "$KILN" build slow.txt
		[ "$status" -eq 0 ]
		output_is slow.txt "slow$i" || { echo "edit $i"; cat build/pc/slow.txt "$RUNS"; false; }
	done
	# every record is right: going back to any earlier text reuses (or
	# rebuilds) exactly that text's output
	for i in 7 23 42 51; do
		save src/slow.txt "slow$i"
		run "$KILN" build slow.txt
		[ "$status" -eq 0 ]
		output_is slow.txt "slow$i" || { echo "back to $i"; cat build/pc/slow.txt; false; }
	done
	# and the cancellations were real: more starts than ends
	[ "$(starts)" -ge "$(grep -c '^end' "$RUNS")" ]
}

@test "a description edit reruns only the steps it changed; a changed command is never taken as up to date" {
	mkdir -p src
	for i in 1 2 3; do printf 'in%s\n' "$i" >"src/$i.txt"; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  tag: { shell: true, run: 'printf "%s:" "${param.t}" >"${out}"; cat "${in}" >>"${out}"' }
assets:
  - url: one.txt
    tool: tag
    inputs: [src/1.txt]
    params: { t: a }
  - url: two.txt
    tool: copy
    inputs: [src/2.txt]
  - url: three.txt
    tool: copy
    inputs: [src/3.txt]
YAML
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/pc/one.txt)" = "a:in1" ]
	# the same input files, another param: the step's command changed,
	# nothing its quick fingerprint looks at did
	sed -i 's/params: { t: a }/params: { t: b }/' kiln.yaml
	run "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(grep -c '"result":"ran"' <<<"$output")" -eq 1 ] || { echo "$output"; false; }
	grep -q '"url":"one.txt".*"result":"ran"' <<<"$output"
	[ "$(cat build/pc/one.txt)" = "b:in1" ]
	# a new asset, and an edit that changes nothing for the others
	printf '  - url: four.txt\n    tool: copy\n    inputs: [src/1.txt]\n' >>kiln.yaml
	run "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(grep -c '"result":"ran"' <<<"$output")" -eq 1 ] || { echo "$output"; false; }
	[ "$(cat build/pc/four.txt)" = in1 ]
	# an output of a step the reload kept, edited in build/: put back
	printf 'x\n' >build/pc/two.txt
	touch kiln.yaml
	run "$KILN" build
	[ "$status" -eq 0 ]
	[ "$(cat build/pc/two.txt)" = in2 ]
}
