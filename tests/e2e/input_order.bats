#!/usr/bin/env bats
# The order of a step's inputs and one output of a step (issue 26): a
# tool gets its inputs as `inputs:` writes them (a glob's matches sorted
# in their place, sources and prerequisites mixed), reordering them
# rebuilds, and `@URL#name` gives the tool that one output of a
# multi-output step. Each source holds one lowercase letter and the rule
# step `up/X` its uppercase, so a concatenation spells the order the tool
# saw.

bats_require_minimum_version 1.5.0

load daemon_helpers

write_project() {
	mkdir -p src
	for l in a b m z p; do printf '%s' "$l" >"src/$l.txt"; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  upper: { run: [sh, -c, 'tr a-z A-Z < "$0" > "$1"', "${in}", "${out}"] }
  concat: { run: [sh, -c, 'cat "$@" > "$0"', "${out}", "${in...}"] }
  shcat: { shell: true, run: "cat ${in...} > ${out}" }
  pair: { run: [sh, -c, 'tr a-z A-Z < "$2" > "$0"; printf B > "$1"', "${out.a}", "${out.b}", "${in}"] }
rules:
  - { match: "src/{a,b,m,z}.txt", url: "up/${match.name}", tool: upper }
  - { match: "src/m.txt", url: "rule-m", tool: concat, inputs: [src/a.txt] }
assets:
  - url: joined
    tool: concat
    inputs: [src/z.txt, "@up/m", "src/[ab].txt", "@up/**", src/z.txt]
  - url: shjoined
    tool: shcat
    inputs: [src/z.txt, "@up/m", "src/[ab].txt", "@up/**", src/z.txt]
  - url: pair
    tool: pair
    inputs: [src/p.txt]
    outputs: { a: pair-a.txt, b: pair-b.txt }
  - url: whole
    tool: concat
    inputs: ["@pair"]
  - url: onlyb
    tool: concat
    inputs: ["@pair#b", src/a.txt, "@pair#a", "@pair#b"]
  - url: justb
    tool: concat
    inputs: ["@pair#b"]
YAML
}

# build ARGS...: kiln build --json; RAN is the sorted URLs that ran.
build() {
	run --separate-stderr "$KILN" build --json "$@"
	RAN=$(printf '%s\n' "$output" | grep '"event":"step"' | grep '"result":"ran"' |
	      sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
	[ "$status" -eq 0 ] || { echo "build: status $status"; echo "$output"; echo "$stderr"; false; }
}

# holds FILE TEXT: build/default/FILE holds exactly TEXT.
holds() {
	local got
	got=$(cat "build/default/$1") || { echo "no build/default/$1"; return 1; }
	[ "$got" = "$2" ] || { echo "build/default/$1 holds '$got', expected '$2'"; return 1; }
}

@test "a tool gets its inputs in written order, sources and prerequisites mixed, each once" {
	write_project
	build
	# z, then up/m, then the glob's a b, then @up/** in URL order without
	# up/m again, and the second src/z.txt dropped
	holds joined zMabABZ
	holds shjoined zMabABZ
}

@test "a rule step's matched file is \${in}, before its extra inputs" {
	write_project
	build
	holds rule-m ma
}

@test "reordering inputs in kiln.yaml rebuilds the step with the new order" {
	write_project
	build
	holds joined zMabABZ
	sed -i 's|inputs: \[src/z.txt, "@up/m", "src/\[ab\].txt", "@up/\*\*", src/z.txt\]|inputs: ["@up/**", "src/[ab].txt", src/z.txt]|' kiln.yaml
	[ "$(grep -c 'inputs: \["@up/\*\*", "src/\[ab\].txt", src/z.txt\]' kiln.yaml)" -eq 2 ]
	build
	holds joined ABMZabz
	holds shjoined ABMZabz
	[ "$RAN" = "joined shjoined" ] || { echo "ran: '$RAN', expected 'joined shjoined'"; false; }
	# kiln why says so
	run "$KILN" why joined
	[[ "$output" == *"joined: inputs order changed"* ]] || { echo "$output"; false; }
}

@test "@URL gives every output of a step in declared order, @URL#name just that one" {
	write_project
	build
	holds whole PB
	holds onlyb BaP
	holds justb B
}

@test "a step that takes @URL#name is not rebuilt when only another output changed" {
	write_project
	build
	printf 'q' >src/p.txt
	build
	holds pair-a.txt Q
	holds justb B
	[ "$RAN" = "onlyb pair whole" ] || { echo "ran: '$RAN', expected 'onlyb pair whole'"; false; }
}

@test "@URL#name with a name the step does not have is an error at its file, line and field" {
	write_project
	sed -i 's|inputs: \["@pair#b"\]|inputs: ["@pair#c"]|' kiln.yaml
	run --separate-stderr "$KILN" check -q -C "$P"
	[ "$status" -eq 2 ] || { echo "status $status"; echo "$stderr"; false; }
	line=$(grep -n '@pair#c' kiln.yaml | cut -d: -f1)
	want="kiln.yaml:$line:14: error: assets[5].inputs[0]: '@pair#c': step 'pair' has no output 'c' (its outputs: 'a', 'b')"
	printf '%s\n' "$stderr" | grep -qxF "$want" || { echo "stderr: $stderr"; echo "expected a line: $want"; false; }
}

@test "a tool given @URL#name that reads another output of that step is warned: that read is not tracked" {
	write_project
	cat >>kiln.yaml <<'YAML'
  - url: peek
    tool: peek
    inputs: ["@pair#b"]
YAML
	sed -i 's|^tools:$|tools:\n  peek: { run: [sh, -c, '"'"'cat "$1" build/default/pair-a.txt > "$0"'"'"', "${out}", "${in}"] }|' kiln.yaml
	run --separate-stderr "$KILN" build peek
	[ "$status" -eq 0 ] || { echo "status $status"; echo "$output"; echo "$stderr"; false; }
	holds peek BP
	[[ "$output$stderr" == *"used build/default/pair-a.txt, an output of step pair it does not declare"*'"@pair#a"'* ]] ||
		{ echo "no warning about pair-a.txt:"; echo "$output"; echo "$stderr"; false; }
}

@test "kiln ls lists a step's inputs in the order its tool gets them" {
	write_project
	run --separate-stderr "$KILN" ls
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	want='onlyb
  tool     concat
  defined  kiln.yaml:28 (asset)
  input    @pair#b
  input    src/a.txt
  input    @pair#a
  output   out = onlyb'
	[[ "$output" == *"$want"* ]] || { echo "$output"; false; }
	run --separate-stderr "$KILN" ls --json
	[[ "$output" == *'"url":"joined","tool":"concat","inputs":["src/a.txt","src/b.txt","src/z.txt"],"needs":["up/a","up/b","up/m","up/z"],"order":["src/z.txt","@up/m","src/a.txt","src/b.txt","@up/a","@up/b","@up/z"]'* ]] ||
		{ echo "$output"; false; }
}
