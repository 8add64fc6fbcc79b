#!/usr/bin/env bats
# reasons.bats — what kiln build, why and deps say about a step and a
# build (issue 38, item 6): reasons that show what changed, one name for
# declared prerequisites, the profiles listed for an unknown one, failed
# URLs repeated at the summary's end, and a failure that leaves the other
# steps of a warm build up to date rather than "cancelled".

bats_require_minimum_version 1.5.0

load daemon_helpers

reasons_project() {
	mkdir -p src
	for i in 1 2 3 4 5 6 7 8; do printf '%s\n' "$i" >src/f$i.txt; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: r
sources: [src]
profiles: { pc: {}, mobile: {} }
tools:
  copy: { shell: true, run: 'cat "${in}" > "${out}" # a comment long enough to be cut when shown: 1' }
  cat2: { run: [sh, -c, 'cat "$@" > "$0"', "${out}", "${in...}"] }
rules:
  - match: "src/f*.txt"
    url: "c/${match.name}"
    tool: copy
assets:
  - { url: all, tool: cat2, inputs: ["@c/f1", "@c/f2"] }
YAML
}

@test "a long argv changed near its end: the reason shows the part that differs" {
	reasons_project
	"$KILN" build >/dev/null
	sed -i 's/cut when shown: 1/cut when shown: 2/' kiln.yaml
	run "$KILN" build c/f3
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	line=$(printf '%s\n' "$output" | grep '^ran c/f3')
	# both sides show the differing end, not the same first 44 characters
	printf '%s\n' "$line" | grep -q 'argv changed .*shown: 1 -> .*shown: 2' ||
		{ echo "$line"; false; }
	run "$KILN" why c/f3
	printf '%s\n' "$output" | head -n 1 | grep -q 'argv changed .*shown: 1 -> .*shown: 2' ||
		{ echo "$output"; false; }
}

@test "a declared prerequisite is 'prerequisite URL' in kiln build, kiln why and kiln deps" {
	reasons_project
	"$KILN" build >/dev/null
	printf 'one\n' >src/f1.txt
	run "$KILN" build all
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -q '^ran all .*: prerequisite c/f1 changed [0-9a-f]* -> [0-9a-f]*' ||
		{ echo "$output"; false; }
	! printf '%s\n' "$output" | grep -q 'need c/f1' || { echo "$output"; false; }
	run "$KILN" why all
	printf '%s\n' "$output" | head -n 1 | grep -q 'prerequisite c/f1 changed' || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -q '^  prerequisite c/f1: [0-9a-f]* -> [0-9a-f]*$' ||
		{ echo "$output"; false; }
	! printf '%s\n' "$output" | grep -q 'need c/f1' || { echo "$output"; false; }
	run "$KILN" deps all
	printf '%s\n' "$output" | grep -q '^prerequisite c/f1$' || { echo "$output"; false; }
}

@test "-p naming no profile lists the project's profiles (build, watch, why, deps)" {
	reasons_project
	"$KILN" build >/dev/null
	for cmd in build watch "why all" "deps all"; do
		# shellcheck disable=SC2086
		run --separate-stderr timeout 60 "$KILN" $cmd -p nope
		[ "$status" -eq 2 ] || { echo "$cmd: status $status: $stderr"; false; }
		printf '%s\n' "$stderr" | grep -q "unknown profile 'nope' (profiles: pc, mobile)" ||
			{ echo "$cmd: $stderr"; false; }
	done
}

@test "a failed build's summary ends with the failed URLs" {
	reasons_project
	cat >>kiln.yaml <<'YAML'
  - { url: bad/one, tool: fail, inputs: [src/f1.txt] }
  - { url: bad/two, tool: fail, inputs: [src/f2.txt] }
YAML
	sed -i 's/^tools:$/tools:\n  fail: { shell: true, run: "echo broken >\&2; exit 3" }/' kiln.yaml
	run "$KILN" build -k
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	[ "$(printf '%s\n' "$output" | tail -n 1)" = "failed: bad/one, bad/two" ] ||
		[ "$(printf '%s\n' "$output" | tail -n 1)" = "failed: bad/two, bad/one" ] ||
		{ echo "$output"; false; }
	# a build without failures has no such line
	run "$KILN" build all
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	! printf '%s\n' "$output" | grep -q '^failed:' || { echo "$output"; false; }
}

@test "a warm build with one failure counts the steps it had nothing to do for as up to date, not cancelled" {
	reasons_project
	# bad fails at once, while it is decided (its input is missing), and
	# goes first: the longest chain starts at it
	cat >>kiln.yaml <<'YAML'
  - { url: bad, tool: copy, inputs: [src/missing.txt] }
  - { url: after1, tool: copy, inputs: ["@bad"] }
  - { url: after2, tool: copy, inputs: ["@after1"] }
  - { url: after3, tool: copy, inputs: ["@after2"] }
YAML
	for i in $(seq 9 60); do printf '%s\n' "$i" >src/f$i.txt; done
	run "$KILN" build -k
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	run "$KILN" build
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	sum=$(printf '%s\n' "$output" | grep '^profile pc:')
	# 65 steps: bad failed, its three dependents skipped, 61 up to date
	[ "$sum" = "${sum%cancelled*}" ] || { echo "$output"; false; }
	printf '%s\n' "$sum" | grep -q ' 65 steps, 0 ran, 61 up to date, 1 failed, 3 skipped in ' ||
		{ echo "$output"; false; }
}
