#!/usr/bin/env bats
# kiln build's progress (docs/build.md, "Progress"): on a terminal (script
# gives the client a tty) one status line with done/total, the steps
# running and failed, the time elapsed, an estimate of the time left and
# the steps running longest; piped, one line per step; --quiet, failures
# and the summary only; after the build, the slowest steps.

bats_require_minimum_version 1.5.0

load daemon_helpers

write_project() {
	mkdir -p src
	for i in 1 2 3; do echo "$i" >"src/$i.txt"; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: progress
sources: [src]
profiles:
  pc:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  slow: { run: [sh, -c, 'sleep 0.5; cp "$0" "$1"', "${in}", "${out}"] }
  fail: { run: [sh, -c, "echo broken-on-purpose >&2; exit 3"] }
rules:
  - match: "src/*.txt"
    url: "c/${match.name}.txt"
    tool: copy
assets:
  - url: slow.txt
    tool: slow
    inputs: [src/1.txt]
  - url: broken
    tool: fail
    inputs: [src/2.txt]
YAML
}

# on_tty CMD...: run CMD with a terminal as its stdout (script, from
# util-linux); $output gets what it wrote, \r made newlines.
on_tty() {
	command -v script >/dev/null || skip "script (util-linux) is not installed"
	run script -qec "$*" /dev/null
	output=$(printf '%s\n' "$output" | tr '\r' '\n')
}

@test "on a terminal a status line shows done/total, running, failed, elapsed, time left and the running steps" {
	write_project
	on_tty "$KILN" build -j 2 c/1.txt c/2.txt c/3.txt slow.txt
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -qE '^.*\[[0-9]+/4\] [0-9]+ running, 0 failed, [0-9.]+s elapsed, (\?|~[0-9.]+s) left' ||
		{ echo "$output"; false; }
	# the slow step is named while it runs
	printf '%s\n' "$output" | grep -q 'running.*: .*slow.txt (' || { echo "$output"; false; }
	# no line per step on a terminal
	! printf '%s\n' "$output" | grep -q '^ran ' || false
}

@test "the time left is estimated from the durations recorded by the last build" {
	write_project
	"$KILN" build slow.txt >/dev/null
	echo changed >src/1.txt
	on_tty "$KILN" build slow.txt
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# a first run: nothing recorded, "? left"; now ~0.5 s is
	printf '%s\n' "$output" | grep -qE '1 running, 0 failed, [0-9.]+s elapsed, ~0\.[1-9][0-9]*s left: slow.txt' ||
		{ echo "$output"; false; }
}

@test "piped, one line per step and no status line" {
	write_project
	run --separate-stderr "$KILN" build c/1.txt c/2.txt
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -c '^ran c/')" -eq 2 ] || { echo "$output"; false; }
	! printf '%s\n' "$output" | grep -q 'elapsed' || false
	! printf '%s' "$output" | grep -q $'\r' || false
}

@test "--quiet prints failures and the summary only, on a terminal too" {
	write_project
	run --separate-stderr "$KILN" build -k --quiet c/1.txt c/2.txt broken
	[ "$status" -eq 1 ]
	! printf '%s\n' "$output" | grep -q '^ran ' || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -q '^FAILED broken' || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -q 'broken-on-purpose' || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -qE '^profile pc: 3 steps, 2 ran, 0 up to date, 1 failed' ||
		{ echo "$output"; false; }
	echo again >src/1.txt
	on_tty "$KILN" build -q c/1.txt
	[ "$status" -eq 0 ]
	! printf '%s\n' "$output" | grep -q 'elapsed' || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -q '^profile pc: 1 steps, 1 ran' || { echo "$output"; false; }
}

@test "the summary names the slowest steps that ran, slowest first" {
	write_project
	run --separate-stderr "$KILN" build c/1.txt c/2.txt c/3.txt slow.txt
	[ "$status" -eq 0 ]
	line=$(printf '%s\n' "$output" | grep '^slowest: ') || { echo "$output"; false; }
	[[ "$line" == "slowest: slow.txt "* ]] || { echo "$line"; false; }
	# three at most, each one that ran
	[ "$(printf '%s\n' "$line" | tr ',' '\n' | wc -l)" -eq 3 ]
	# nothing ran: no such line
	run --separate-stderr "$KILN" build c/1.txt c/2.txt c/3.txt slow.txt
	[ "$status" -eq 0 ]
	! printf '%s\n' "$output" | grep -q '^slowest' || { echo "$output"; false; }
}
