#!/usr/bin/env bats
# A build whose client died, and tools that run too long (issue 21, part 8):
# a build no connected client wants is cancelled (its tools killed) unless
# another client's build shares its steps; a tool past its `timeout:` is
# killed and its step fails. Running tools are seen with pgrep on a sleep
# duration no other test uses.

bats_require_minimum_version 1.5.0

load daemon_helpers

# A project with a slow step (slow.txt: echo, then sleep SECONDS), a quick
# one (quick.txt), and TOOL_EXTRA added to the slow tool's mapping.
write_project() {
	local seconds=$1 extra=${2:-}
	mkdir -p src
	printf 'alpha\n' >src/a.txt
	cat >kiln.yaml <<YAML
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  slow:
    run: [sh, -c, 'echo started > "\$1.started"; sleep $seconds; cp "\$0" "\$1"', "\${in}", "\${out}"]
$extra
  copy: { run: [cp, "\${in}", "\${out}"] }
assets:
  - url: slow.txt
    tool: slow
    inputs: [src/a.txt]
  - url: quick.txt
    tool: copy
    inputs: [src/a.txt]
YAML
}

# slow_started PATTERN: the slow tool's sleep runs (pgrep -f PATTERN).
slow_started() {
	pgrep -f "$1" >/dev/null
}

@test "a build whose kiln build was killed -9 is cancelled: its tool dies, later builds finish" {
	write_project 30.57
	"$KILN" status >/dev/null
	"$KILN" build slow.txt >killed.log 2>&1 &
	client=$!
	wait_for slow_started "sleep 30.5[7]"
	kill -9 "$client"
	wait "$client" || true
	# the grace period (2 s) and the kill (SIGTERM) take a few seconds
	wait_for sh -c '! pgrep -f "sleep 30.5[7]" >/dev/null' ||
		{ echo "the orphaned build's tool still runs"; pgrep -af "sleep 30"; false; }
	grep -q 'cancelled build' .kiln/kilnd.log ||
		{ echo "no cancel in the daemon's log:"; cat .kiln/kilnd.log; false; }
	# nothing is stuck: a new build of another step finishes at once
	run timeout 20 "$KILN" build quick.txt
	[ "$status" -eq 0 ] || { echo "exit $status: $output"; false; }
	[ "$(status_field build_queue)" = "0" ]
	[ ! -e build/default/slow.txt ]
}

@test "two clients build the same slow step; one is killed: the other's build completes" {
	write_project 4.59
	"$KILND" --project . --verbose
	"$KILN" build slow.txt >first.log 2>&1 &
	first=$!
	wait_for slow_started "sleep 4.5[9]"
	"$KILN" build slow.txt >second.log 2>&1 &
	second=$!
	# the second build joins the running step; then the first client dies
	# and, 2 s later, its build is cancelled while the step still runs
	wait_for builds_started 2 || { cat .kiln/kilnd.log; false; }
	kill -9 "$first"
	wait "$first" || true
	status=0
	timeout 20 tail --pid="$second" -f /dev/null || status=$?
	[ "$status" -eq 0 ] || { echo "the second build did not end"; cat second.log; false; }
	wait "$second" || { echo "second build failed:"; cat second.log; false; }
	[ "$(cat build/default/slow.txt)" = alpha ]
}

@test "a tool past its timeout is killed and its step fails with the timeout message" {
	write_project 30.58 '    timeout: 1s'
	start=$(date +%s)
	run --separate-stderr timeout 20 "$KILN" build slow.txt
	took=$(($(date +%s) - start))
	[ "$status" -eq 1 ] || { echo "exit $status: $output $stderr"; false; }
	# not the tool's 30.58 s: anything less is the machine's speed
	[ "$took" -lt 20 ] || { echo "took $took s"; false; }
	printf '%s\n%s\n' "$output" "$stderr" |
		grep -q "slow.txt: the tool ran longer than its timeout of 1s (tool 'slow', kiln.yaml:9)" ||
		{ echo "no timeout message in: $output $stderr"; false; }
	! pgrep -f "sleep 30.5[8]" >/dev/null || false
}

@test "the project's tool_timeout applies to tools without their own" {
	write_project 30.56
	sed -i 's/^profiles:/tool_timeout: 1s\nprofiles:/' kiln.yaml
	run --separate-stderr timeout 20 "$KILN" build slow.txt
	[ "$status" -eq 1 ] || { echo "exit $status: $output $stderr"; false; }
	printf '%s\n%s\n' "$output" "$stderr" | grep -q "ran longer than its timeout of 1s" ||
		{ echo "no timeout message in: $output $stderr"; false; }
	! pgrep -f "sleep 30.5[6]" >/dev/null || false
}

@test "a bad timeout is a description error naming file:line" {
	write_project 1 '    timeout: soon'
	run "$KILN" check
	[ "$status" -eq 2 ] || { echo "exit $status: $output"; false; }
	printf '%s\n' "$output" | grep -q "^kiln.yaml:9:.*timeout.*not a duration: 'soon'" ||
		{ echo "no kiln.yaml:9 timeout error in: $output"; false; }
	write_project 1
	sed -i 's/^profiles:/tool_timeout: -3s\nprofiles:/' kiln.yaml
	run "$KILN" check
	[ "$status" -eq 2 ] || { echo "exit $status: $output"; false; }
	printf '%s\n' "$output" | grep -q "^kiln.yaml:4:.*tool_timeout.*not a duration: '-3s'" ||
		{ echo "no kiln.yaml:4 tool_timeout error in: $output"; false; }
}
