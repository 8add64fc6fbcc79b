#!/usr/bin/env bats
# intermediate.bats — `intermediate: true` (docs/format.md, "Intermediates"):
# a step whose outputs only other steps use is cached in the store and
# kept under .kiln/intermediate/<profile>/, never in build/ nor the index.

bats_require_minimum_version 1.5.0

load daemon_helpers

intermediate_project() {
	mkdir -p src
	echo "wav data" >src/a.wav
	cat >kiln.yaml <<'YAML'
kiln: 1
project: im
sources: [src]
profiles:
  pc: {}
tools:
  decode: { shell: true, run: 'tr a-z A-Z <"${in}" >"${out}"' }
  encode: { shell: true, run: 'rev <"${in}" >"${out}"' }
rules:
  - { match: "src/*.wav", url: "pcm/${match.name}.pcm", tool: decode, intermediate: true }
assets:
  - { url: a.ogg, tool: encode, inputs: ["@pcm/a.pcm"] }
YAML
}

@test "an intermediate is absent from build/ and the index, its dependent built from it, and it stays cached" {
	intermediate_project
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ "$output" == *"2 ran"* ]] || { echo "$output"; false; }
	[ "$(cat build/pc/a.ogg)" = "ATAD VAW" ]
	[ ! -e build/pc/pcm ]
	! grep -q pcm build/pc/kiln-index.txt
	grep -q '^a.ogg' build/pc/kiln-index.txt
	[ "$(cat .kiln/intermediate/pc/pcm/a.pcm)" = "WAV DATA" ]
	# still cached: a fresh build/ and a lost .kiln/intermediate run nothing
	rm -rf build .kiln/intermediate
	run "$KILN" build
	[[ "$output" == *"0 ran, 2 up to date"* ]] || { echo "$output"; false; }
	[ "$(cat build/pc/a.ogg)" = "ATAD VAW" ]
	[ "$(cat .kiln/intermediate/pc/pcm/a.pcm)" = "WAV DATA" ]
	# and a change to its source goes through it
	echo "new wav" >src/a.wav
	"$KILN" build >out 2>&1
	[ "$(cat build/pc/a.ogg)" = "VAW WEN" ]
	[ ! -e build/pc/pcm ]
}

@test "intermediate must be a boolean" {
	intermediate_project
	sed -i 's/intermediate: true/intermediate: sometimes/' kiln.yaml
	run --separate-stderr "$KILN" check
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"kiln.yaml:"*"intermediate"* ]] || { echo "$stderr"; false; }
}
