#!/usr/bin/env bats
# Lookups that are no dependencies (docs/build.md, "Discovered paths"): a
# tool looking its own command-line words up as files (ImageMagick's
# convert probes `-strip`, `convert`, `png32:.kiln/scratch/<run>/1/x.png`,
# `x.png`, `png` in the project root), and zstd's pseudo-names for its
# standard streams. A missing project file the tool was pointed at stays
# a dependency.

bats_require_minimum_version 1.5.0

load daemon_helpers

# build ARGS...: kiln build --json; RAN is the sorted URLs that ran.
build() {
	run --separate-stderr "$KILN" build --json "$@"
	[ "$status" -eq 0 ] || { echo "status $status: $output $stderr"; false; }
	RAN=$(printf '%s\n' "$output" | grep '"result":"ran"' |
		sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
}

# The sample's resize tool (assets-sample/kiln.yaml), on one sprite.
write_convert_project() {
	mkdir -p art
	convert -size 8x8 xc:red art/hero.png
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [art]
profiles:
  default:
    vars: { scale: 50%, colors: 256 }
tools:
  resize:
    run: [convert, "${in}", -resize, "${scale}", -colors, "${colors}", -strip,
          -define, "png:exclude-chunks=date,time", "png32:${out}"]
    env: { MAGICK_THREAD_LIMIT: "1" }
rules:
  - match: "art/*.png"
    url: "sized/${match.name}"
    outputs: "${match.name}.png"
    tool: resize
YAML
}

@test "convert's probes of its own arguments are no dependencies: kiln deps and kiln graph show its input only" {
	command -v convert >/dev/null || skip "no ImageMagick convert"
	write_convert_project
	build
	[ "$RAN" = "sized/hero" ] || { echo "ran: $RAN"; false; }
	run "$KILN" deps sized/hero
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ "$output" == *"last run traced"* ]] || { echo "$output"; false; }
	[[ "$output" == *"input art/hero.png"* ]] || { echo "$output"; false; }
	# not -strip, convert, hero.png, png, png32:.kiln/scratch/...
	! printf '%s\n' "$output" | grep -q '^discovered' || { echo "$output"; false; }
	run "$KILN" graph
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(printf '%s\n' "$output" | grep -c '^	"file:[^"]*" \[')" -eq 1 ] || { echo "$output"; false; }
	! printf '%s\n' "$output" | grep -q 'scratch' || { echo "$output"; false; }
	# a new daemon (new scratch names) has nothing to rerun
	"$KILN" stop
	build
	[ "$RAN" = "" ] || { echo "ran: $RAN"; false; }
}

@test "a missing file the tool was pointed at by a plain word stays a dependency; its option and prefixed words do not" {
	mkdir -p src
	printf 'x\n' >src/a.txt
	# looks up each word as convert does, then reads optional.cfg if there
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  opt:
    run: [sh, -c, 'for w in "$@"; do test -e "$w"; done; if [ -e "$1" ]; then cat "$1"; else echo none; fi > "$4"',
          sh, optional.cfg, -quiet, "fmt:${out}", "${out}"]
assets:
  - { url: opt.txt, tool: opt, inputs: [src/a.txt] }
YAML
	build
	[ "$(cat build/default/opt.txt)" = "none" ]
	run "$KILN" deps opt.txt
	[[ "$output" == *"discovered optional.cfg (trace) missing"* ]] || { echo "$output"; false; }
	! printf '%s\n' "$output" | grep -qE 'discovered (-quiet|fmt)' || { echo "$output"; false; }
	build
	[ "$RAN" = "" ] || { echo "ran: $RAN"; false; }
	printf 'cfg\n' >optional.cfg
	build
	[ "$RAN" = "opt.txt" ] || { echo "ran: $RAN"; false; }
	[ "$(cat build/default/opt.txt)" = "cfg" ]
}

@test "a tool piping into zstd (reading stdin) prints no 'cannot record' warning for zstd's pseudo-names" {
	command -v zstd >/dev/null || skip "no zstd"
	mkdir -p src
	printf 'hello\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  pack:
    shell: true
    run: 'cat ${in} | zstd -q -c > ${out}'
assets:
  - { url: a.zst, tool: pack, inputs: [src/a.txt] }
YAML
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[[ "$output$stderr" != *"cannot record"* ]] || { echo "$output $stderr"; false; }
	[ "$(zstd -q -d -c build/default/a.zst)" = "hello" ]
	run "$KILN" why a.zst
	[[ "$output" == *"traced: yes"* ]] || { echo "$output"; false; }
	[[ "$output" != *"warning"* ]] || { echo "$output"; false; }
}
