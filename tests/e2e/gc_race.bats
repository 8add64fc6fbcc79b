#!/usr/bin/env bats
# gc racing builds (issue 21): `kiln gc --grace 0s --max-age 0s` in a loop,
# from another process, while the daemon builds edited sources. Nothing
# protects a freshly put blob then but the ordering of gc's removals and
# the commits that name blobs: whatever the interleaving, no record may
# name a blob gc removed (`kiln fsck` clean), and a record gc made the
# daemon drop must not leave a step believed up to date (one more build
# makes every output again).

bats_require_minimum_version 1.5.0

load daemon_helpers

NSRC=200
ROUNDS=6

# write_sources ROUND: NSRC sources whose content is new in every round,
# so every build puts new blobs (and gc has old ones to remove).
write_sources() {
	local i
	mkdir -p src
	for i in $(seq 1 "$NSRC"); do
		printf 'round %s file %s\n%0200d\n' "$1" "$i" "$i" >"src/f$i.txt"
	done
}

write_project() {
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
	write_sources 0
}

# gc_loop STOPFILE: run gc with no grace at all until STOPFILE exists.
gc_loop() {
	while [ ! -e "$1" ]; do
		timeout 60 "$KILN" gc --grace 0s --max-age 0s >/dev/null 2>>gc.err || true
	done
}

# outputs_match: every build/ output equals its source.
outputs_match() {
	local i bad=0
	for i in $(seq 1 "$NSRC"); do
		cmp -s "src/f$i.txt" "build/default/copy/f$i.txt" ||
			{ echo "build/default/copy/f$i.txt differs from src/f$i.txt"; bad=1; }
	done
	return $bad
}

@test "gc with no grace looping beside builds leaves no record naming a removed blob" {
	write_project
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "first build: $output"; false; }

	gc_loop stop.gc &
	local gcpid=$!
	for r in $(seq 1 "$ROUNDS"); do
		write_sources "$r"
		# a build may report results gc took from under it; what must
		# hold is checked after the loop
		"$KILN" build >>builds.log 2>&1 || true
		# a build from a cold daemon reuses nothing in memory
		[ $((r % 3)) -ne 0 ] || "$KILN" stop >/dev/null 2>&1 || true
		# rewrite back to an earlier round: cached results are reused
		write_sources $((r - 1))
		"$KILN" build >>builds.log 2>&1 || true
	done
	: >stop.gc
	wait "$gcpid"

	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "fsck after the race (exit $status):"; echo "$output" | head -20; false; }
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "build after the race: $output"; false; }
	outputs_match
	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "fsck after the last build (exit $status):"; echo "$output" | head -20; false; }
}

# A blob gc takes between a run's put and its copy into build/ (no record
# names it yet) is put again from the file the tool wrote: the build does
# not fail ("cannot write build/...: not found" before). Each step is held
# in that window (KILN_TEST_HOLD_PLACE_MS) while gc loops with no grace.
@test "an output gc takes before it reaches build/ is put again: the build does not fail" {
	NSRC=3
	write_project
	export KILN_TEST_HOLD_PLACE_MS=1500
	gc_loop stop.gc &
	local gcpid=$!
	run timeout 120 "$KILN" build
	: >stop.gc
	wait "$gcpid"
	[ "$status" -eq 0 ] || { echo "build (exit $status): $output"; false; }
	outputs_match
	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "fsck (exit $status):"; echo "$output" | head -20; false; }
}

# issue 36: the same race must never fail a build either. A blob gc takes
# between a step's put and its copy into build/, or between the put and
# the commit of the records naming it (the commit's sync of the blobs put
# since the last one included), is put again from the bytes still in
# hand, or the step decided again: the build goes on. 100 builds of a
# small project whose sources change every time (now and then back to
# an earlier round, for cached results; now and then from a cold
# daemon), gc looping with no grace from another process.
@test "gc with no grace looping beside 100 builds fails none of them" {
	NSRC=30
	write_project
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "first build: $output"; false; }

	gc_loop stop.gc &
	local gcpid=$! failed=0 round
	for b in $(seq 1 100); do
		round=$b
		# every fifth build goes back two rounds: cached results are reused
		[ $((b % 5)) -ne 0 ] || round=$((b - 2))
		write_sources "$round"
		[ $((b % 25)) -ne 0 ] || "$KILN" stop >/dev/null 2>&1 || true
		if ! timeout 120 "$KILN" build >build.out 2>&1; then
			failed=$((failed + 1))
			{ echo "build $b (round $round):"; cat build.out; } >>failed.log
		fi
	done
	: >stop.gc
	wait "$gcpid"

	[ "$failed" -eq 0 ] || {
		echo "$failed of 100 builds failed; their errors:"
		grep -E '^build [0-9]|kiln: |failed|cannot|could not' failed.log | head -30
		false
	}
	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "fsck after the race (exit $status):"; echo "$output" | head -20; false; }
	outputs_match
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "build after the race: $output"; false; }
	outputs_match
	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "fsck after the last build (exit $status):"; echo "$output" | head -20; false; }
}
