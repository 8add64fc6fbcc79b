#!/usr/bin/env bats
# kiln check and kiln ls: the asset-description loader, end to end.
# Golden files: tests/fixtures/desc/bad/<case>.expected holds the exact
# stderr of `kiln check -q` on that fixture; tests/fixtures/desc/sample.
# <profile>.json the exact `kiln ls --json`. After an intended change,
# regenerate with KILN_UPDATE_GOLDEN=1 and review the diff before committing.

bats_require_minimum_version 1.5.0

setup() {
	FIX="$KILN_TOP/tests/fixtures/desc"
	P="$BATS_TEST_TMPDIR/p"
}

# golden FILE TEXT: compare (or, with KILN_UPDATE_GOLDEN=1, rewrite).
golden() {
	if [ -n "${KILN_UPDATE_GOLDEN:-}" ]; then
		printf '%s\n' "$2" > "$1"
	fi
	diff -u "$1" <(printf '%s\n' "$2")
}

# check_bad CASE [STATUS]: kiln check on fixture CASE prints exactly its
# golden diagnostics and exits STATUS (default 2).
check_bad() {
	cp -r "$FIX/bad/$1" "$P"
	check_dir "$1" "${2:-2}"
}

check_dir() {
	run --separate-stderr "$KILN" check -q -C "$P"
	[ "$status" -eq "$2" ] || { echo "status $status, expected $2"; echo "$stderr"; false; }
	golden "$FIX/bad/$1.expected" "$stderr"
}

@test "an unknown key is an error that suggests the nearest valid one" {
	check_bad unknown-key
}

@test "values of the wrong type say what was expected and what was found" {
	check_bad wrong-type
}

@test "run is an argv list unless the tool asks for a shell" {
	check_bad shell-string
}

@test "two assets with one URL are an error naming both places" {
	check_bad duplicate-url
}

@test "outputs that would overwrite each other in build/, or the index map, are errors for kiln check as for the build" {
	check_bad outputs-collide
}

@test "a cycle between assets is refused and printed" {
	check_bad cycle
}

@test "unknown tools, URLs and profiles are errors with suggestions" {
	check_bad unknown-refs
}

@test "undefined variables are errors naming the step and profile" {
	check_bad undefined-variable
}

@test "paths and URLs that could escape the project are refused" {
	check_bad paths-escape
}

@test "a symlink leading out of the project is refused" {
	mkdir -p "$P/art"
	printf 'kiln: 1\nproject: t\nsources: [art]\nprofiles: { pc: }\n' > "$P/kiln.yaml"
	ln -s /etc/passwd "$P/art/passwd.png"
	echo x > "$P/art/ok.png"
	ln -s ok.png "$P/art/inside.png"
	check_dir symlink-out 2
}

@test "NUL and control characters in values are refused, every one reported" {
	check_bad control-chars
}

@test "aliases that blow the document up are refused, not expanded" {
	check_bad billion-laughs
}

@test "nesting deeper than the bound is refused" {
	check_bad too-deep
}

@test "a description file over 1 MiB is refused without being parsed" {
	mkdir -p "$P"
	{ printf 'kiln: 1\nproject: t\nprofiles: { pc: }\n'
	  head -c 1100000 /dev/zero | tr '\0' '#' | fold -w 100; echo; } > "$P/kiln.yaml"
	check_dir too-big 2
}

@test "a YAML syntax error names its line and column" {
	check_bad syntax-error
}

@test "a newer format version is refused" {
	check_bad newer-format
}

@test "missing required keys are each reported" {
	check_bad missing-required
}

@test "project-wide keys in a *.kiln.yaml are refused" {
	check_bad subfile-root-keys
}

@test "a glob input that matches nothing is an error naming its field; a rule or bundle glob matching nothing is a warning" {
	check_bad glob-matches-nothing
}

@test "the documented example resolves to the expected steps in every profile" {
	cp -r "$FIX/sample" "$P"
	run --separate-stderr "$KILN" check -C "$P"
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	[ -z "$stderr" ] || { echo "unexpected diagnostics: $stderr"; false; }
	for profile in pc mobile editor-preview; do
		run --separate-stderr "$KILN" ls --json -p "$profile" -C "$P"
		[ "$status" -eq 0 ] || { echo "$profile: $stderr"; false; }
		golden "$FIX/sample.$profile.json" "$output"
	done
}

@test "docs/format.md's example is the sample fixture, word for word" {
	sed -n '/^```yaml$/,/^```$/p' "$KILN_TOP/docs/format.md" |
		sed -n '2,/^```$/p' | sed '$d' | sed '1d' > "$BATS_TEST_TMPDIR/doc.yaml"
	diff -u "$FIX/sample/kiln.yaml" "$BATS_TEST_TMPDIR/doc.yaml"
}

@test "kiln ls shows where a step was defined and which rule an asset overrides" {
	cp -r "$FIX/sample" "$P"
	run "$KILN" ls -C "$P"
	[ "$status" -eq 0 ]
	[[ $output == *$'sprites/hero\n  tool     resize\n  defined  kiln.yaml:49 (asset), overrides the rule at kiln.yaml:31'* ]] || { echo "$output"; false; }
	# ten of rules and assets, and one per bundle (bundles/level1, bundles/preload)
	[[ $output == *$'bundles/preload\n  tool     kiln-bundle\n  defined  kiln.yaml:55 (bundle)'* ]] || { echo "$output"; false; }
	[[ $output == *"12 steps in profile pc"* ]]
}

@test "kiln check finds the project from a subfolder" {
	cp -r "$FIX/sample" "$P"
	cd "$P/art/sprites"
	run "$KILN" check
	[ "$status" -eq 0 ]
	[[ $output == *"project 'sample-game', 2 description files"* ]]
}

@test "an unknown profile is a usage error" {
	cp -r "$FIX/sample" "$P"
	run --separate-stderr "$KILN" ls -C "$P" -p nosuch
	[ "$status" -eq 2 ]
	[[ $stderr == *"unknown profile 'nosuch'"* ]]
	run --separate-stderr "$KILN" check -C "$P" -p nosuch
	[ "$status" -eq 2 ]
}

@test "no kiln.yaml is an environment error" {
	mkdir -p "$P"
	run --separate-stderr "$KILN" check -C "$P"
	[ "$status" -eq 2 ]
	[[ $stderr == *"no kiln.yaml"* ]]
}

@test "ls refuses a project with errors and points at check" {
	cp -r "$FIX/bad/cycle" "$P"
	run --separate-stderr "$KILN" ls -C "$P"
	[ "$status" -eq 2 ]
	[[ $stderr == *"cycle between assets"* && $stderr == *"kiln check"* ]]
}

@test "check and ls have --help" {
	run "$KILN" check --help
	[ "$status" -eq 0 ]
	[[ $output == *"usage: kiln check"* ]]
	run "$KILN" ls --help
	[ "$status" -eq 0 ]
	[[ $output == *"usage: kiln ls"* ]]
}

@test "nested source folders do not make a file's step twice" {
	mkdir -p "$P/art/ui"
	echo x > "$P/art/ui/button.png"
	cat > "$P/kiln.yaml" <<'YAML'
kiln: 1
project: t
sources: [art, art/ui]
profiles: { pc: }
tools: { copy: { run: [cp, "${in}", "${out}"] } }
rules:
  - { match: "art/**/*.png", url: "img/${match.path}", tool: copy }
YAML
	run --separate-stderr "$KILN" check -C "$P"
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	[[ $output == *"profile pc: 1 steps"* ]] || { echo "$output"; false; }
}

@test "check --programs warns about each used tool whose program this shell's build would not find" {
	mkdir -p "$P/src" "$P/tools"
	echo x > "$P/src/a.txt"
	printf '#!/bin/sh\ncp "$1" "$2"\n' > "$P/tools/here.sh"
	chmod +x "$P/tools/here.sh"
	cat > "$P/kiln.yaml" <<'YAML'
kiln: 1
project: t
sources: [src]
profiles: { pc: }
tools:
  good: { run: [cp, "${in}", "${out}"] }
  gone: { run: [no-such-kiln-program, "${in}", "${out}"] }
  local: { run: [tools/missing.sh, "${in}", "${out}"] }
  here: { run: [tools/here.sh, "${in}", "${out}"] }
  sh: { shell: true, run: "cp ${in} ${out}" }
  unused: { run: [also-not-here] }
assets:
  - { url: a, tool: good, inputs: [src/a.txt] }
  - { url: b, tool: gone, inputs: [src/a.txt] }
  - { url: c, tool: local, inputs: [src/a.txt] }
  - { url: d, tool: here, inputs: [src/a.txt] }
  - { url: e, tool: sh, inputs: [src/a.txt] }
YAML
	# without --programs, check reads the descriptions only
	run --separate-stderr "$KILN" check -q -C "$P"
	[ "$status" -eq 0 ] && [ -z "$stderr" ] || { echo "status $status: $stderr"; false; }
	PATH=/usr/bin:/bin run --separate-stderr "$KILN" check -q --programs -C "$P"
	[ "$status" -eq 0 ] || { echo "status $status: $stderr"; false; }
	want="kiln.yaml:7:3: warning: tools.gone.run: program 'no-such-kiln-program' not found, looked for in PATH's 2 folders, /usr/bin ... /bin: each step of this tool fails until it is
kiln.yaml:8:3: warning: tools.local.run: program 'tools/missing.sh' not found, looked for at $P/tools/missing.sh: each step of this tool fails until it is"
	[ "$stderr" = "$want" ] || { echo "got:"; echo "$stderr"; echo "expected:"; echo "$want"; false; }
	# kiln.yaml's path is what a build uses, whoever asks
	sed -i 's|^profiles:|path: [/nowhere]\nprofiles:|' "$P/kiln.yaml"
	run --separate-stderr "$KILN" check --programs -C "$P"
	[ "$status" -eq 0 ] || { echo "status $status: $stderr"; false; }
	[[ $stderr == *"program 'cp' not found, looked for in PATH's one folder, /nowhere:"* ]] || { echo "$stderr"; false; }
	[[ $output == *"3 warnings"* ]] || { echo "$output"; false; }
}
