#!/usr/bin/env bats
# Never serve wrong bytes (issue 20): an input edited while its tool runs,
# an undo of a discovered dependency, a source replaced by a symlink out of
# the project under a warm daemon, blobs deleted under a warm daemon, an
# in-place edit that keeps size and mtime. Real kilnd and kiln, real tools
# (sh, cat, sleep); outputs checked on disk and from `kiln build --json`.

bats_require_minimum_version 1.5.0

load daemon_helpers

# build ARGS...: kiln build --json; RAN / REUSED are the sorted URLs of the
# steps that ran / were served from the action cache.
build() {
	run --separate-stderr "$KILN" build --json "$@"
	RAN=$(step_urls ran)
	REUSED=$(step_urls reused)
}

step_urls() {
	printf '%s\n' "$output" | grep '"event":"step"' | grep "\"result\":\"$1\"" |
		sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//'
}

build_ok() {
	build "$@"
	[ "$status" -eq 0 ] || { echo "status $status"; echo "$output"; echo "$stderr"; false; }
}

expect_ran() {
	[ "$RAN" = "$1" ] || { echo "ran: '$RAN'"; echo "expected: '$1'"; echo "$output"; echo "$stderr"; false; }
}

# A shell tool that sleeps, reads its input, sleeps again: an edit can land
# before it reads, while it runs, or after it exited but before kiln
# recorded the result (KILN_TEST_HOLD_FINISH_MS widens that last window).
write_slow_project() {
	mkdir -p src
	printf 'v0\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  slowcat:
    run: "sleep 0.1; cat ${in} > ${out}; sleep 0.05"
    shell: true
rules:
  - match: "src/*.txt"
    url: "c/${match.name}.txt"
    tool: slowcat
YAML
}

@test "an input edited while its tool runs is never cached under the old key (50 edits: before the read, during, after the exit)" {
	write_slow_project
	# the daemon waits 0.2 s between a tool's end and recording its result
	export KILN_TEST_HOLD_FINISH_MS=200
	build_ok
	# (not $i: bats' run clobbers it)
	for iter in $(seq 1 50); do
		printf 'one-%s\n' "$iter" >src/a.txt
		"$KILN" build --json >"$BATS_TEST_TMPDIR/b.out" 2>&1 &
		bpid=$!
		# the tool reads at ~0.1 s and exits at ~0.15-0.2 s; kiln records
		# at ~0.35-0.4 s: edits before the read, during the run, between
		# the exit and the record
		case $((iter % 5)) in
		0) delay=0 ;; 1) delay=0.05 ;; 2) delay=0.12 ;; 3) delay=0.24 ;; 4) delay=0.3 ;;
		esac
		sleep "$delay"   # kept: where the edit lands is the subject
		printf 'two-%s\n' "$iter" >src/a.txt
		wait "$bpid" || { cat "$BATS_TEST_TMPDIR/b.out"; false; }
		# whatever that build did, the next one must serve two-$iter
		build_ok
		got=$(cat build/pc/c/a.txt)
		[ "$got" = "two-$iter" ] || { echo "iteration $iter (edit at $delay s): build/ holds '$got' for two-$iter"; cat "$BATS_TEST_TMPDIR/b.out"; echo "$output"; false; }
		# and the key of one-$iter, if cached, must give one-$iter
		printf 'one-%s\n' "$iter" >src/a.txt
		build_ok
		got=$(cat build/pc/c/a.txt)
		[ "$got" = "one-$iter" ] || { echo "iteration $iter (edit at $delay s): the key of one-$iter served '$got'"; cat "$BATS_TEST_TMPDIR/b.out"; echo "$output"; false; }
	done
	# each window was hit: some run was thrown away and decided again
	grep -q 'changed while its tool ran' .kiln/kilnd.log
}

# slowcat_sleeping: this project's slowcat (sleep 0.6 before its read)
# is in that sleep.
slowcat_sleeping() {
	local pid
	for pid in $(pgrep -f 'sleep 0.6; cat'); do
		[ "$(readlink "/proc/$pid/cwd")" = "$P" ] && return 0
	done
	return 1
}

@test "an edit while the tool runs makes kiln decide the step again, and says why" {
	write_slow_project
	sed -i 's/sleep 0.1; cat/sleep 0.6; cat/' kiln.yaml
	build_ok
	printf 'first\n' >src/a.txt
	"$KILN" build --json >"$BATS_TEST_TMPDIR/b.out" 2>&1 &
	bpid=$!
	# the tool runs and has not read yet (it reads after 0.6 s)
	wait_for slowcat_sleeping || { cat "$BATS_TEST_TMPDIR/b.out"; false; }
	printf 'second\n' >src/a.txt
	wait "$bpid"
	[ "$(cat build/pc/c/a.txt)" = "second" ]
	grep -q 'changed while its tool ran' .kiln/kilnd.log || { cat .kiln/kilnd.log; false; }
	# the key of "first" has no result: the tool runs for it
	printf 'first\n' >src/a.txt
	build_ok
	expect_ran "c/a.txt"
	[ "$(cat build/pc/c/a.txt)" = "first" ]
}

# A traced tool (cat) that reads an include nobody declared, and a
# depfile tool (trace: false) that reads one it names in its depfile.
write_include_project() {
	mkdir -p src inc
	printf 'main\n' >src/m.txt
	printf 'include v1\n' >inc/i.h
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  traced: { run: [sh, -c, 'cat "$0" inc/i.h > "$1"', "${in}", "${out}"] }
  dep:
    run: [sh, -c, 'cat "$0" inc/i.h > "$1"; echo "x: inc/i.h" > "$2"', "${in}", "${out}", "${depfile}"]
    depfile: true
    trace: false
assets:
  - { url: t.txt, tool: traced, inputs: [src/m.txt] }
  - { url: d.txt, tool: dep, inputs: [src/m.txt] }
YAML
}

@test "undoing an edit to a discovered dependency is served from the store, warm and after a restart" {
	write_include_project
	build_ok
	expect_ran "d.txt t.txt"
	printf 'include v2\n' >inc/i.h
	build_ok
	expect_ran "d.txt t.txt"
	[ "$(tail -n 1 build/pc/t.txt)" = "include v2" ]
	printf 'include v1\n' >inc/i.h
	build_ok
	expect_ran ""
	[ "$REUSED" = "d.txt t.txt" ] || { echo "reused: '$REUSED'"; echo "$output"; false; }
	[ "$(tail -n 1 build/pc/t.txt)" = "include v1" ]
	[ "$(tail -n 1 build/pc/d.txt)" = "include v1" ]
	"$KILN" stop
	printf 'include v2\n' >inc/i.h
	build_ok
	expect_ran ""
	[ "$(tail -n 1 build/pc/t.txt)" = "include v2" ]
	# a third content is a miss, and the two before it stay served
	printf 'include v3\n' >inc/i.h
	build_ok
	expect_ran "d.txt t.txt"
	printf 'include v1\n' >inc/i.h
	build_ok
	expect_ran ""
	[ "$(tail -n 1 build/pc/d.txt)" = "include v1" ]
}

@test "gc keeps every blob a kept result names: after gc, every cached variant is served or rebuilt right" {
	write_include_project
	for v in v1 v2 v3; do
		printf 'include %s\n' "$v" >inc/i.h
		build_ok
	done
	"$KILN" stop
	run "$KILN" gc --max-size 0
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	for v in v1 v2 v3; do
		printf 'include %s\n' "$v" >inc/i.h
		build_ok
		[ "$(tail -n 1 build/pc/t.txt)" = "include $v" ]
		[ "$(tail -n 1 build/pc/d.txt)" = "include $v" ]
	done
}

write_copy_project() {
	mkdir -p src
	printf 'alpha\n' >src/a.txt
	printf 'bravo\n' >src/b.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - match: "src/*.txt"
    url: "c/${match.name}.txt"
    tool: copy
YAML
}

@test "a source replaced by a symlink out of the project is refused by a warm daemon; its bytes reach neither the store nor build/" {
	write_copy_project
	printf 'TOPSECRET-%s\n' "$RANDOM" >"$BATS_TEST_TMPDIR/secret"
	build_ok
	ln -sf "$BATS_TEST_TMPDIR/secret" src/b.txt
	build
	[ "$status" -ne 0 ] || { echo "the build succeeded"; echo "$output"; false; }
	[[ "$output$stderr" == *"src/b.txt"* ]] || { echo "$output"; echo "$stderr"; false; }
	! grep -rq TOPSECRET build .kiln/store/objects || false
	# the same refusal from a cold daemon
	"$KILN" stop
	build
	[ "$status" -ne 0 ]
	! grep -rq TOPSECRET build .kiln/store/objects || false
}

@test "a source whose folder is replaced by a symlink out of the project is refused by a warm daemon" {
	write_copy_project
	mkdir -p "$BATS_TEST_TMPDIR/out"
	printf 'TOPSECRET-%s\n' "$RANDOM" >"$BATS_TEST_TMPDIR/out/a.txt"
	printf 'TOPSECRET-%s\n' "$RANDOM" >"$BATS_TEST_TMPDIR/out/b.txt"
	build_ok
	mv src src.old
	ln -s "$BATS_TEST_TMPDIR/out" src
	build
	[ "$status" -ne 0 ] || { echo "the build succeeded"; echo "$output"; false; }
	! grep -rq TOPSECRET build .kiln/store/objects || false
}

@test "blobs deleted from the store under a warm daemon are noticed: the steps run again and the index names blobs that exist" {
	write_copy_project
	build_ok
	rm -rf .kiln/store/objects/??
	build_ok
	expect_ran "c/a.txt c/b.txt"
	while IFS=$'\t' read -r url h _; do
		case $url in "kiln-index "*) continue ;; esac
		"$KILN" cat "$h" >/dev/null || { echo "index names $h ($url), not in the store"; false; }
	done <build/pc/kiln-index.txt
	[ "$(cat build/pc/c/a.txt)" = "alpha" ]
}

@test "a source edited in place with its size and mtime kept is rebuilt" {
	write_copy_project
	build_ok
	touch -r src/a.txt "$BATS_TEST_TMPDIR/ref"
	# kept: the edit must come a clock tick later (its ctime differs)
	sleep 0.05
	printf 'ALPHA\n' >src/a.txt
	touch -r "$BATS_TEST_TMPDIR/ref" src/a.txt
	[ "$(stat -c %y src/a.txt)" = "$(stat -c %y "$BATS_TEST_TMPDIR/ref")" ]
	build_ok
	expect_ran "c/a.txt"
	[ "$(cat build/pc/c/a.txt)" = "ALPHA" ]
}
