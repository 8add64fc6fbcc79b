#!/usr/bin/env bats
# kiln need (docs/build.md, "kiln need"): a step's tool asks the daemon for
# another step's output mid-run; the daemon builds it on demand, lends the
# waiting step's -j slot, records the dependency, and checks it again
# before reusing the step's result — warm and after a restart.

bats_require_minimum_version 1.5.0

load daemon_helpers

# A level "compiler" that reads the texture names listed in its input and
# asks for each one with kiln need; textures are cp steps nobody else
# wants. Plus steps for the error cases. Tools that must overlap wait for
# each other, not for a time: waitlong runs while a process named
# kiln-share-hold does (the test holds it). peer and marker: peer looks
# for marker and, seeing it, starts a process named kiln-peer-saw and
# lasts until marker is gone; marker lasts until it sees kiln-peer-saw.
# Neither can end before the other has seen it (each gives up after 60 s,
# so alone each ends and peer says so; 10 s could pass between their
# starts on a loaded machine). An earlier handshake let peer end at once
# and marker wait 60 s for a peer long gone.
write_project() {
	mkdir -p src/tex levels
	echo stone-v1 >src/tex/stone.txt
	echo grass-v1 >src/tex/grass.txt
	echo other-v1 >src/tex/other.txt
	printf 'stone\ngrass\n' >levels/one.lvl
	cat >kiln.yaml <<'YAML'
kiln: 1
project: needs
sources: [src, levels]
profiles:
  pc:
tools:
  copy:
    run: [cp, "${in}", "${out}"]
  levelc:
    run: 'for t in $(cat ${in}); do p=$("$KILN" need "textures/$t.png") || exit 1; echo "$t at $p: $(cat "$p")"; done > ${out}'
    shell: true
  needer:
    run: 'p=$("$KILN" need ${param.other}) || exit 1; cat "$p" > ${out}'
    shell: true
  slow:
    run: 'sleep 29.5; echo slow > ${out}'
    shell: true
  pair:
    run: 'echo L > ${out.left}; echo R > ${out.right}'
    shell: true
  pairuser:
    run: '"$KILN" need multi/pair > ${out} && "$KILN" need multi/pair --output right >> ${out}'
    shell: true
  waitlong:
    run: 'while pgrep -f "[k]iln-share-hold" >/dev/null; do sleep 0.05; done; echo tex > ${out}'
    shell: true
  twin:
    run: '"$KILN" need textures/stone.png > ${out}.a & a=$!; "$KILN" need textures/grass.png > ${out}.b & b=$!; wait $a || exit 1; wait $b || exit 1; cat ${out}.a ${out}.b > ${out}; rm ${out}.a ${out}.b'
    shell: true
  twincyc:
    run: '"$KILN" need textures/stone.png > ${out}.a 2>&1 & a=$!; "$KILN" need pcyc/y > ${out}.b 2>&1 & b=$!; wait $a; sa=$?; wait $b; sb=$?; echo "stone $sa: $(cat ${out}.a)"; echo "y $sb: $(cat ${out}.b)"; exit 1'
    shell: true
  peer:
    run: ': kiln-peer-looking; for i in $(seq 600); do pgrep -f "[k]iln-peer-marker" >/dev/null && break; sleep 0.1; done; if pgrep -f "[k]iln-peer-marker" >/dev/null; then r=together; n=kiln-peer; sh -c "sleep 60; :" "$n-saw" & for i in $(seq 600); do pgrep -f "[k]iln-peer-marker" >/dev/null || break; sleep 0.1; done; else r=alone; fi; echo $r > ${out}'
    shell: true
  marker:
    run: 'sh -c "for i in \$(seq 1200); do pgrep -f \"[k]iln-peer-saw\" >/dev/null && break; sleep 0.05; done" kiln-peer-marker; echo marker > ${out}'
    shell: true
  twinpar:
    run: 'a=$("$KILN" need par/peer) & b=$("$KILN" need par/marker) & wait; "$KILN" need par/peer >/dev/null && "$KILN" need par/marker >/dev/null && cat build/pc/par/peer > ${out}'
    shell: true
  envdump:
    run: 'printf "%s\n%s\n%s\n" "$KILN" "$KILN_SOCKET" "$KILN_STEP_TOKEN" > ${out}'
    shell: true
rules:
  - match: "src/tex/*.txt"
    url: "textures/${match.name}.png"
    tool: copy
  - match: "levels/*.lvl"
    url: "levels/${match.name}"
    tool: levelc
assets:
  - url: cyc/a
    tool: needer
    params: { other: cyc/b }
  - url: cyc/b
    tool: needer
    params: { other: cyc/a }
  - url: stat/base
    tool: needer
    params: { other: stat/top }
  - url: stat/top
    tool: copy
    inputs: ["@stat/base"]
  - url: bad/unknown
    tool: needer
    params: { other: textures/nothing.png }
  - url: slow/tex
    tool: slow
  - url: slow/level
    tool: needer
    params: { other: slow/tex }
  - url: multi/pair
    tool: pair
    outputs: { left: l.txt, right: r.txt }
  - url: multi/user
    tool: pairuser
  - url: env/dump
    tool: envdump
  - url: share/tex
    tool: waitlong
  - url: share/level
    tool: needer
    params: { other: share/tex }
  - url: twin/both
    tool: twin
  - url: par/peer
    tool: peer
  - url: par/marker
    tool: marker
  - url: par/both
    tool: twinpar
  - url: pcyc/x
    tool: twincyc
  - url: pcyc/y
    tool: needer
    params: { other: pcyc/x }
YAML
}

ran() {
	printf '%s\n' "$output" | grep '"result":"ran"' | sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//'
}

level_built_ok() {
	[ "$(cat build/pc/levels/one)" = "$(printf 'stone at build/pc/textures/stone.png: %s\ngrass at build/pc/textures/grass.png: %s' "$1" "$2")" ]
}

@test "a level that needs two textures gets them built on demand and reads them" {
	write_project
	run "$KILN" build --json levels/one
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(ran)" = "levels/one textures/grass.png textures/stone.png" ] || { echo "$output"; false; }
	level_built_ok stone-v1 grass-v1 || { cat build/pc/levels/one; false; }
	# the build covered the needed steps (1 asked for, 2 needed)
	[ "$(json_field total "$(printf '%s\n' "$output" | grep '"event":"build"')")" = 3 ]
	# textures nobody needed are not built
	[ ! -e build/pc/textures/other.png ]
	grep -q '^textures/stone.png	' build/pc/kiln-index.txt
	# kiln deps lists what it needed; kiln rdeps finds the level from a
	# texture step, and from the texture's source file transitively
	run "$KILN" deps levels/one
	[[ "$output" == *"needs textures/stone.png#out "* ]] || { echo "$output"; false; }
	[[ "$output" == *"needs textures/grass.png#out "* ]] || { echo "$output"; false; }
	run "$KILN" rdeps textures/stone.png
	[ "$output" = "levels/one  (needs textures/stone.png)" ] || { echo "$output"; false; }
	run "$KILN" rdeps --all src/tex/stone.txt
	[ "${lines[0]}" = "textures/stone.png  (input src/tex/stone.txt)" ] || { echo "$output"; false; }
	[ "${lines[1]}" = "  levels/one  (needs textures/stone.png)" ] || { echo "$output"; false; }
}

@test "kiln need: rerun when a needed texture changes, not for unrelated files; no tools when nothing changed" {
	write_project
	run "$KILN" build --json levels/one
	[ "$status" -eq 0 ]
	run "$KILN" build --json levels/one
	[ "$status" -eq 0 ]
	[ "$(ran)" = "" ] || { echo "$output"; false; }
	echo other-v2 >src/tex/other.txt
	run "$KILN" build --json levels/one
	[ "$(ran)" = "" ] || { echo "$output"; false; }
	echo stone-v2 >src/tex/stone.txt
	run "$KILN" build --json levels/one
	[ "$status" -eq 0 ]
	[ "$(ran)" = "levels/one textures/stone.png" ] || { echo "$output"; false; }
	level_built_ok stone-v2 grass-v1
	run "$KILN" why levels/one
	[[ "$output" == *"needed textures/stone.png changed "*" -> "* ]] || { echo "$output"; false; }
	run "$KILN" build --json levels/one
	[ "$(ran)" = "" ] || { echo "$output"; false; }
}

@test "kiln need after a daemon restart: the cached result's needs are checked cold" {
	write_project
	run "$KILN" build --json levels/one
	[ "$status" -eq 0 ]
	"$KILN" stop
	run "$KILN" build --json levels/one
	[ "$status" -eq 0 ]
	[ "$(ran)" = "" ] || { echo "$output"; false; }
	# the textures were brought up to date first (without running)
	[ "$(json_field total "$(printf '%s\n' "$output" | grep '"event":"build"')")" = 3 ]
	"$KILN" stop
	echo grass-v2 >src/tex/grass.txt
	run "$KILN" build --json levels/one
	[ "$status" -eq 0 ]
	[ "$(ran)" = "levels/one textures/grass.png" ] || { echo "$output"; false; }
	level_built_ok stone-v1 grass-v2
	run "$KILN" why levels/one
	[[ "$output" == *"needed textures/grass.png changed "* ]] || { echo "$output"; false; }
	# deleting build/ restores everything from the store, running nothing
	"$KILN" stop
	rm -rf build
	run "$KILN" build --json levels/one
	[ "$(ran)" = "" ] || { echo "$output"; false; }
	level_built_ok stone-v1 grass-v2
}

@test "kiln need with -j 1 does not deadlock: the waiting step lends its slot" {
	write_project
	run timeout 60 "$KILN" build --json -j 1 levels/one
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(ran)" = "levels/one textures/grass.png textures/stone.png" ]
	level_built_ok stone-v1 grass-v1
}

@test "a need cycle fails both steps with the cycle printed" {
	write_project
	run timeout 60 "$KILN" build -j 1 cyc/a
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	[[ "$output" == *"FAILED cyc/a"* ]] || { echo "$output"; false; }
	[[ "$output" == *"FAILED cyc/b"* ]] || { echo "$output"; false; }
	[ "$(printf '%s\n' "$output" | grep -c 'need cycle: cyc/[ab] -> cyc/[ab] -> cyc/[ab]')" -eq 2 ] || { echo "$output"; false; }
	# the daemon is fine afterwards
	run "$KILN" build --json levels/one
	[ "$status" -eq 0 ]
}

@test "needing a step that depends on the needer fails cleanly" {
	write_project
	run timeout 60 "$KILN" build stat/top
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	[[ "$output" == *"FAILED stat/base"* ]]
	[[ "$output" == *"need cycle: stat/base -> stat/top -> stat/base"* ]] || { echo "$output"; false; }
	[[ "$output" == *"skipped stat/top"* ]]
}

@test "an unknown URL fails the step with a clear message" {
	write_project
	run "$KILN" build bad/unknown
	[ "$status" -eq 1 ]
	[[ "$output" == *"no step of profile pc has the URL 'textures/nothing.png'"* ]] || { echo "$output"; false; }
}

@test "kiln need outside a step exits 2; a made-up token exits 1" {
	write_project
	run -2 env -u KILN_SOCKET -u KILN_STEP_TOKEN "$KILN" need textures/stone.png
	[[ "$output" == *"not inside a build step"* ]]
	"$KILN" status >/dev/null
	run -1 env KILN_SOCKET="ipc://$P/.kiln/kilnd.sock" KILN_STEP_TOKEN=0123456789abcdef0123456789abcdef \
		"$KILN" need textures/stone.png
	[[ "$output" == *"token is unknown or expired"* ]] || { echo "$output"; false; }
}

@test "kiln need of a step with several outputs prints each; --output picks one" {
	write_project
	run "$KILN" build multi/user
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/pc/multi/user)" = "$(printf 'build/pc/multi/l.txt\nbuild/pc/multi/r.txt\nbuild/pc/multi/r.txt')" ]
}

@test "every tool gets KILN, KILN_SOCKET and a fresh KILN_STEP_TOKEN" {
	write_project
	run "$KILN" build env/dump
	[ "$status" -eq 0 ]
	[ "$(sed -n 1p build/pc/env/dump)" = "$(cd "$(dirname "$KILND")" && pwd -P)/kiln" ]
	[ "$(sed -n 2p build/pc/env/dump)" = "ipc://$P/.kiln/kilnd.sock" ]
	sed -n 3p build/pc/env/dump | grep -Eq '^[0-9a-f]{32}$'
}

@test "cancelling a build kills a step suspended on kiln need" {
	write_project
	"$KILN" build --json slow/level >build.out 2>&1 &
	bp=$!
	wait_for pgrep -f -- "[k]iln need slow/tex"
	kill -INT "$bp"
	st=0
	wait "$bp" || st=$?
	[ "$st" -eq 130 ] || { echo "exit $st"; cat build.out; false; }
	wait_for bash -c '! pgrep -f -- "[k]iln need slow/tex" && ! pgrep -f "[s]leep 29.5"'
}

@test "cancelling one of two builds sharing a suspended step leaves the other whole" {
	write_project
	"$KILND" --project . --verbose
	bash -c 'exec -a kiln-share-hold sleep 60' >/dev/null 2>&1 &
	hold=$!
	"$KILN" build --json share/level >b1.out 2>&1 &
	b1=$!
	wait_for pgrep -f -- "[k]iln need share/tex"
	"$KILN" build --json share/level >b2.out 2>&1 &
	b2=$!
	# the second build has joined the suspended step: the engine
	# schedules a build's steps before it logs the build
	wait_for builds_started 2 || { cat .kiln/kilnd.log; false; }
	kill -INT "$b1"
	st=0
	wait "$b1" || st=$?
	[ "$st" -eq 130 ] || { echo "b1 exit $st"; kill "$hold"; cat b1.out; false; }
	kill "$hold"   # the shared step may finish now
	st=0
	wait "$b2" || st=$?
	[ "$st" -eq 0 ] || { echo "b2 exit $st"; cat b2.out; false; }
	[ "$(cat build/pc/share/level)" = tex ]
	# the needed step was not killed and run again: it ran once
	run "$KILN" build --json share/level
	[ "$(ran)" = "" ] || { echo "$output"; false; }
}

# x/a and x/b need the step named in their input file, if any.
write_swap_project() {
	mkdir -p src
	: >src/a.cfg
	echo x/a >src/b.cfg
	cat >kiln.yaml <<'YAML'
kiln: 1
project: swap
sources: [src]
profiles:
  pc:
tools:
  maybe:
    run: 'o=$(cat ${in}); if [ -n "$o" ]; then p=$("$KILN" need "$o") || exit 1; cat "$p" > ${out}; else echo none > ${out}; fi'
    shell: true
assets:
  - url: x/a
    tool: maybe
    inputs: [src/a.cfg]
  - url: x/b
    tool: maybe
    inputs: [src/b.cfg]
YAML
}

@test "a need reversed since the last build is no cycle: stale dynamic prerequisites are hints" {
	write_swap_project
	run "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/pc/x/b)" = none ]
	# now x/a needs x/b and x/b needs nothing; x/b's last result needed
	# x/a, so it is decided after x/a, which needs it
	echo x/b >src/a.cfg
	: >src/b.cfg
	for i in 1 2; do
		run "$KILN" build --json
		[ "$status" -eq 0 ] || { echo "build $i: $output"; false; }
		[ "$(cat build/pc/x/a)" = none ] && [ "$(cat build/pc/x/b)" = none ]
	done
	[ "$(ran)" = "" ] || { echo "$output"; false; }
	# and back: each build after a change is right the first time
	echo x/a >src/b.cfg
	: >src/a.cfg
	run "$KILN" build --json -j 1
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(ran)" = "x/b" ] || { echo "$output"; false; }   # x/a: its old result
	"$KILN" stop
	echo x/b >src/a.cfg
	: >src/b.cfg
	run "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "cold: $output"; false; }
	[ "$(cat build/pc/x/a)" = none ] && [ "$(cat build/pc/x/b)" = none ]
	# a true cycle still fails, on every build
	echo x/b >src/a.cfg
	echo x/a >src/b.cfg
	for i in 1 2; do
		run timeout 60 "$KILN" build
		[ "$status" -eq 1 ] || { echo "$output"; false; }
		[[ "$output" == *"need cycle: x/"?" -> x/"?" -> x/"?* ]] || { echo "$output"; false; }
	done
}

@test "several kiln needs at once from one step at -j 1: all answered, no deadlock" {
	write_project
	run timeout 60 "$KILN" build --json -j 1 twin/both
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/pc/twin/both)" = "$(printf 'build/pc/textures/stone.png\nbuild/pc/textures/grass.png')" ]
	[ "$(ran)" = "textures/grass.png textures/stone.png twin/both" ] || { echo "$output"; false; }
}

@test "kiln needs asked at once are built at once" {
	write_project
	run timeout 60 "$KILN" build --json -j 2 par/both
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# par/peer ran while par/marker ran: both were scheduled together
	[ "$(cat build/pc/par/both)" = together ]
}

@test "of several kiln needs at once, the one closing a cycle gets the error, the others their paths" {
	write_project
	# -k: without it the failed pcyc/y stops the build, and whether
	# stone was done by then is a race
	run timeout 60 "$KILN" build -k -j 1 pcyc/x
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	[[ "$output" == *"stone 0: build/pc/textures/stone.png"* ]] || { echo "$output"; false; }
	[[ "$output" == *"y 1: kiln: need: pcyc/y: need cycle: pcyc/"?" -> pcyc/"?" -> pcyc/"?* ]] || { echo "$output"; false; }
	[[ "$output" == *"FAILED pcyc/y"* ]] || { echo "$output"; false; }
}
