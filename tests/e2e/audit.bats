#!/usr/bin/env bats
# kiln audit (docs/build.md, "kiln audit"): the real kilnd runs recorded
# steps again in scratch folders and compares what they make with the
# recorded outputs. A tool that writes the time into its output is found;
# deterministic ones pass; build/, the index, the store and the records
# are as they were.

bats_require_minimum_version 1.5.0

load daemon_helpers

write_project() {
	mkdir -p src
	for i in 1 2 3 4 5; do echo "$i" >"src/$i.txt"; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: audit
sources: [src]
profiles:
  pc:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  stamp: { run: [sh, -c, 'cat "$0" > "$1"; date +%s%N >> "$1"', "${in}", "${out}"] }
  pair: { run: [sh, -c, 'cp "$0" "$1"; echo $$ > "$2"', "${in}", "${out.same}", "${out.pid}"] }
rules:
  - match: "src/*.txt"
    url: "c/${match.name}.txt"
    tool: copy
assets:
  - url: stamped
    tool: stamp
    inputs: [src/1.txt]
  - url: pair
    tool: pair
    inputs: [src/2.txt]
    outputs: { same: same.txt, pid: pid.txt }
YAML
}

build_ok() {
	run --separate-stderr "$KILN" build "$@"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
}

# state: what the audit must not change — every file in build/ with its
# hash, the store's objects, and what kiln why says of each step.
state() {
	find build -type f | sort | xargs xxh128sum
	find .kiln/store/objects -type f | sort
	for u in stamped pair c/1.txt c/2.txt; do "$KILN" why "$u" | head -n 2; done
}

@test "a tool that writes the time into its output is found, with the output and both hashes" {
	write_project
	build_ok
	recorded=$(xxh128sum build/pc/stamped | cut -d' ' -f1)
	run --separate-stderr "$KILN" audit stamped
	[ "$status" -eq 1 ] || { echo "status $status: $output $stderr"; false; }
	printf '%s\n' "$output" | grep -q '^DIFFERENT stamped$' || { echo "$output"; false; }
	line=$(printf '%s\n' "$output" | grep '^  output out: recorded ')
	[[ "$line" == *"recorded $recorded ("* ]] || { echo "$line"; false; }
	got=$(printf '%s\n' "$line" | sed 's/.*this run \([0-9a-f]*\) .*/\1/')
	[ "${#got}" -eq 32 ] && [ "$got" != "$recorded" ] || { echo "$line"; false; }
	printf '%s\n' "$output" | grep -q ': 0 same, 1 different, 0 failed$' || { echo "$output"; false; }
}

@test "deterministic tools pass: exit 0, every step the same" {
	write_project
	build_ok
	run --separate-stderr "$KILN" audit 'c/**'
	[ "$status" -eq 0 ] || { echo "status $status: $output $stderr"; false; }
	[ "$output" = "audited 5 of 5 recorded steps of profile pc: 5 same, 0 different, 0 failed" ] ||
		{ echo "$output"; false; }
}

@test "only the outputs that differ are named, by their names" {
	write_project
	build_ok
	run --separate-stderr "$KILN" audit --json pair
	[ "$status" -eq 1 ]
	printf '%s\n' "$output" | head -n 1 | python3 -c '
import json, sys
s = json.loads(sys.stdin.readline())
assert s["url"] == "pair" and s["verdict"] == "different", s
assert [o["name"] for o in s["outputs"]] == ["pid"], s
assert s["outputs"][0]["recorded"] != s["outputs"][0]["got"], s'
}

@test "build/, the index, the store and the records are unchanged by an audit" {
	write_project
	build_ok
	state >"$BATS_TEST_TMPDIR/before"
	run --separate-stderr "$KILN" audit
	[ "$status" -eq 1 ] || { echo "status $status: $output $stderr"; false; }
	state >"$BATS_TEST_TMPDIR/after"
	diff "$BATS_TEST_TMPDIR/before" "$BATS_TEST_TMPDIR/after"
	# nothing is out of date after it: the next build runs nothing
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ]
	! printf '%s\n' "$output" | grep -q '"result":"ran"' || { echo "$output"; false; }
	# and no scratch folder is left behind
	[ -z "$(find .kiln/scratch -mindepth 2 -maxdepth 2 -type d)" ] ||
		{ find .kiln/scratch; false; }
}

@test "--sample N audits N steps; the same seed picks the same ones" {
	write_project
	build_ok
	picked() {
		"$KILN" audit --json --sample 3 --seed "$1" 'c/**' | grep audit-step |
			sed 's/.*"url":"\([^"]*\)".*/\1/' | tr '\n' ' '
	}
	a=$(picked 42)
	[ "$(printf '%s' "$a" | wc -w)" -eq 3 ] || { echo "picked: $a"; false; }
	[ "$(picked 42)" = "$a" ]
	run --separate-stderr "$KILN" audit --sample 2 --seed 9 'c/**'
	[ "$status" -eq 0 ]
	[[ "$output" == "audited 2 of 5 recorded steps of profile pc (sample seed 9): 2 same,"* ]] ||
		{ echo "$output"; false; }
	run --separate-stderr "$KILN" audit --sample 0
	[ "$status" -eq 2 ]
}

@test "an audit before any build, of an unknown step, or after an edit is refused" {
	write_project
	run --separate-stderr "$KILN" audit
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"nothing is built yet"* ]] || { echo "$stderr"; false; }
	build_ok
	run --separate-stderr "$KILN" audit no/such
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"no step of profile pc has the URL 'no/such'"* ]] || { echo "$stderr"; false; }
	echo edited >src/3.txt
	wait_for sh -c '"$KILN" audit c/1.txt 2>&1 | grep -q "files changed since the last build"'
	build_ok
	run --separate-stderr "$KILN" audit c/3.txt
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
}

@test "bundles and steps with a folder output are left out and counted as not audited, not failed" {
	write_project
	cat >>kiln.yaml <<'YAML'
  - { url: dir, tool: dirt, inputs: [src/3.txt], outputs: { d: "d/" } }
bundles:
  texts: ["c/1.txt", "c/2.txt"]
YAML
	sed -i '/^tools:/a\
  dirt: { run: [sh, -c, '"'"'cp "$0" "$1/x"'"'"', "${in}", "${out.d}"] }' kiln.yaml
	build_ok
	[ -f build/pc/bundles/texts.kpak ] && [ -f build/pc/d/x ]
	run --separate-stderr "$KILN" audit
	[ "$status" -eq 1 ] || { echo "status $status: $output $stderr"; false; }
	[[ "$output" == *": 5 same, 2 different, 0 failed; 2 not audited (never built, bundles, folder outputs, or they use kiln need)" ]] ||
		{ echo "$output"; false; }
}
