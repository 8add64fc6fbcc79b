#!/usr/bin/env bats
# The scheduler's estimates end to end: each step's last duration is kept
# in .kiln/durations beside the store, so that a first build after the
# store is gone (rm -rf .kiln/store) still knows them; `kiln build --json`
# shows what each step was expected to take when it started
# (estimate_ms); a damaged history is ignored with a line in the log.

bats_require_minimum_version 1.5.0

load daemon_helpers

write_project() {
	mkdir -p src
	printf 'alpha\n' >src/a.txt
	printf 'bravo\n' >src/b.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - match: "src/*.txt"
    url: "copy/${match.name}.txt"
    tool: copy
YAML
}

# field URL NAME: NAME of URL's step event in $output.
field() {
	json_field "$2" "$(printf '%s\n' "$output" | grep '"event":"step"' | grep "\"url\":\"$1\"")"
}

@test "a step's last duration survives rm -rf .kiln/store and is the next first build's estimate" {
	write_project
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	da=$(field copy/a.txt duration_ms)
	db=$(field copy/b.txt duration_ms)
	[ -n "$da" ] && [ -n "$db" ]
	"$KILN" stop
	head -n 1 .kiln/durations | grep -qx '# kiln durations 1'
	grep -q "	copy/a.txt\$" .kiln/durations
	rm -rf .kiln/store
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	# both ran again (no store), each expected to take its first run's time
	[ "$(field copy/a.txt result)" = ran ]
	[ "$(field copy/a.txt estimate_ms)" = "$da" ] ||
		{ echo "a: estimate $(field copy/a.txt estimate_ms), last run $da"; false; }
	[ "$(field copy/b.txt estimate_ms)" = "$db" ] ||
		{ echo "b: estimate $(field copy/b.txt estimate_ms), last run $db"; false; }
}

@test "a damaged .kiln/durations is ignored with a log line, and rewritten" {
	write_project
	mkdir -p .kiln
	printf 'not a history\n\001\002' >.kiln/durations
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	# nothing known: every step started with the default estimate
	[ "$(field copy/a.txt estimate_ms)" = "100.0" ]
	grep -q '\.kiln/durations:1: not a kiln durations file' .kiln/kilnd.log ||
		{ cat .kiln/kilnd.log; false; }
	"$KILN" stop
	head -n 1 .kiln/durations | grep -qx '# kiln durations 1'
	[ "$(grep -c "	copy/" .kiln/durations)" -eq 2 ]
}

@test "after rm -rf .kiln/store the progress still knows each step's time: StepStarted's expected_ns comes from .kiln/durations" {
	write_project
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	"$KILN" stop
	rm -rf .kiln/store
	"$KILN" status >/dev/null
	# kiln events writes outside the project: a file written in it is an edit
	"$KILN" events --json --timeout 60 >"$BATS_TEST_TMPDIR/ev.out" 2>"$BATS_TEST_TMPDIR/ev.err" 3>&- &
	ev=$!
	wait_for eval '[ "$(status_field subscribers)" = 1 ]'
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	"$KILN" stop >/dev/null
	wait "$ev" || { cat "$BATS_TEST_TMPDIR/ev.err"; false; }
	for u in copy/a.txt copy/b.txt; do
		line=$(grep '"type":"started"' "$BATS_TEST_TMPDIR/ev.out" | grep "\"url\":\"$u\"")
		ns=$(json_field expected_ns "$line")
		[ -n "$ns" ] && [ "$ns" -gt 0 ] || { echo "$u: $line"; cat "$BATS_TEST_TMPDIR/ev.out"; false; }
	done
}
