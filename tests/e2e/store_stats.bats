#!/usr/bin/env bats
# The store's figures in `kiln status` (issue 28): blob count and bytes
# equal what objects/ holds after a build, after puts from another process,
# after `kiln gc` removed blobs, and after a daemon restart; gc's state
# (the last gc's time and what it removed).

bats_require_minimum_version 1.5.0

load daemon_helpers

NSRC=12

# write_sources ROUND: sources of different sizes, new content per round.
write_sources() {
	local i
	mkdir -p src
	for i in $(seq 1 "$NSRC"); do
		printf 'round %s file %s\n%0*d\n' "$1" "$i" $((i * 37)) "$i" >"src/f$i.txt"
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

# objects_figures: "COUNT BYTES" of the files in the store's objects/.
objects_figures() {
	local n bytes
	n=$(find .kiln/store/objects -type f | wc -l)
	bytes=$(find .kiln/store/objects -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	echo "$n $bytes"
}

# status_figures: "COUNT BYTES" as `kiln status --json` gives them.
status_figures() {
	"$KILN" status --json | jq -r '"\(.store_blobs) \(.store_bytes)"'
}

# figures_match: kiln status says what objects/ holds.
figures_match() {
	local want got
	want=$(objects_figures)
	got=$(status_figures)
	[ "$want" = "$got" ] || { echo "kiln status says '$got' (blobs bytes), objects/ holds '$want'"; return 1; }
}

@test "status: blob count and bytes equal objects/ after a build, puts through the daemon, and puts by another process" {
	write_project
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(objects_figures | cut -d' ' -f1)" -ge "$NSRC" ]
	figures_match
	# kiln put sends them to the daemon: their use records wait for
	# its next commit, and status counts them meanwhile
	head -c 5000 /dev/urandom >blob1
	head -c 777 /dev/urandom >blob2
	"$KILN" put blob1 blob2 >/dev/null
	figures_match
	# --store: kiln put writes the store itself, beside the daemon
	head -c 1234 /dev/urandom >blob3
	"$KILN" put --store .kiln/store blob3 blob1 >/dev/null
	figures_match
	run "$KILN" status
	[ "$status" -eq 0 ]
	[[ "$output" == *"store     $(objects_figures | cut -d' ' -f1) blobs, "* ]] ||
		{ echo "no store line with the count in: $output"; false; }
	[[ "$output" == *"gc        none finished yet"* ]] || { echo "$output"; false; }
}

@test "status: figures follow kiln gc, which is recorded as the last gc" {
	write_project
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	write_sources 1
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	before=$(objects_figures)
	figures_match
	run "$KILN" gc --grace 0s --max-age 0s
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	after=$(objects_figures)
	[ "$before" != "$after" ] || { echo "gc removed nothing: $output"; false; }
	figures_match
	json=$("$KILN" status --json)
	removed=$(( ${before%% *} - ${after%% *} ))
	removed_bytes=$(( ${before##* } - ${after##* } ))
	[ "$(jq -r .last_gc_removed_blobs <<<"$json")" = "$removed" ] ||
		{ echo "last_gc_removed_blobs is not $removed: $json"; false; }
	[ "$(jq -r .last_gc_removed_bytes <<<"$json")" = "$removed_bytes" ] ||
		{ echo "last_gc_removed_bytes is not $removed_bytes: $json"; false; }
	[ "$(jq -r '.last_gc_end_ns > 0 and .last_gc_end_ns >= .last_gc_start_ns' <<<"$json")" = true ] ||
		{ echo "no last gc time: $json"; false; }
	[ "$(jq -r .gc_running <<<"$json")" = false ] || { echo "$json"; false; }
	run "$KILN" status
	[[ "$output" == *"gc        last "*": removed $removed blobs"* ]] ||
		{ echo "no last gc line in: $output"; false; }
}

@test "status: figures are right after a daemon restart, and after puts while no daemon ran" {
	write_project
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	figures_match
	"$KILN" stop
	wait_for sh -c '! [ -S .kiln/kilnd.sock ]'
	head -c 3000 /dev/urandom >blob1
	"$KILN" put blob1 >/dev/null
	"$KILN" gc --grace 0s --max-age 0s >/dev/null
	figures_match   # starts a new daemon
	write_sources 2
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	figures_match
}

@test "status: gc_running while a gc holds the store's gc lock" {
	write_project
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$("$KILN" status --json | jq -r .gc_running)" = false ]
	# what a running gc holds (store/blobstat.c): a shared flock
	python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_SH)
time.sleep(60)' .kiln/store/gc.lock &
	local holder=$!
	wait_for sh -c "\"$KILN\" status --json | jq -e .gc_running >/dev/null"
	kill "$holder"
	wait "$holder" 2>/dev/null || true
	[ "$("$KILN" status --json | jq -r .gc_running)" = false ]
}

# gc_loop STOPFILE: gc with no grace, from another process, until STOPFILE.
gc_loop() {
	while [ ! -e "$1" ]; do
		"$KILN" gc --grace 0s --max-age 0s >/dev/null 2>>gc.err || true
	done
}

@test "status: figures equal objects/ after builds raced by gc in another process" {
	write_project
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	gc_loop stop.gc &
	local gcpid=$!
	for round in 1 2 3 4; do
		write_sources "$round"
		"$KILN" build >/dev/null 2>&1 || true   # what gc does to a build is gc_race.bats's
	done
	touch stop.gc
	wait "$gcpid"
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	figures_match
	[ "$("$KILN" status --json | jq -r '.last_gc_end_ns > 0')" = true ]
}
