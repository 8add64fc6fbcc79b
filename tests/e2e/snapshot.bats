#!/usr/bin/env bats
# snapshot.bats — a subscription that starts with a snapshot (kiln events
# --snapshot, libkiln's kiln_events_snapshot): every matching step's state
# and outputs at the subscription's start, then the live stream from that
# very cursor, so that a step finishing meanwhile is told exactly once.

bats_require_minimum_version 1.5.0

load daemon_helpers

# project N: N steps u1..uN, each copying src/iI.txt.
project() {
	mkdir -p src
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
  mobile: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  fussy: { shell: true, run: "grep -q good \"${in}\" && cp \"${in}\" \"${out}\"" }
  gated: { run: [sh, "$BATS_TEST_TMPDIR/gated.sh", "${in}", "${out}"] }
assets:
YAML
	sed -i "s|\$BATS_TEST_TMPDIR|$BATS_TEST_TMPDIR|" kiln.yaml
	# gated: waits for the file gate beside it, then copies
	printf 'while [ ! -e "%s/gate" ]; do sleep 0.05; done\ncat "$1" >"$2"\n' \
		"$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/gated.sh"
	for i in $(seq 1 "$1"); do
		printf 'v1 %s\n' "$i" >src/i$i.txt
		printf '  - { url: u%s, tool: copy, inputs: [src/i%s.txt] }\n' "$i" "$i" >>kiln.yaml
	done
}

hash_of() {
	xxh128sum "$1" | cut -d' ' -f1
}

# snap_lines FILE: the snapshot lines of kiln events' output, without
# their cursor and kind: PROFILE URL STATE ...
snap_lines() {
	grep ' snapshot ' "$1" | cut -d' ' -f3-
}

# v2_outputs: how many of build/pc/u* hold their second version.
v2_outputs() {
	[ "$(cat build/pc/u* 2>/dev/null | grep -c '^v2')" -ge "$1" ]
}

@test "a snapshot says what is built and where, from a daemon that has built nothing yet" {
	project 3
	run --separate-stderr "$KILN" events --snapshot --timeout 1
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	# before any build: every step, none built
	[ "$(echo "$output" | grep -c ' snapshot pc u[123] not-built$')" -eq 3 ] ||
		{ echo "$output"; false; }
	echo "$output" | grep -q ' snapshot-end 6$' || { echo "$output"; false; }
	"$KILN" build >/dev/null
	"$KILN" stop >/dev/null
	# a new daemon knows the outputs from the store's index
	run --separate-stderr "$KILN" events --snapshot -p pc --timeout 1
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	for i in 1 2 3; do
		echo "$output" | grep -qx "[0-9a-f]*:[0-9]* snapshot pc u$i built out=$(hash_of build/pc/u$i) build/pc/u$i $(stat -c %s build/pc/u$i)" ||
			{ echo "u$i:"; echo "$output"; false; }
	done
	# the snapshot's lines share the cursor the stream starts from
	[ "$(echo "$output" | cut -d' ' -f1 | sort -u | wc -l)" -eq 1 ] || { echo "$output"; false; }
	echo "$output" | grep -q ' snapshot-end 3$' || { echo "$output"; false; }
}

@test "a snapshot holds only the steps the filter passes, of its profile" {
	project 12
	"$KILN" build -p mobile >/dev/null
	run --separate-stderr "$KILN" events --snapshot --json -p mobile 'u1*' --timeout 1
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	# u1, u10, u11, u12 of mobile; nothing of pc, no other URL
	[ "$(echo "$output" | jq -r 'select(.type == "snapshot") | "\(.profile) \(.url) \(.state) \(.outputs[0].hash)"')" = \
	  "mobile u1 built $(hash_of build/mobile/u1)
mobile u10 built $(hash_of build/mobile/u10)
mobile u11 built $(hash_of build/mobile/u11)
mobile u12 built $(hash_of build/mobile/u12)" ] || { echo "$output"; false; }
	[ "$(echo "$output" | jq -r 'select(.type == "snapshot-end") | .steps')" = 4 ] ||
		{ echo "$output"; false; }
	# without a profile: both profiles' steps (pc's never built), in the
	# project's order of profiles
	run --separate-stderr "$KILN" events --snapshot 'u2' --timeout 1
	[ "$(snap_lines <(echo "$output") | cut -d' ' -f1-3)" = "pc u2 not-built
mobile u2 built" ] || { echo "$output"; false; }
}

@test "a failed step shows failed, its error, and its last good output" {
	project 1
	printf '  - { url: f, tool: fussy, inputs: [src/f.txt] }\n' >>kiln.yaml
	printf 'good 1\n' >src/f.txt
	"$KILN" build -p pc >/dev/null
	good=$(hash_of build/pc/f)
	printf 'bad\n' >src/f.txt
	run "$KILN" build -p pc
	[ "$status" -ne 0 ]
	run --separate-stderr "$KILN" events --snapshot --json -p pc f --timeout 1
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	line=$(echo "$output" | jq -c 'select(.type == "snapshot")')
	[ "$(echo "$line" | jq -r '"\(.url) \(.state) \(.building) \(.outputs[0].hash) \(.outputs[0].path)"')" = \
	  "f failed false $good build/pc/f" ] || { echo "$output"; false; }
	[ -n "$(echo "$line" | jq -r '.error')" ] || { echo "$output"; false; }
}

@test "a snapshot larger than one reply comes whole, in order, each step once" {
	# 600 steps with long URLs: more than the 256 steps and the bytes of
	# one poll reply
	mkdir -p src
	long=$(printf 'x%.0s' $(seq 1 150))
	printf 'kiln: 1\nproject: t\nsources: [src]\nprofiles:\n  pc: {}\ntools:\n  copy: { run: [cp, "${in}", "${out}"] }\nassets:\n' >kiln.yaml
	for i in $(seq 1000 1599); do
		printf '  - { url: %s/%s, tool: copy, inputs: [src/a.txt] }\n' "$long" "$i" >>kiln.yaml
	done
	echo a >src/a.txt
	run --separate-stderr "$KILN" events --snapshot --timeout 1
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	snap_lines <(echo "$output") | cut -d' ' -f2 >got
	for i in $(seq 1000 1599); do echo "$long/$i"; done >want
	diff want got || { echo "$output" | tail -3; false; }
	echo "$output" | grep -q ' snapshot-end 600$' || { echo "$output" | tail -3; false; }
}

@test "subscribing with a snapshot while a build runs: every output once, with its final hash" {
	# fast steps finish while kiln events subscribes; the gated ones only
	# after it has its snapshot
	project 80
	for g in 1 2; do
		printf '  - { url: g%s, tool: gated, inputs: [src/g%s.txt] }\n' "$g" "$g" >>kiln.yaml
		printf 'v1 g%s\n' "$g" >src/g$g.txt
	done
	gate="$BATS_TEST_TMPDIR/gate"
	touch "$gate"
	"$KILN" build -p pc >/dev/null
	rm "$gate"
	for i in $(seq 1 80); do printf 'v2 %s\n' "$i" >src/i$i.txt; done
	for g in 1 2; do printf 'v2 g%s\n' "$g" >src/g$g.txt; done
	# -j 4: the gated steps hold two slots, the fast ones the others
	"$KILN" build -p pc -j 4 >build.out 2>&1 &
	b=$!
	# some steps done, most to come
	wait_for v2_outputs 3
	"$KILN" events --snapshot --json -p pc >"$BATS_TEST_TMPDIR/ev.json" 2>"$BATS_TEST_TMPDIR/ev.err" &
	ev=$!
	wait_for grep -q '"snapshot-end"' "$BATS_TEST_TMPDIR/ev.json"
	touch "$gate"
	wait "$b" || { cat build.out; false; }
	wait_for grep -q '"build-done"' "$BATS_TEST_TMPDIR/ev.json"
	kill "$ev"
	wait "$ev" || true
	cp "$BATS_TEST_TMPDIR/ev.json" ev.json
	# each URL's states in order: the snapshot's, then its step events'
	jq -r 'select(.type == "snapshot" or .type == "step") | "\(.url) \(.type) \(.outputs[0].hash // "none")"' \
		ev.json >seen
	before=0 after=0
	for u in $(seq 1 80 | sed 's/^/u/') g1 g2; do
		final=$(hash_of build/pc/$u)
		[ "$(grep -c "^$u snapshot " seen)" -eq 1 ] || { echo "$u: not once in the snapshot"; grep "^$u " seen; false; }
		[ "$(grep "^$u " seen | tail -1 | cut -d' ' -f3)" = "$final" ] ||
			{ echo "$u: last seen is not $final"; grep "^$u " seen; false; }
		[ "$(grep -c "^$u .* $final\$" seen)" -eq 1 ] ||
			{ echo "$u: $final seen more than once"; grep "^$u " seen; false; }
		if grep -q "^$u step " seen; then after=$((after + 1)); else before=$((before + 1)); fi
	done
	# both sides of the cursor were exercised: steps done before it (in
	# the snapshot only), and after (the gated ones at least)
	[ "$before" -gt 0 ] && [ "$after" -ge 2 ] || { echo "before=$before after=$after"; false; }
	# the gated steps were running at the cursor: building, old outputs
	[ "$(jq -r 'select(.type == "snapshot" and .url == "g1") | .building' ev.json)" = true ]
}

@test "the hot-reload example starts with what is built, then what changes" {
	project 2
	"$KILN" build -p pc >/dev/null
	"$KILN" stop >/dev/null
	hr="$(dirname "$KILN")/examples/hot-reload"
	[ -x "$hr" ] || { echo "no $hr (make test builds it)"; false; }
	"$hr" -p pc 'u1' >hr.out 2>hr.err &
	pid=$!
	# up to date: no build event, the snapshot says it
	wait_for grep -q "^reload u1 build/pc/u1 $(hash_of build/pc/u1)\$" hr.out ||
		{ cat hr.out hr.err; kill "$pid"; false; }
	printf 'v3\n' >src/.n && mv src/.n src/i1.txt
	wait_for grep -q "^reload u1 build/pc/u1 $(hash_of src/i1.txt)\$" hr.out ||
		{ cat hr.out hr.err; kill "$pid"; false; }
	kill -INT "$pid"
	wait "$pid"
	[ "$(wc -l <hr.out)" -eq 2 ] || { cat hr.out; false; }
}

@test "descriptions with errors: an empty snapshot says why, and the stream still comes" {
	project 1
	printf '  - { url: broken, tool: nosuchtool, inputs: [src/i1.txt] }\n' >>kiln.yaml
	echo x >blob
	"$KILN" status >/dev/null
	"$KILN" events --snapshot >"$BATS_TEST_TMPDIR/ev.out" 2>&1 &
	ev=$!
	wait_for grep -q ' snapshot-end ' "$BATS_TEST_TMPDIR/ev.out"
	grep -q ' snapshot-end 0 error=".*nosuchtool' "$BATS_TEST_TMPDIR/ev.out" ||
		{ cat "$BATS_TEST_TMPDIR/ev.out"; kill "$ev"; false; }
	"$KILN" put blob >/dev/null
	wait_for grep -q " blob-stored $(hash_of blob) " "$BATS_TEST_TMPDIR/ev.out" ||
		{ cat "$BATS_TEST_TMPDIR/ev.out"; kill "$ev"; false; }
	kill "$ev"
	wait "$ev" || true
}

@test "--snapshot with --since is a usage error" {
	run --separate-stderr "$KILN" events --snapshot --since 1:1
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--snapshot and --since"* ]] || { echo "$stderr"; false; }
}
