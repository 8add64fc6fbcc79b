#!/usr/bin/env bats
# Sizes: projects larger than the loader's and the engine's first guesses
# at their tables. Three rules over the same files (a/, b/, c/ of each)
# once made more URLs than the loader's URL map had slots, and it probed
# the full table for ever: `kiln check` spun at 100% CPU, kilnd too, and
# `kiln build`, `kiln status` and `kiln stop` hung (issue 36). Every
# command here runs under `timeout`, so a regression fails the test
# instead of stalling the suite. No timing is asserted: the figures are
# in docs/build.md.
#
# Each project is checked, dry-run (kilnd loads it and decides every
# step), built in full, built again (nothing runs), and asked for its
# status; then the daemon stops. A full build of the 33,000 cp steps takes
# about a minute under the ASan build on a loaded 2-core machine.

bats_require_minimum_version 1.5.0

load daemon_helpers

# sources N: src/f00000.txt .. each holding its own name.
sources() {
	mkdir -p src
	awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) { f = sprintf("src/f%05d.txt", i);
		print f > f; close(f) } }'
}

# check_steps N: kiln check sees N steps in profile default.
check_steps() {
	run timeout 300 "$KILN" check
	[ "$status" -eq 0 ] || { echo "kiln check exited $status: $output"; return 1; }
	[[ "$output" == *"profile default: $1 steps"* ]] ||
		{ echo "kiln check: want $1 steps, saw: $output"; return 1; }
}

# dry_run_all N: kilnd loads the project and would run all N steps.
dry_run_all() {
	run --separate-stderr timeout 600 "$KILN" build -n
	[ "$status" -eq 0 ] || { echo "kiln build -n exited $status: $output $stderr"; return 1; }
	[[ "$output" == *"$1 of $1 steps of profile default would run"* ]] ||
		{ echo "kiln build -n: want $1 of $1, saw: ${output: -300}"; return 1; }
}

# build_all N URL...: a full build runs N steps, the outputs of the URLs
# given are the copies of the sources named after them, and a second
# build runs nothing.
build_all() {
	local n=$1 u
	shift
	run --separate-stderr timeout 1200 "$KILN" build -q
	[ "$status" -eq 0 ] || { echo "kiln build exited $status: ${output: -500} $stderr"; return 1; }
	[[ "$output" == *"profile default: $n steps,"*" 0 failed, 0 skipped"* ]] ||
		{ echo "want $n steps built: ${output: -500}"; return 1; }
	for u in "$@"; do
		[ "$(cat "build/default/$u")" = "$(cat "$(want_of "$u")")" ] ||
			{ echo "build/default/$u: '$(cat "build/default/$u" 2>&1)'"; return 1; }
	done
	run --separate-stderr timeout 600 "$KILN" build -q
	[ "$status" -eq 0 ] && [[ "$output" == *"$n steps, 0 ran, $n up to date"* ]] ||
		{ echo "second build: $output $stderr"; return 1; }
}

# the daemon still answers and stops
status_and_stop() {
	run timeout 60 "$KILN" status
	[ "$status" -eq 0 ] || { echo "kiln status exited $status: $output"; return 1; }
	run timeout 60 "$KILN" stop
	[ "$status" -eq 0 ] || { echo "kiln stop exited $status: $output"; return 1; }
}

# want_of URL: the source whose copy URL's output is (x*: the one file).
want_of() {
	case $1 in
	x*) echo src/f00000.txt ;;
	*) echo "src/${1##*/}.txt" ;;
	esac
}

# Three tools that copy alike but differ in argv: 33,000 different action
# keys, so every step runs. 11,000 files, not 10,000: the old URL map had
# 2 x (files + 1024) slots rounded up to a power of 2, 32,768 for 10,000
# files, which 30,000 URLs did not fill; 33,000 did.
@test "three rules over 11,000 files make 33,000 steps that check, dry-run and build" {
	sources 11000
	cat >kiln.yaml <<'YAML'
kiln: 1
project: sizes
sources: [src]
profiles: { default: }
tools:
  copy_a: { run: [cp, "${in}", "${out}"] }
  copy_b: { run: [cp, --, "${in}", "${out}"] }
  copy_c: { run: [cp, -T, "${in}", "${out}"] }
rules:
  - { match: "src/*.txt", url: "a/${match.name}", tool: copy_a }
  - { match: "src/*.txt", url: "b/${match.name}", tool: copy_b }
  - { match: "src/*.txt", url: "c/${match.name}", tool: copy_c }
YAML
	check_steps 33000
	dry_run_all 33000
	build_all 33000 a/f00000 a/f05500 a/f10999 b/f00000 b/f04321 b/f10999 \
	          c/f00000 c/f07777 c/f10999
	status_and_stop
}

# The assets share one action key: one runs, 19,999 are reused.
@test "20,000 explicit assets over one source file check, dry-run and build" {
	local i
	sources 1
	cat >kiln.yaml <<'YAML'
kiln: 1
project: sizes
sources: [src]
profiles: { default: }
tools:
  copy: { run: [cp, "${in}", "${out}"] }
YAML
	# four files of 5,000 (a description file is at most 1 MiB); an input
	# is named from its file's folder
	for i in 0 1 2 3; do
		awk -v p="$i" 'BEGIN { print "assets:"; for (j = 0; j < 5000; j++)
			printf "  - {url: x%d/f%05d, tool: copy, inputs: [f00000.txt]}\n",
			       p, p * 5000 + j }' >"src/part$i.kiln.yaml"
	done
	check_steps 20000
	dry_run_all 20000
	build_all 20000 x0/f00000 x1/f07500 x3/f19999
	status_and_stop
}
