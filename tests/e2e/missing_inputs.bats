#!/usr/bin/env bats
# Issue 21: one missing declared input, or one source file whose name kiln
# cannot use, costs that step (or that file), not the whole project. The
# real kilnd (auto-started) and kiln on a small project of cp and sh steps.

bats_require_minimum_version 1.5.0

load daemon_helpers

# The project: good.txt and bad.txt are independent; bad.txt names
# src/missing.txt (its asset at kiln.yaml:13, the input at 15:14), and
# bad-upper.txt needs bad.txt.
write_project() {
	mkdir -p src
	printf 'alpha\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  upper: { run: [sh, -c, 'tr a-z A-Z < "$0" > "$1"', "${in}", "${out}"] }
assets:
  - url: good.txt
    tool: copy
    inputs: [src/a.txt]
  - url: bad.txt
    tool: copy
    inputs: [src/missing.txt]
  - url: bad-upper.txt
    tool: upper
    inputs: ["@bad.txt"]
YAML
}

# build ARGS...: kiln build --json; RESULT_<url> read with result_of.
build() {
	run --separate-stderr "$KILN" build --json "$@"
}

# result_of URL: that step's result in the last build's --json output.
result_of() {
	printf '%s\n' "$output" | grep '"event":"step"' | grep "\"url\":\"$1\"" |
		sed 's/.*"result":"\([a-z_]*\)".*/\1/'
}

show() {
	echo "status $status"; echo "$output"; echo "$stderr"
}

@test "-k builds what does not need the missing input; its step fails naming file:line, its dependent is skipped" {
	write_project
	build -k
	[ "$status" -eq 1 ] || { show; false; }
	[ "$(result_of good.txt)" = ran ] || { show; false; }
	[ "$(result_of bad.txt)" = failed ] || { show; false; }
	[ "$(result_of bad-upper.txt)" = skipped ] || { show; false; }
	[[ "$output" == *"missing source file 'src/missing.txt' (an input of bad.txt, kiln.yaml:13)"* ]] ||
		{ show; false; }
	[ "$(cat build/default/good.txt)" = alpha ]
	[ ! -e build/default/bad.txt ]
}

@test "without -k a missing input fails the build as any failed step does: exit 1, not 2" {
	write_project
	run --separate-stderr "$KILN" build
	[ "$status" -eq 1 ] || { show; false; }
	[[ "$output" == *"FAILED bad.txt"* ]] || { show; false; }
	[[ "$output" == *"missing source file 'src/missing.txt' (an input of bad.txt, kiln.yaml:13)"* ]] ||
		{ show; false; }
}

@test "kiln check warns about a missing input with file:line:col and exits 0" {
	write_project
	run --separate-stderr "$KILN" check
	[ "$status" -eq 0 ] || { show; false; }
	[[ "$output$stderr" == *"kiln.yaml:15:14: warning: assets[1].inputs[0]: input file 'src/missing.txt' does not exist"* ]] ||
		{ show; false; }
	[[ "$output$stderr" != *"error:"* ]] || { show; false; }
}

@test "the missing input created later builds on the next build of the warm daemon" {
	write_project
	build
	[ "$status" -eq 1 ] || { show; false; }
	printf 'late\n' >src/missing.txt
	build
	[ "$status" -eq 0 ] || { show; false; }
	[ "$(result_of bad.txt)" = ran ] || { show; false; }
	[ "$(result_of bad-upper.txt)" = ran ] || { show; false; }
	[ "$(cat build/default/bad-upper.txt)" = LATE ]
	# and check has nothing left to say about it
	run --separate-stderr "$KILN" check
	[ "$status" -eq 0 ] && [[ "$output$stderr" != *"missing.txt"* ]] || { show; false; }
}

@test "an input that exists but is not a regular file is still an error (exit 2)" {
	write_project
	mkdir src/missing.txt
	run --separate-stderr "$KILN" check
	[ "$status" -eq 2 ] || { show; false; }
	[[ "$output$stderr" == *"kiln.yaml:15:14: error: assets[1].inputs[0]: input file 'src/missing.txt' is not a regular file"* ]] ||
		{ show; false; }
}

@test "a source file with a newline in its name is skipped with a warning; the others build" {
	mkdir -p src
	printf 'alpha\n' >src/a.txt
	printf 'bravo\n' >src/b.txt
	printf 'odd\n' >"src/odd
name.txt"
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - match: "src/*.txt"
    url: "copy/${match.name}.txt"
    tool: copy
YAML
	run --separate-stderr "$KILN" check
	[ "$status" -eq 0 ] || { show; false; }
	[[ "$output$stderr" == *"kiln.yaml:3:10: warning: sources: 'src/odd\\x0aname.txt' skipped"* ]] ||
		{ show; false; }
	build
	[ "$status" -eq 0 ] || { show; false; }
	[ "$(result_of copy/a.txt)" = ran ] || { show; false; }
	[ "$(result_of copy/b.txt)" = ran ] || { show; false; }
	[ "$(printf '%s\n' "$output" | grep -c '"event":"step"')" -eq 2 ] || { show; false; }
	[ "$(cat build/default/copy/b.txt)" = bravo ]
	# the daemon's log says which file it skipped
	grep -q "warning: sources: 'src/odd\\\\x0aname.txt' skipped" .kiln/kilnd.log ||
		{ cat .kiln/kilnd.log; false; }
}
