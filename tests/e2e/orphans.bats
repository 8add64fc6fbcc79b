#!/usr/bin/env bats
# Tools left running by a killed daemon (issue 20): after kill -9 of kilnd
# in the middle of a step, nothing the old run started may write into the
# next daemon's build. The direct child dies with its daemon (its
# parent-death signal), what it started is swept at the next daemon's
# start, and no scratch path is handed out twice across daemon runs.
#
# The timings only decide how badly an unfixed daemon fails: a fixed one
# gives the same output whenever the kill lands. Each case waits for the
# tool to be inside its sleep (pgrep on a sleep duration no other test
# uses) before killing the daemon.

bats_require_minimum_version 1.5.0

load daemon_helpers

# write_project TOOL_COMMAND: one asset out.txt made from src/a.txt
# ("hello") by a shell tool running TOOL_COMMAND.
write_project() {
	mkdir -p src
	printf 'hello\n' >src/a.txt
	cat >kiln.yaml <<YAML
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  t: { shell: true, run: "$1" }
assets:
  - url: out.txt
    tool: t
    inputs: [src/a.txt]
YAML
}

# sleepers SECONDS: the pids of the processes running exactly
# `sleep SECONDS`, one per line.
sleepers() {
	pgrep -f "^sleep $1\$" || true
}

# sleeping SECONDS: some process runs `sleep SECONDS`.
sleeping() {
	[ -n "$(sleepers "$1")" ]
}

# kill_daemon_in_sleep SECONDS...: start `kiln build` in the background,
# wait until the tool's processes sleep each of SECONDS, 0.7 s more, then
# kill -9 the daemon and wait for the client. OLD is the sleeping pids of that run.
kill_daemon_in_sleep() {
	local d
	"$KILN" build >first.log 2>&1 &
	local client=$!
	OLD=""
	for d in "$@"; do
		wait_for sleeping "$d"
	done
	for d in "$@"; do
		OLD="$OLD $(sleepers "$d")"
	done
	# kept: where in the tool's sleep the kill lands (its rest then
	# overlaps the next daemon's build), not a wait for something
	sleep 0.7
	kill -9 "$(daemon_pid)"
	wait "$client" || true
}

# gone PID...: none of these processes is alive.
gone() {
	local p
	for p in "$@"; do
		running "$p" && return 1
	done
	return 0
}

# expect_out TEXT: build/default/out.txt holds exactly TEXT.
expect_out() {
	local got
	got=$(cat build/default/out.txt)
	[ "$got" = "$1" ] || { echo "out.txt holds:"; printf '%s\n' "$got"; echo "expected:"; printf '%s\n' "$1"; false; }
}

@test "a tool killed with its daemon does not append to the next run's output" {
	# (a sleep long enough to outlast a new daemon's start on a busy
	# machine: at 2.31 s the old tool had sometimes ended by itself, and
	# the new daemon had nothing to sweep)
	write_project "cat '\${in}' > '\${out}'; sleep 6.31; echo tail >> '\${out}'"
	kill_daemon_in_sleep 6.31
	[ "$(echo $OLD | wc -w)" -eq 1 ]
	# a new daemon, while the old run's tool would still be sleeping
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	expect_out "$(printf 'hello\ntail')"
	# what the store keeps is the same
	rm -rf build
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	expect_out "$(printf 'hello\ntail')"
	wait_for gone $OLD || { echo "still running from the old run: $OLD"; false; }
	[ -z "$(sleepers 6.31)" ] || { echo "left running: $(sleepers 6.31)"; false; }
	grep -qE 'killed [1-9][0-9]* process' .kiln/kilnd.log ||
		{ echo "no sweep line in the log:"; cat .kiln/kilnd.log; false; }
}

@test "what a tool started in the background cannot write into the next run" {
	# the tool leaves a writer (late at 2.93 s) and a plain sleep in the
	# background; both are killed with the tool's process group when it
	# ends (at 2.6 s), so a normal run never sees "late", and only the
	# killed daemon's could outlive their tool
	write_project "cat '\${in}' > '\${out}'; sh -c 'sleep 2.93; echo late >> \\\"\$0\\\"' '\${out}' & sleep 30.93 & sleep 2.6"
	kill_daemon_in_sleep 2.93 30.93
	[ "$(echo $OLD | wc -w)" -eq 2 ]
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	expect_out "hello"
	rm -rf build
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	expect_out "hello"
	# the sweep at the new daemon's start ended them, long before their time
	wait_for gone $OLD || { echo "still running from the old run: $OLD"; kill $OLD; false; }
	[ -z "$(sleepers 30.93)" ] || { echo "left running: $(sleepers 30.93)"; false; }
}

@test "the sweep leaves alone the processes of other projects" {
	write_project "cat '\${in}' > '\${out}'"
	# a process carrying another project's marker, and one carrying this
	# project's root only as a prefix of its marker
	KILN_PROJECT="$P-other" KILN_TOOL_OF="$P-other" sleep 30.71 &
	other=$!
	KILN_PROJECT="$P/sub" KILN_TOOL_OF="$P/sub" sleep 30.72 &
	prefix=$!
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	kill -0 "$other" || { echo "the sweep killed another project's process"; false; }
	kill -0 "$prefix" || { echo "the sweep killed a process of $P/sub"; false; }
	kill "$other" "$prefix"
	expect_out "hello"
}

@test "a daemon a tool started for another project is not taken for a tool by the next sweep" {
	# the tool runs `kiln status` for project B, which starts B's daemon
	mkdir -p "$BATS_TEST_TMPDIR/B"
	: >"$BATS_TEST_TMPDIR/B/kiln.yaml"
	write_project "(cd '$BATS_TEST_TMPDIR/B' && \$KILN status) >/dev/null 2>&1 || true; cat '\${in}' > '\${out}'"
	sed -i 's/^  t: { shell: true, run: \(.*\) }$/  t: { shell: true, trace: false, run: \1 }/' kiln.yaml
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; cat kiln.yaml; false; }
	bpid=$(cat "$BATS_TEST_TMPDIR/B/.kiln/kilnd.pid")
	kill -0 "$bpid"
	kill -9 "$(daemon_pid)"
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# (a killed daemon may linger a moment as a zombie: its state says)
	sleep 0.2
	kill -0 "$bpid" && [ "$(awk '{ print $3 }' "/proc/$bpid/stat")" != Z ] ||
		{ echo "project B's daemon was killed by A's sweep"; false; }
	kill -TERM "$bpid"
}
