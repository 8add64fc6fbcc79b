#!/usr/bin/env bats
# priority.bats — interactive priority (`kiln build --priority N`, kiln
# watch's 100) and its inheritance by prerequisites (issue 23): a request
# made while a full build runs at -j 1 overtakes the full build's queued
# steps, and the steps it needs that it does not name get its priority.
#
# Each slow step appends "start URL" to a log outside the project when its
# tool starts, so the tests read the order the engine started them in (no
# timing). The first step of the full build waits at a gate until the
# interactive build has been scheduled, so "the step running when the
# request came" is known exactly.

bats_require_minimum_version 1.5.0

load daemon_helpers

# prio_project CHAIN...: 20 independent slow batch steps a/01..a/20 packed
# into a/all.txt and then a/all.zip (each a/NN three steps from an end),
# and a chain of slow steps z/CHAIN[0] -> z/CHAIN[1] -> ... (each the next
# one's input). Without priorities the batch steps would start first:
# their critical path is at least the chain's, and their URLs sort first.
prio_project() {
	local i prev="" s
	LOG="$BATS_TEST_TMPDIR/steps.log"
	GATE="$BATS_TEST_TMPDIR/gate"
	: >"$LOG"
	mkdir -p src
	printf 's\n' >src/s.txt
	{
		cat <<'YAML'
kiln: 1
project: prio
sources: [src]
profiles:
  pc: {}
tools:
  slow:
    shell: true
    trace: false
    run: 'echo "start $KILN_URL" >>"$LOG"; while [ ! -e "$GATE" ]; do sleep 0.02; done; sleep 0.2; cp ${in} ${out}'
YAML
		printf '    env: { LOG: "%s", GATE: "%s" }\n' "$LOG" "$GATE"
		cat <<'YAML'
  pack: { shell: true, run: "cat ${in...} >${out}" }
assets:
YAML
		for i in $(seq -w 1 20); do
			printf '  - { url: a/%s.txt, tool: slow, inputs: [src/s.txt] }\n' "$i"
		done
		printf '  - url: a/all.txt\n    tool: pack\n    inputs: [%s]\n' \
			"$(seq -w 1 20 | sed 's|.*|"@a/&.txt"|' | paste -sd, -)"
		printf '  - { url: a/all.zip, tool: pack, inputs: ["@a/all.txt"] }\n'
		for s in "$@"; do
			if [ -z "$prev" ]; then
				printf '  - { url: z/%s.txt, tool: slow, inputs: [src/s.txt] }\n' "$s"
			else
				printf '  - { url: z/%s.txt, tool: slow, inputs: ["@z/%s.txt"] }\n' "$s" "$prev"
			fi
			prev=$s
		done
	} >kiln.yaml
}

# full_build_held: start the daemon and a full build at -j 1 ($full_pid,
# its output in full.out outside the project); returns once its first step
# started, which then waits at the gate.
full_build_held() {
	"$KILND" --project . --verbose
	"$KILN" build -j 1 >"$BATS_TEST_TMPDIR/full.out" 2>&1 &
	full_pid=$!
	wait_for grep -q '^start ' "$LOG" || { cat "$BATS_TEST_TMPDIR/full.out"; false; }
	[ "$(wc -l <"$LOG")" -eq 1 ] || { cat "$LOG"; false; }
	first=$(sed -n 's/^start //p' "$LOG")
}

# request ARGS...: `kiln build -j 1 ARGS` in the background ($req_pid, its
# output in req.out); once the daemon has scheduled it, open the gate.
# (-j 1: a build's -j raises the engine's slots while it runs, and a second
# slot would let the request's first step start beside the held one.)
request() {
	"$KILN" build -j 1 "$@" >"$BATS_TEST_TMPDIR/req.out" 2>&1 &
	req_pid=$!
	wait_for builds_started 2 || { cat .kiln/kilnd.log; false; }
	touch "$GATE"
}

# pos URL: the line of the log on which URL's tool started (0: not yet).
pos() {
	local p
	p=$(grep -nx "start $1" "$LOG" | cut -d: -f1)
	echo "${p:-0}"
}

# batch_before URL: how many batch steps (a/NN) started before URL.
batch_before() {
	head -n "$(($(pos "$1") - 1))" "$LOG" | grep -c '^start a/[0-9]' || true
}

# order: the log on one line, for failure messages.
order() {
	sed 's/^start //' "$LOG" | tr '\n' ' '
}

# full_build_ends: the full build goes on to its end and builds everything.
full_build_ends() {
	local st=0
	wait "$full_pid" || st=$?
	[ "$st" -eq 0 ] || { echo "full build: exit $st"; cat "$BATS_TEST_TMPDIR/full.out"; false; }
	[ "$(wc -l <"$LOG")" -eq $((20 + $1)) ] || { order; false; }
	[ "$(cat build/pc/a/all.zip | wc -l)" -eq 20 ]
}

@test "an interactive request overtakes a queued full build, its prerequisite first" {
	prio_project p t
	full_build_held
	request --priority 100 z/t.txt
	st=0
	wait "$req_pid" || st=$?
	[ "$st" -eq 0 ] || { echo "exit $st"; cat "$BATS_TEST_TMPDIR/req.out"; false; }
	# it returned while the full build still runs (its queue mostly left)
	running "$full_pid" || { echo "the full build had ended: $(order)"; false; }
	[ "$(grep -c '^start a/' "$LOG")" -lt 20 ] || { order; false; }
	[ "$(cat build/pc/z/t.txt)" = s ]
	# the prerequisite P started right after the step that was running
	[ "$(pos z/p.txt)" -eq 2 ] || { echo "held $first; order: $(order)"; false; }
	# then T, before any queued batch step: the slot P frees waits for T
	# while P's end is processed and T decided (schedule.c, slot_held)
	[ "$(batch_before z/t.txt)" -eq 1 ] || { echo "held $first; order: $(order)"; false; }
	full_build_ends 2
}

@test "a prerequisite the request does not name inherits its priority, through a step still waiting" {
	# z/q -> z/p -> z/t: the request names z/t only; z/q is queued in the
	# full build (priority 0), z/p waits on it, and both get priority 100
	prio_project q p t
	full_build_held
	request --priority 100 z/t.txt
	st=0
	wait "$req_pid" || st=$?
	[ "$st" -eq 0 ] || { echo "exit $st"; cat "$BATS_TEST_TMPDIR/req.out"; false; }
	running "$full_pid" || { echo "the full build had ended: $(order)"; false; }
	# the overtaking step is z/q, two levels below the named target
	[ "$(pos z/q.txt)" -eq 2 ] || { echo "held $first; order: $(order)"; false; }
	# z/p, made ready at priority 100 when z/q ended, then z/t: no batch
	# step takes the slot either frees (schedule.c, slot_held)
	[ "$(batch_before z/p.txt)" -eq 1 ] || { echo "held $first; order: $(order)"; false; }
	[ "$(batch_before z/t.txt)" -eq 1 ] || { echo "held $first; order: $(order)"; false; }
	[ "$(pos z/p.txt)" -lt "$(pos z/t.txt)" ]
	full_build_ends 3
}

@test "the same request at priority 0 waits behind the full build's queue" {
	# the control: what the tests above would see if the engine ignored
	# priorities: the batch steps' longer critical path goes first. Paths
	# are in estimated time (docs/build.md, "Scheduling"): a/NN is one
	# slow step (its tool learnt from the held one) and two packs, the
	# request's z/p one slow step alone. (With z/p -> z/t, two slow steps,
	# the request's chain is the longer one and rightly goes first.)
	prio_project p
	full_build_held
	request z/p.txt
	full_build_ends 1
	st=0
	wait "$req_pid" || st=$?
	[ "$st" -eq 0 ] || { echo "exit $st"; cat "$BATS_TEST_TMPDIR/req.out"; false; }
	[ "$(batch_before z/p.txt)" -eq 20 ] || { order; false; }
}
