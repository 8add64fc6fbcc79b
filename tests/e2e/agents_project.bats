#!/usr/bin/env bats
# agents_project.bats — a step on an agent sees the project as a local run
# does, without a checkout (docs/agents.md, "Files nobody declared"): a
# tool that fails without an undeclared file gets it on its next try, a
# project script run by path travels with the job, and the sample game
# (assets-sample/) builds on two agents with the bytes of a local build.

bats_require_minimum_version 1.5.0

load agents_helpers

# ran_on URL: the machine the --json build in $output says ran URL.
ran_on() {
	printf '%s\n' "$output" | grep '"event":"step"' | grep "\"url\":\"$1\"" |
		grep '"result":"ran"' | sed -n 's/.*"machine":"\([^"]*\)".*/\1/p'
}

# A "compiler" that reads the file its source #includes (undeclared), and
# exits 1 when it is missing: a.o from src/a.c and include/x.h.
include_project() {
	mkdir -p src include
	printf '#include include/x.h\nbody\n' >src/a.c
	echo "// x v1" >include/x.h
	# like a compiler: the include is named in the source only, and a
	# missing one is an error (exit 1), not a success the trace would catch
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  cc:
    shell: true
    run: 'for f in $(sed -n "s/^#include //p" "${in}"); do cat "$f" || exit 1; done >"${out}"; cat "${in}" >>"${out}"'
assets:
  - { url: a.o, tool: cc, inputs: [src/a.c] }
YAML
}

@test "a tool that exits 1 without its undeclared include builds on an agent: the include is sent with the next try" {
	include_project
	daemon_up --local-jobs 0
	agent_up one -j 1
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; cat .kiln/kilnd.log; false; }
	[ "$(ran_on a.o)" = one ] || { echo "$output"; false; }
	[ "$(head -1 build/pc/a.o)" = "// x v1" ]
	grep -q 'a.o: agent one lacked files its tool looked for' .kiln/kilnd.log ||
		{ cat .kiln/kilnd.log; false; }
	# recorded as a local run records it: an edit rebuilds it, there
	run "$KILN" deps a.o
	[[ "$output" == *"discovered include/x.h (trace)"* ]] || { echo "$output"; false; }
	echo "// x v2" >include/x.h
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(ran_on a.o)" = one ]
	[ "$(head -1 build/pc/a.o)" = "// x v2" ]
}

@test "an agent whose --cache goes through .. and a symlink: its tool's paths are rewritten, its steps run there" {
	include_project
	mkdir -p "$BATS_TEST_TMPDIR/real"
	ln -s real "$BATS_TEST_TMPDIR/link"
	daemon_up --local-jobs 0
	# agent_up starts it in $BATS_TEST_TMPDIR/one; the last --cache wins
	agent_up one -j 1 --cache ../link/cache
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; cat .kiln/kilnd.log; false; }
	[ "$(ran_on a.o)" = one ] || { echo "$output"; cat .kiln/kilnd.log; false; }
	[ "$(head -1 build/pc/a.o)" = "// x v1" ]
	[ -d "$BATS_TEST_TMPDIR/real/cache/work" ]
	run "$KILN" deps a.o
	[[ "$output" == *"discovered include/x.h (trace)"* ]] || { echo "$output"; false; }
}

# A step whose tool is a project script run by its interpreter.
script_project() {
	mkdir -p src tools
	echo "text" >src/a.txt
	printf '#!/bin/sh\n{ echo "by script v1"; cat "$1"; } >"$2"\n' >tools/x.sh
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  script: { run: [sh, tools/x.sh, "${in}", "${out}"] }
  line: { shell: true, run: 'sh tools/x.sh "${in}" "${out}"' }
assets:
  - { url: a.out, tool: script, inputs: [src/a.txt] }
  - { url: b.out, tool: line, inputs: [src/a.txt] }
YAML
}

@test "a project script run by path (sh tools/x.sh, in argv or a shell line) travels with the job: built on the agent at the first try, recorded as a local run records it" {
	script_project
	# the reference: what a local run discovers
	"$KILN" build >local.out 2>&1 || { cat local.out; false; }
	for u in a.out b.out; do
		"$KILN" deps $u | grep -v '^ *ran\|seconds\|when' >local-$u.deps
		grep -q 'discovered tools/x.sh (trace)' local-$u.deps || { cat local-$u.deps; false; }
	done
	sha256sum build/pc/a.out build/pc/b.out >local.sum
	"$KILN" stop
	rm -rf .kiln build
	daemon_up --local-jobs 0
	agent_up one -j 1
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; cat .kiln/kilnd.log; false; }
	[ "$(ran_on a.out)" = one ] && [ "$(ran_on b.out)" = one ] || { echo "$output"; false; }
	sha256sum -c local.sum
	# one try each: the script was in the job, not found missing
	run grep 'lacked files' .kiln/kilnd.log
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	for u in a.out b.out; do
		"$KILN" deps $u | grep -v '^ *ran\|seconds\|when' | diff local-$u.deps -
	done
	# an edit to the script rebuilds the steps, on the agent, with it
	printf '#!/bin/sh\n{ echo "by script v2"; cat "$1"; } >"$2"\n' >tools/x.sh
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(ran_on a.out)" = one ] && [ "$(ran_on b.out)" = one ]
	[ "$(head -1 build/pc/a.out)" = "by script v2" ]
	[ "$(head -1 build/pc/b.out)" = "by script v2" ]
}

@test "argv naming a file outside the project, or a symlink out of it: never sent; the step still builds" {
	mkdir -p src tools "$BATS_TEST_TMPDIR/outside"
	echo "text" >src/a.txt
	echo 'echo secret' >"$BATS_TEST_TMPDIR/outside/s.sh"
	ln -s "$BATS_TEST_TMPDIR/outside/s.sh" tools/link.sh
	# the words after the script are its "$@" (sh -c SCRIPT NAME ARGS...)
	cat >kiln.yaml <<YAML
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  probe:
    run: [sh, -c, 'for f in "\$@"; do test -e "\$f" && echo "has \$f"; done >"\${out}"; cat "\${in}" >>"\${out}"',
          sh, tools/link.sh, ../outside/s.sh, $BATS_TEST_TMPDIR/outside/s.sh]
    trace: false
assets:
  - { url: a.out, tool: probe, inputs: [src/a.txt] }
YAML
	daemon_up --local-jobs 0
	agent_up one -j 1
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; cat kiln.yaml; cat .kiln/kilnd.log; false; }
	[ "$(ran_on a.out)" = one ] || { echo "$output"; false; }
	# the agent's folder had neither relative one; the absolute path is
	# this machine's own file (the agent runs here), not a sent copy
	run grep -c '^has ' build/pc/a.out
	[ "$output" = 1 ] || { cat build/pc/a.out; false; }
	grep -qx "has $BATS_TEST_TMPDIR/outside/s.sh" build/pc/a.out
	[ -z "$(find "$BATS_TEST_TMPDIR/one" -name s.sh -o -name link.sh)" ]
}

# sample_copy: the sample game (assets-sample/) copied into this case's
# project folder, its C tools built (make sample-tools), as sample.bats.
sample_copy() {
	for t in convert optipng glslangValidator oggenc; do
		command -v $t >/dev/null || skip "$t is not installed (scripts/ensure-deps demo)"
	done
	make -C "$KILN_TOP" --no-print-directory sample-tools >/dev/null
	tar -C "$KILN_TOP/assets-sample" --exclude=./build --exclude=./.kiln -cf - . | tar -xf -
}

# Every file under build/, by name and hash.
build_sums() {
	(cd build && find . -type f | LC_ALL=C sort | xargs sha256sum)
}

@test "the sample builds on two agents with --local-jobs 0: no failure, every output identical to a local build" {
	sample_copy
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	build_sums >"$BATS_TEST_TMPDIR/local.sums"
	nlocal=$(printf '%s\n' "$output" | grep '"event":"step"' | grep -c '"result":"ran"')
	"$KILN" stop
	rm -rf .kiln build
	daemon_up --local-jobs 0
	agent_up one -j 2
	agent_up two -j 2
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; cat .kiln/kilnd.log; false; }
	summary=$(printf '%s\n' "$output" | grep '"event":"build"')
	[ "$(json_field failed "$summary")" = 0 ] || { echo "$summary"; false; }
	[ "$(json_field skipped "$summary")" = 0 ] || { echo "$summary"; false; }
	build_sums | diff "$BATS_TEST_TMPDIR/local.sums" -
	# every tool ran on an agent (the bundles are packed by the daemon),
	# the shaders too, once their include was sent
	steps=$(printf '%s\n' "$output" | grep '"event":"step"' | grep '"result":"ran"')
	[ "$(grep -c . <<<"$steps")" -eq "$nlocal" ] || { echo "$steps"; false; }
	[ "$(grep -v '"url":"bundles/' <<<"$steps" | grep -vc '"machine":"one"\|"machine":"two"')" -eq 0 ] ||
		{ echo "$steps"; false; }
	for s in shaders/sprite.frag shaders/sprite.vert; do
		[[ "$(ran_on $s)" == one || "$(ran_on $s)" == two ]] || { echo "$steps"; false; }
	done
}
