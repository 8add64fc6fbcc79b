#!/usr/bin/env bats
# agents.bats — build agents (kiln agent, docs/agents.md): a real kilnd
# listening on tcp:// loopback, real agents, each in a folder of its own
# with no copy of the project, running the steps the daemon gives them.

bats_require_minimum_version 1.5.0

load agents_helpers

# The project: three copies, a step using two of them, and a "shader"
# whose tool reads the files its source #includes (none declared).
agents_project() {
	mkdir -p src shaders
	for i in 1 2 3 4; do echo "text $i" >"src/f$i.txt"; done
	printf '#include common.glsl\nvoid main() {}\n' >shaders/a.frag
	echo "// common v1" >shaders/common.glsl
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src, shaders]
profiles:
  pc: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  join: { shell: true, run: 'cat ${in...} >"${out}"' }
  slow: { shell: true, run: 'echo "slow at work"; sleep 3; cp "${in}" "${out}"' }
  incl:
    shell: true
    run: 'd=$(dirname "${in}"); for f in $(sed -n "s/^#include //p" "${in}"); do cat "$d/$f"; done >"${out}"; cat "${in}" >>"${out}"'
assets:
  - { url: a1.txt, tool: copy, inputs: [src/f1.txt] }
  - { url: a2.txt, tool: copy, inputs: [src/f2.txt] }
  - { url: a3.txt, tool: copy, inputs: [src/f3.txt] }
  - { url: both.txt, tool: join, inputs: ["@a1.txt", "@a2.txt", src/f4.txt] }
  - { url: a.spv, tool: incl, inputs: [shaders/a.frag] }
YAML
}

# slow_on_agent NAME: the project with a 3-second step, a daemon that
# runs nothing itself, agent NAME ($LAST_AGENT), and `kiln build slow.txt`
# in the background ($bpid, output in out) once its tool runs there (the
# tool's shell is a child of the agent).
slow_on_agent() {
	agents_project
	echo '  - { url: slow.txt, tool: slow, inputs: [src/f3.txt] }' >>kiln.yaml
	daemon_up --local-jobs 0
	agent_up "$1" -j 1
	"$KILN" build slow.txt >out 2>&1 &
	bpid=$!
	wait_for pgrep -f -P "$LAST_AGENT" sh
}

# The outputs of a build, as name and hash.
outputs_of() {
	(cd build/pc && sha256sum a1.txt a2.txt a3.txt both.txt a.spv)
}

@test "a build runs entirely on two agents, with the outputs of a local build, and a second build runs nothing" {
	agents_project
	# the reference: built here, by the daemon alone
	"$KILN" build >local.out 2>&1 || { cat local.out; false; }
	outputs_of >local.sums
	"$KILN" stop
	rm -rf .kiln build
	daemon_up --local-jobs 0
	agent_up one -j 1
	agent_up two -j 1
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; cat .kiln/kilnd.log; false; }
	outputs_of | diff - local.sums
	# every step ran, each on one of the agents
	[ "$(grep -c '"result":"ran"' <<<"$output")" -eq 5 ] || { echo "$output"; false; }
	[ "$(grep -c '"machine":"one"\|"machine":"two"' <<<"$output")" -eq 5 ]
	# its timeline puts each step on a lane of the agent that ran it
	"$KILN" trace | python3 -c '
import json, sys
ev = json.load(sys.stdin)["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
steps = [e for e in ev if e["ph"] == "X" and e.get("cat") == "step"]
assert len(steps) == 5, steps
for s in steps:
    m = s["args"]["machine"]
    assert m in ("one", "two") and s["tid"] > 1000, s
    assert names[s["tid"]].startswith(m + " slot "), (names, s)'
	# no agent has a copy of the project: only its cache
	[ ! -e "$BATS_TEST_TMPDIR/one/kiln.yaml" ] && [ ! -e "$BATS_TEST_TMPDIR/two/kiln.yaml" ]
	run "$KILN" status
	[[ "$output" == *"one: 1 slots"* ]] && [[ "$output" == *"two: 1 slots"* ]]
	# each agent says what it fetched and sent (its inputs, its outputs)
	wait_for sh -c "'$KILN' status --json | grep -q '\"bytes_in\":[1-9][0-9]*,\"bytes_out\":[1-9]'"
	run "$KILN" why both.txt
	[[ "$output" =~ "ran on: agent "(one|two) ]] || { echo "$output"; false; }
	# the second build: served from the store, zero tool runs
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ]
	[[ "$output" == *"0 ran, 5 up to date"* ]] || { echo "$output"; false; }
	# and a fresh clone's build/ from the same store: nothing runs either
	rm -rf build
	run --separate-stderr "$KILN" build
	[[ "$output" == *"0 ran"* ]] || { echo "$output"; false; }
	outputs_of | diff - local.sums
}

@test "a shader's undeclared #include is sent to the agent, recorded, and its edit rebuilds the shader there" {
	agents_project
	daemon_up --local-jobs 0
	agent_up one -j 1
	"$KILN" build a.spv >out 2>&1 || { cat out; cat .kiln/kilnd.log; false; }
	grep -q 'ran a.spv .*on one' out
	[ "$(head -1 build/pc/a.spv)" = "// common v1" ]
	grep -q 'lacked files its tool looked for' .kiln/kilnd.log
	run "$KILN" deps a.spv
	[[ "$output" == *"discovered shaders/common.glsl (trace)"* ]] || { echo "$output"; false; }
	echo "// common v2" >shaders/common.glsl
	"$KILN" build a.spv >out 2>&1
	grep -q 'ran a.spv .*on one.*shaders/common.glsl' out || { cat out; false; }
	[ "$(head -1 build/pc/a.spv)" = "// common v2" ]
}

@test "an agent killed with -9 mid-step: its step runs elsewhere and the build completes right" {
	slow_on_agent doomed
	kill -9 "$LAST_AGENT"
	agent_up rescuer -j 1
	wait "$bpid" || { cat out; cat .kiln/kilnd.log; false; }
	grep -q 'ran slow.txt .*on rescuer' out || { cat out; false; }
	cmp build/pc/slow.txt src/f3.txt
	grep -q 'agent doomed .* left' .kiln/kilnd.log
}

@test "an agent whose program differs from the daemon's refuses the step, which runs here and says why" {
	agents_project
	mkdir -p "$BATS_TEST_TMPDIR/otherbin"
	printf '#!/bin/sh\nexec /bin/cp "$@"\n' >"$BATS_TEST_TMPDIR/otherbin/cp"
	chmod +x "$BATS_TEST_TMPDIR/otherbin/cp"
	daemon_up --local-jobs 0
	PATH="$BATS_TEST_TMPDIR/otherbin:$PATH" agent_up other -j 1
	"$KILN" build a1.txt >out 2>&1 || { cat out; cat .kiln/kilnd.log; false; }
	cmp build/pc/a1.txt src/f1.txt
	# it ran on the daemon's machine, not on the agent
	grep -q 'ran a1.txt' out && ! grep -q 'ran a1.txt .*on other' out
	grep -q 'a1.txt: agent other did not run it (program .*differs' .kiln/kilnd.log
	run "$KILN" why a1.txt
	[[ "$output" == *"agent other refused it"* ]] || { echo "$output"; false; }
	run "$KILN" status
	[[ "$output" == *"other: 1 slots, 0 running; 0 ran, 0 failed, 1 refused; "*" in, "*" out"* ]] || { echo "$output"; false; }
}

@test "an agent's corrupted upload is rejected: nothing of it is recorded, the step is built again" {
	agents_project
	daemon_up --local-jobs 0
	KILN_TEST_AGENT_CORRUPT=1 agent_up liar -j 1
	"$KILN" build both.txt >out 2>&1 || { cat out; cat .kiln/kilnd.log; false; }
	# the good bytes are in build/, not the liar's (its a1/a2 answers name
	# blobs the store had already: their bytes never came from it)
	cat src/f1.txt src/f2.txt src/f4.txt | cmp - build/pc/both.txt
	grep -q "both.txt: the answer of agent liar was refused: output 'out'" .kiln/kilnd.log
	! grep -q 'ran both.txt .*on liar' out
	run "$KILN" status
	[[ "$output" =~ liar:\ 1\ slots,\ 0\ running\;\ [0-9]+\ ran,\ [1-9] ]] || { echo "$output"; false; }
	"$KILN" fsck >/dev/null
}

@test "the daemon restarted under a connected agent: it joins again and builds" {
	agents_project
	daemon_up --local-jobs 0
	agent_up one -j 1
	"$KILN" build a1.txt >out 2>&1 || { cat out; false; }
	"$KILN" stop
	"$KILND" --project . --listen "$URL" --agent-token-file "$BATS_TEST_TMPDIR/token" \
		--agent-lease 1000 --local-jobs 0
	wait_for agent_listed one
	"$KILN" build >out 2>&1 || { cat out; cat .kiln/kilnd.log; false; }
	grep -q 'ran a2.txt .*on one' out
	cmp build/pc/a2.txt src/f2.txt
	grep -q 'lost the daemon' "$BATS_TEST_TMPDIR/agent-one.log"
}

@test "kiln agent: usage errors; a wrong, missing or client token refused" {
	run --separate-stderr "$KILN" agent
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"which daemon?"* ]]
	run --separate-stderr "$KILN" agent --connect tcp://127.0.0.1:1 -j 0
	[ "$status" -eq 2 ]
	agents_project
	daemon_up
	printf 'a-wrong-token-of-32-characters!!\n' >wrong
	for tok in wrong "$BATS_TEST_TMPDIR/client-token" ""; do
		run --separate-stderr timeout 20 "$KILN" agent --connect "$URL" \
			${tok:+--token-file "$tok"} --cache "$BATS_TEST_TMPDIR/c"
		[ "$status" -eq 1 ] || { echo "$tok: $status $stderr"; false; }
		[[ "$stderr" == *"refused this agent"* ]] || { echo "$tok: $stderr"; false; }
	done
	# the agent's token may not build or stop the daemon
	run --separate-stderr "$KILN" --connect "$URL" --token-file "$BATS_TEST_TMPDIR/token" build
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"may not send"* ]] || { echo "$stderr"; false; }
	run --separate-stderr "$KILN" --connect "$URL" --token-file "$BATS_TEST_TMPDIR/token" stop
	[ "$status" -ne 0 ]
	"$KILN" status >/dev/null
	[ "$(status_field bad_requests)" -ge 5 ]
}

@test "an agent silent past its lease (stopped) loses its step; its late answer is refused" {
	slow_on_agent sleepy
	sleepy=$LAST_AGENT
	kill -STOP "$sleepy"
	agent_up awake -j 1
	wait "$bpid" || { kill -CONT "$sleepy"; cat out; cat .kiln/kilnd.log; false; }
	grep -q 'ran slow.txt .*on awake' out || { kill -CONT "$sleepy"; cat out; false; }
	grep -q 'agent sleepy .* left: silent past its lease' .kiln/kilnd.log
	# woken, it either answers (too late: refused) or learns first that
	# the daemon dropped it and abandons the job; either way nothing of
	# its run is recorded
	kill -CONT "$sleepy"
	wait_for grep -qE 'answer refused|lost the daemon' "$BATS_TEST_TMPDIR/agent-sleepy.log"
	cmp build/pc/slow.txt src/f3.txt
	run "$KILN" why slow.txt
	[[ "$output" == *"ran on: agent awake"* ]] || { echo "$output"; false; }
}

@test "an input edited while its tool runs on an agent: the run is cancelled there and the step built again from the new content" {
	slow_on_agent one
	echo "edited while it ran" >src/f3.tmp && mv src/f3.tmp src/f3.txt
	wait "$bpid" || { cat out; cat .kiln/kilnd.log; false; }
	[ "$(cat build/pc/slow.txt)" = "edited while it ran" ] || { cat out; cat .kiln/kilnd.log; false; }
	# the first run was stopped on the agent, not waited for
	grep -q 'slow.txt: cancelled by the daemon' "$BATS_TEST_TMPDIR/agent-one.log"
	# the log of the run that counted, brought back from the agent
	run --separate-stderr "$KILN" log slow.txt
	[ "$output" = "slow at work" ] || { echo "$output $stderr"; false; }
	[[ "$stderr" == *"ran on agent one"* ]] || { echo "$stderr"; false; }
	run "$KILN" build slow.txt
	[[ "$output" == *"0 ran, 1 up to date"* ]] || { echo "$output"; false; }
}

@test "files outside the project are never sent to an agent (.., a symlink out): the step runs here, as it would" {
	agents_project
	mkdir -p "$BATS_TEST_TMPDIR/outside"
	echo "secret-one" >"$BATS_TEST_TMPDIR/secret.txt"
	echo "secret-two" >"$BATS_TEST_TMPDIR/outside/secret.txt"
	ln -s "$BATS_TEST_TMPDIR/outside" link
	cat >>kiln.yaml <<'YAML'
  - { url: up.txt, tool: up, inputs: [src/f1.txt] }
  - { url: sym.txt, tool: sym, inputs: [src/f2.txt] }
YAML
	sed -i 's|^tools:|tools:\n  up: { shell: true, run: '"'"'cat "$KILN_PROJECT/../secret.txt" "${in}" >"${out}" 2>/dev/null; true'"'"' }\n  sym: { shell: true, run: '"'"'cat link/secret.txt 2>/dev/null; cp "${in}" "${out}"'"'"' }|' kiln.yaml
	daemon_up --local-jobs 0
	agent_up one -j 1
	run "$KILN" build -k up.txt sym.txt
	# the file above the project: the agent had none, this machine has
	# one: its run is not this machine's, so the step ran here
	grep -q 'up.txt: agent one lacked a file outside the project' .kiln/kilnd.log
	[ "$(head -1 build/pc/up.txt)" = "secret-one" ] || { echo "$output"; cat .kiln/kilnd.log; false; }
	# through a symlink out of the project: the local policy (a failure)
	grep -q 'sym.txt: agent one lacked a file outside the project' .kiln/kilnd.log
	[[ "$output" == *"sym.txt: checking its inputs after the run: a symlink on the path leads out of the project"* ]] || { echo "$output"; false; }
	# and neither secret ever reached the agent
	! grep -rqE "secret-(one|two)" "$BATS_TEST_TMPDIR/one/cache" || { grep -rlE "secret-(one|two)" "$BATS_TEST_TMPDIR/one/cache"; false; }
}

@test "kiln agent --cache-max: the cache is collected down to its bound, least recently used first" {
	agents_project
	for i in 1 2 3 4 5 6; do head -c 600000 /dev/urandom >"src/big$i.bin"; done
	for i in 1 2 3 4 5 6; do
		echo "  - { url: big$i.bin, tool: copy, inputs: [src/big$i.bin] }" >>kiln.yaml
	done
	daemon_up --local-jobs 0
	KILN_TEST_AGENT_GC_GRACE_S=0 agent_up small -j 1 --cache-max 1M
	"$KILN" build >out 2>&1 || { cat out; false; }
	for i in 1 2 3 4 5 6; do cmp "build/pc/big$i.bin" "src/big$i.bin"; done
	grep -q 'cache over its bound: removed' "$BATS_TEST_TMPDIR/agent-small.log"
	kb=$(du -sk "$BATS_TEST_TMPDIR/small/cache/store/objects" | cut -f1)
	[ "$kb" -lt 2048 ] || { echo "cache objects: $kb KiB"; false; }
}

@test "the daemon stopped while a step runs on an agent: it stops at once and cleanly, the agent drops the job" {
	slow_on_agent one
	pid=$(daemon_pid)
	"$KILN" stop
	! running "$pid"
	wait "$bpid" || true
	wait_for grep -q 'lost the daemon' "$BATS_TEST_TMPDIR/agent-one.log"
	# nothing of the run was recorded: the next daemon runs it again
	[ ! -e build/pc/slow.txt ]
	grep -q 'stopped' .kiln/kilnd.log
}

@test "kiln need from a tool on an agent is relayed: the needed step is built, its output laid out there, the need recorded" {
	agents_project
	mkdir -p levels
	printf 'a1\na2\n' >levels/one.lvl
	cat >>kiln.yaml <<'YAML'
  - { url: one.level, tool: levelc, inputs: [levels/one.lvl] }
YAML
	sed -i 's|^tools:|tools:\n  levelc: { shell: true, run: '"'"'for t in $(cat "${in}"); do p=$("$KILN" need "$t.txt") \|\| exit 1; echo "$t: $(cat "$p")"; done >"${out}"'"'"' }|' kiln.yaml
	sed -i 's|^sources: \[src, shaders\]|sources: [src, shaders, levels]|' kiln.yaml
	daemon_up --local-jobs 0
	agent_up one -j 2
	"$KILN" build one.level >out 2>&1 || { cat out; cat .kiln/kilnd.log; cat "$BATS_TEST_TMPDIR/agent-one.log"; false; }
	grep -q 'ran one.level .*on one' out
	printf 'a1: text 1\na2: text 2\n' | diff - build/pc/one.level
	# the needed steps were built for it, and the need is recorded: an
	# edit to one of them rebuilds the level, on the agent again
	run "$KILN" deps one.level
	[[ "$output" == *"a1.txt"* && "$output" == *"a2.txt"* ]] || { echo "$output"; false; }
	echo "text 2, edited" >src/f2.txt
	"$KILN" build one.level >out 2>&1 || { cat out; false; }
	grep -q 'ran one.level .*on one' out || { cat out; false; }
	printf 'a1: text 1\na2: text 2, edited\n' | diff - build/pc/one.level
	# a tool cannot use the relay for anything but its own need
	sock=$(ls "$BATS_TEST_TMPDIR"/one/cache/need.sock 2>/dev/null || ls /tmp/kiln-agent-*-need.sock | head -1)
	run --separate-stderr env KILN_SOCKET="ipc://$sock" KILN_STEP_TOKEN=forged "$KILN" need a1.txt
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"relays only kiln need from the steps it runs"* ]] || { echo "$stderr"; false; }
}

@test "with a shared cache, agents fetch inputs and put outputs there; the daemon's link carries neither" {
	[ -x /usr/sbin/nginx ] || skip "no nginx (Debian: nginx)"
	# the cache's nginx from cache_helpers.bash (its setup and teardown
	# are not this file's: ours are kept)
	local mine
	mine=$(declare -f teardown)
	source "$BATS_TEST_DIRNAME/cache_helpers.bash"
	eval "$mine"
	T=$BATS_TEST_TMPDIR
	mkdir -p "$T/srv/data/kiln" "$T/srv/tmp"
	nginx_start
	CACHE=$URL   # daemon_up sets URL to the daemon's
	agents_project
	sha() { sha256sum "$1" | cut -d' ' -f1; }
	# one source there already (CI put it): the agent's fetch of it does
	# not race the daemon's own upload of what it offers
	curl -sf -T src/f4.txt "$CACHE/cas/$(sha src/f4.txt)"
	KILN_CACHE_URL=$CACHE KILN_CACHE_MODE=readwrite daemon_up --local-jobs 0
	KILN_CACHE_URL=$CACHE KILN_CACHE_MODE=readwrite agent_up one -j 1
	"$KILN" build >out 2>&1 || { cat out; cat .kiln/kilnd.log "$BATS_TEST_TMPDIR/agent-one.log"; false; }
	[ "$(grep -c 'ran .* on one' out)" -eq 5 ] || { cat out; false; }
	cat src/f1.txt src/f2.txt src/f4.txt | cmp - build/pc/both.txt
	log=$T/srv/access.log
	# an input the agent fetched there (the daemon never reads sources
	# from the cache)
	grep -q "GET /kiln/cas/$(sha src/f4.txt) HTTP/1.1\" 200" "$log" || { cat "$log"; false; }
	# an output the agent put there, which the daemon then fetched
	out=$(sha build/pc/both.txt)
	grep -q "PUT /kiln/cas/$out HTTP/1.1\" 20[14]" "$log" || { cat "$log"; false; }
	grep -q "GET /kiln/cas/$out HTTP/1.1\" 200" "$log" || { cat "$log"; false; }
	[ "$(status_field cache_bytes_down)" -gt 0 ]
	# a corrupt copy there is caught by its SHA-256: the agent falls back
	# to the daemon, the result is still right
	echo "// common v9" >shaders/common.glsl
	printf 'tampered' >"$T/srv/data/kiln/cas/$(sha shaders/a.frag)"
	"$KILN" build a.spv >out 2>&1 || { cat out; false; }
	[ "$(head -1 build/pc/a.spv)" = "// common v9" ]
	tail -2 build/pc/a.spv | cmp - shaders/a.frag
}

@test "a second agent on the same cache is refused (it would empty the first one's work folders)" {
	agents_project
	daemon_up
	agent_up one -j 1
	run --separate-stderr timeout 20 "$KILN" agent --connect "$URL" \
		--token-file "$BATS_TEST_TMPDIR/token" --cache "$BATS_TEST_TMPDIR/one/cache"
	[ "$status" -eq 1 ] || { echo "$status $stderr"; false; }
	[[ "$stderr" == *"another agent uses the cache"* ]] || { echo "$stderr"; false; }
	# the first one is still there
	run "$KILN" status
	[[ "$output" == *"one: 1 slots"* ]]
}

@test "a bundle's step is packed by the daemon itself, even when every tool runs on agents" {
	agents_project
	printf 'bundles:\n  texts: ["a?.txt"]\n' >>kiln.yaml
	daemon_up --local-jobs 0
	agent_up one -j 1
	run --separate-stderr "$KILN" build --json a1.txt a2.txt bundles/texts
	[ "$status" -eq 0 ] || { echo "$output $stderr"; cat .kiln/kilnd.log; false; }
	# the copies ran on the agent, the bundle here
	[ "$(grep -c '"machine":"one"' <<<"$output")" -eq 3 ] || { echo "$output"; false; }
	line=$(grep '"url":"bundles/texts"' <<<"$output" | grep '"result":"ran"')
	[ -n "$line" ] || { echo "$output"; false; }
	[[ "$line" != *'"machine":"one"'* ]] || { echo "$line"; false; }
	[ "$(head -c 7 build/pc/bundles/texts.kpak)" = KILNPAK ]
	# never offered to the agent (which would refuse it: no such program)
	[ "$(grep -c 'did not run it' .kiln/kilnd.log)" -eq 0 ] || { cat .kiln/kilnd.log; false; }
	run "$KILN" status
	[[ "$output" == *"one: 1 slots, 0 running; 3 ran, 0 failed, 0 refused"* ]] || { echo "$output"; false; }
	run "$KILN" why bundles/texts
	[[ "$output" != *"ran on: agent"* ]] || { echo "$output"; false; }
}

@test "a step writing a folder output, and one reading it, run on the daemon's machine even with local jobs 0; the others on the agent" {
	agents_project
	cat >>kiln.yaml <<'YAML'
  - { url: split, tool: split, inputs: [src/f1.txt], outputs: { d: "parts/" } }
  - { url: joined.txt, tool: joinf, inputs: ["@split#d"] }
YAML
	sed -i "/^tools:/a\\
  split: { shell: true, run: 'cp \"\${in}\" \"\${out.d}/x\"; mkdir \"\${out.d}/s\"; echo y >\"\${out.d}/s/y\"' }\\
  joinf: { shell: true, run: 'cat \"\${in}/x\" \"\${in}/s/y\" >\"\${out}\"' }" kiln.yaml
	daemon_up --local-jobs 0
	agent_up one -j 1
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; cat .kiln/kilnd.log; false; }
	[ "$(cat build/pc/joined.txt)" = "$(printf 'text 1\ny')" ]
	[ "$(cat build/pc/parts/s/y)" = y ]
	for u in split joined.txt; do
		line=$(grep "\"url\":\"$u\"" <<<"$output" | grep '"result":"ran"')
		[ -n "$line" ] || { echo "$output"; false; }
		[[ "$line" != *'"machine":"one"'* ]] || { echo "$u ran on the agent: $line"; false; }
	done
	grep "\"url\":\"a1.txt\"" <<<"$output" | grep -q '"machine":"one"' || { echo "$output"; false; }
}
