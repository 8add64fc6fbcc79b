#!/usr/bin/env bats
# agents_security.bats — what one holder of the agent token can do to
# another agent and to the daemon's owner (issue 37, docs/agents.md
# "Security"): answer a lease it does not hold, read the agents' ids,
# upload without bound, or crowd the owner out of the upload slots. Each
# case replays the attack over a real kilnd on tcp:// loopback; the
# misbehaving peers are raw connections (sp_peer.py, nngcat).

bats_require_minimum_version 1.5.0

load daemon_helpers
eval "$(declare -f teardown | sed '1s/teardown/daemon_teardown/')"

teardown() {
	local pid
	for pid in ${PEER_PIDS:-}; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in ${PEER_PIDS:-}; do
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
		kill -9 "$pid" 2>/dev/null || true
	done
	for f in "$BATS_TEST_TMPDIR"/agent*.log; do
		if [ -f "$f" ] && grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$f"; then
			echo "sanitizer report in $f:"
			cat "$f"
			return 1
		fi
	done
	daemon_teardown
}

# One step, a2.txt, a copy of src/f2.txt.
sec_project() {
	mkdir -p src
	echo "text 2" >src/f2.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
assets:
  - { url: a2.txt, tool: copy, inputs: [src/f2.txt] }
YAML
}

# sec_daemon [ARGS...]: kilnd on a free loopback port ($URL, $port) with
# an agent token ($TOKEN) and a client token.
sec_daemon() {
	free_port
	URL="tcp://127.0.0.1:$port"
	head -c 24 /dev/urandom | base64 | tr -d '\n/+=' | head -c 32 >"$BATS_TEST_TMPDIR/token"
	echo >>"$BATS_TEST_TMPDIR/token"
	TOKEN=$(head -n 1 "$BATS_TEST_TMPDIR/token")
	head -c 24 /dev/urandom | base64 | tr -d '\n/+=' | head -c 32 >"$BATS_TEST_TMPDIR/client-token"
	echo >>"$BATS_TEST_TMPDIR/client-token"
	"$KILND" --project . --listen "$URL" --agent-token-file "$BATS_TEST_TMPDIR/token" \
		--token-file "$BATS_TEST_TMPDIR/client-token" --agent-lease 1000 "$@"
}

# peer ARGS...: sp_peer.py in the background (its pid kept for teardown).
peer() {
	python3 "$KILN_TOP/tests/e2e/sp_peer.py" "$@" 2>>"$BATS_TEST_TMPDIR/peer.err" &
	PEER_PIDS="${PEER_PIDS:-} $!"
	LAST_PEER=$!
}

# real_agent NAME: a real kiln agent, outside the project.
real_agent() {
	mkdir -p "$BATS_TEST_TMPDIR/$1"
	(cd "$BATS_TEST_TMPDIR/$1" && exec "$KILN" agent --connect "$URL" \
		--token-file "$BATS_TEST_TMPDIR/token" --cache "$BATS_TEST_TMPDIR/$1/cache" \
		--name "$1" -j 1 >"$BATS_TEST_TMPDIR/agent-$1.log" 2>&1) &
	PEER_PIDS="${PEER_PIDS:-} $!"
}

listed() {
	"$KILN" status | grep -q "$1: "
}

status_is_uploads() {
	[ "$(status_field uploads)" = "$1" ]
}

# hex_escaped HASH: a hash as a protobuf text-format bytes literal.
hex_escaped() {
	printf '%s' "$1" | sed 's/../\\x&/g'
}

@test "an answer from a connection that does not hold the lease is refused, even with the agent's id and lease: the build has the real run's bytes" {
	sec_project
	sec_daemon --local-jobs 0
	# the victim: an agent (a raw connection) that took a2.txt's job and
	# keeps its lease
	peer agent "$port" "$TOKEN" victimA "$BATS_TEST_TMPDIR/lease"
	victim=$LAST_PEER
	"$KILN" build a2.txt >out 2>&1 &
	bpid=$!
	wait_for test -s "$BATS_TEST_TMPDIR/lease" || { cat "$BATS_TEST_TMPDIR/peer.err"; false; }
	read -r agent lease outname <"$BATS_TEST_TMPDIR/lease"
	# the intruder's bytes, uploaded with the agent token
	echo "intruder's bytes" >evil
	run --separate-stderr "$KILN" --connect "$URL" --token-file "$BATS_TEST_TMPDIR/token" put evil
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	h=$(echo "$output" | cut -d' ' -f1)
	answer="version: 1 token: \"$TOKEN\" agent_done { agent: $agent lease: $lease
	  outcome: RAN exited: true status: 0
	  outputs { path: \"$outname\" id: \"$(hex_escaped "$h")\" size: $(stat -c %s evil) } }"
	# 1. a connection that never said hello
	echo "$answer" | encode_request >done.bin
	stranger=$(send_raw done.bin "$URL")
	# 2. another agent, on the connection it said hello on
	other=$(timeout 20 python3 "$KILN_TOP/tests/e2e/sp_peer.py" answer "$port" "$TOKEN" \
		intruder "$answer")
	# the victim goes away; a real agent runs the step again
	kill -TERM "$victim"
	real_agent honest
	wait "$bpid" || { cat out; cat .kiln/kilnd.log; false; }
	cmp build/pc/a2.txt src/f2.txt || { echo "build/ got: $(cat build/pc/a2.txt)"; false; }
	grep -q 'ran a2.txt .*on honest' out || { cat out; false; }
	! grep -q 'on victimA' out
	[[ "$stranger" == *"status: STATUS_NOT_FOUND"* ]] || { echo "stranger's answer: $stranger"; false; }
	[[ "$stranger" == *"not held by this connection"* ]] || { echo "stranger's answer: $stranger"; false; }
	[[ "$other" == *"status: STATUS_NOT_FOUND"* ]] || { echo "other agent's answer: $other"; false; }
}

@test "lease ids are not sequential: two jobs in a row get unrelated leases" {
	sec_project
	echo '  - { url: a3.txt, tool: copy, inputs: [src/f2.txt] }' >>kiln.yaml
	sec_daemon --local-jobs 0
	peer agent "$port" "$TOKEN" one "$BATS_TEST_TMPDIR/lease1"
	peer agent "$port" "$TOKEN" two "$BATS_TEST_TMPDIR/lease2"
	"$KILN" build >out 2>&1 &
	wait_for test -s "$BATS_TEST_TMPDIR/lease1" || { cat "$BATS_TEST_TMPDIR/peer.err"; false; }
	wait_for test -s "$BATS_TEST_TMPDIR/lease2" || { cat "$BATS_TEST_TMPDIR/peer.err"; false; }
	read -r _ l1 _ <"$BATS_TEST_TMPDIR/lease1"
	read -r _ l2 _ <"$BATS_TEST_TMPDIR/lease2"
	# sequential numbers differ by one; 64 random bits almost never by
	# less than 2^20
	python3 -c "import sys; sys.exit(abs($l1 - $l2) <= 1 << 20)" ||
		{ echo "leases $l1 and $l2"; false; }
}

@test "kiln status for the agent role shows no agent's id (an agent's only secret)" {
	sec_project
	sec_daemon --local-jobs 0
	real_agent victimA
	wait_for grep -q 'joined .* as agent' "$BATS_TEST_TMPDIR/agent-victimA.log"
	id=$(sed -n 's/.* as agent \([0-9]*\) .*/\1/p' "$BATS_TEST_TMPDIR/agent-victimA.log" | head -n 1)
	[ -n "$id" ]
	wait_for listed victimA
	printf 'version: 1\ntoken: "%s"\nstatus {}\n' "$TOKEN" | encode_request >status.bin
	run send_raw status.bin "$URL"
	[[ "$output" == *'name: "victimA"'* ]] || { echo "$output"; false; }
	[[ "$output" != *"$id"* ]] || { echo "the agent role sees agent id $id: $output"; false; }
	# the owner (ipc: admin) still sees it
	printf 'version: 1\nstatus {}\n' | encode_request >status.bin
	run send_raw status.bin
	[[ "$output" == *"$id"* ]] || { echo "$output"; false; }
}

@test "an agent's upload past --agent-upload-max is refused, saying so; one within it is stored" {
	sec_project
	sec_daemon --agent-upload-max 1M
	head -c 2097152 /dev/urandom >big
	head -c 524288 /dev/urandom >small
	run --separate-stderr "$KILN" --connect "$URL" --token-file "$BATS_TEST_TMPDIR/token" put big
	[ "$status" -ne 0 ] || { echo "a 2 MiB upload was accepted: $output"; false; }
	[[ "$stderr" == *"agent-upload-max"* ]] || { echo "$stderr"; false; }
	[[ "$stderr" == *"1048576"* ]] || { echo "$stderr"; false; }
	run --separate-stderr "$KILN" --connect "$URL" --token-file "$BATS_TEST_TMPDIR/token" put small
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	# the owner is not bound by it
	run --separate-stderr "$KILN" put big
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
}

@test "one agent connection holding uploads open cannot make the owner's kiln put fail" {
	sec_project
	sec_daemon
	echo "the owner's file" >mine
	peer hold-uploads "$port" "$TOKEN" 64 "$BATS_TEST_TMPDIR/held"
	wait_for test -s "$BATS_TEST_TMPDIR/held" || { cat "$BATS_TEST_TMPDIR/peer.err"; false; }
	held=$(cat "$BATS_TEST_TMPDIR/held")
	run --separate-stderr "$KILN" put mine
	[ "$status" -eq 0 ] || { echo "held $held; kiln put: $stderr"; false; }
	# its share of the 64 slots, no more
	[ "$held" -le 8 ] || { echo "one connection holds $held uploads"; false; }
	# nor can eight connections doing the same
	for i in 1 2 3 4 5 6 7 8; do
		peer hold-uploads "$port" "$TOKEN" 64 "$BATS_TEST_TMPDIR/held.$i"
	done
	for i in 1 2 3 4 5 6 7 8; do
		wait_for test -s "$BATS_TEST_TMPDIR/held.$i" || { cat "$BATS_TEST_TMPDIR/peer.err"; false; }
	done
	for i in $(seq 1 16); do echo "file $i" >"mine.$i"; done
	run --separate-stderr "$KILN" put mine.*
	[ "$status" -eq 0 ] || { echo "kiln put: $stderr"; false; }
}

@test "the agent role's unfinished uploads are bounded by what the steps agents hold may upload" {
	sec_project
	sec_daemon --local-jobs 0
	# no step on an agent: one upload at a time for the whole role
	peer hold-uploads "$port" "$TOKEN" 8 "$BATS_TEST_TMPDIR/held.0"
	idle=$LAST_PEER
	wait_for test -s "$BATS_TEST_TMPDIR/held.0" || { cat "$BATS_TEST_TMPDIR/peer.err"; false; }
	[ "$(cat "$BATS_TEST_TMPDIR/held.0")" -eq 1 ] ||
		{ echo "held $(cat "$BATS_TEST_TMPDIR/held.0") with no step on an agent"; false; }
	kill -TERM "$idle"
	wait_for status_is_uploads 0
	# an agent holds a2.txt's step: its output, log, depfile and trace
	peer agent "$port" "$TOKEN" one "$BATS_TEST_TMPDIR/lease"
	"$KILN" build a2.txt >out 2>&1 &
	wait_for test -s "$BATS_TEST_TMPDIR/lease" || { cat "$BATS_TEST_TMPDIR/peer.err"; false; }
	for i in 1 2 3; do
		peer hold-uploads "$port" "$TOKEN" 8 "$BATS_TEST_TMPDIR/held.$i"
	done
	sum=0
	for i in 1 2 3; do
		wait_for test -s "$BATS_TEST_TMPDIR/held.$i" || { cat "$BATS_TEST_TMPDIR/peer.err"; false; }
		sum=$((sum + $(cat "$BATS_TEST_TMPDIR/held.$i")))
	done
	[ "$sum" -eq 4 ] || { echo "three connections hold $sum uploads for one step of one output"; false; }
}
