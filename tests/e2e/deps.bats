#!/usr/bin/env bats
# Dependencies discovered while building (docs/build.md, "Depfiles"), with
# real tools: glslangValidator (Debian glslang-tools) writes a depfile of
# the #include chain it followed.

bats_require_minimum_version 1.5.0

load daemon_helpers

write_shaders() {
	mkdir -p shaders/lib
	cat >shaders/main.frag <<'GLSL'
#version 450
#extension GL_GOOGLE_include_directive : require
#include "lib/common.glsl"
layout(location = 0) out vec4 color;
void main() { color = tint(); }
GLSL
	cat >shaders/lib/common.glsl <<'GLSL'
#include "inner.glsl"
vec4 tint() { return vec4(inner_value(), 0.0, 0.0, 1.0); }
GLSL
	printf 'float inner_value() { return 0.5; }\n' >shaders/lib/inner.glsl
	cat >kiln.yaml <<'YAML'
kiln: 1
project: shaders
sources: [shaders]
profiles:
  pc:
tools:
  glsl:
    run: [glslangValidator, -V, --depfile, "${depfile}", -o, "${out}", "${in}"]
    depfile: true
rules:
  - match: "shaders/*.frag"
    url: "shaders/${match.name}.spv"
    tool: glsl
YAML
}

ran() {
	printf '%s\n' "$output" | grep '"result":"ran"' | sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//'
}

@test "glslangValidator with a two-level #include chain: editing the inner include reruns it" {
	command -v glslangValidator >/dev/null || skip "glslangValidator is not installed (Debian: glslang-tools)"
	write_shaders
	run "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(ran)" = "shaders/main.spv" ]
	first=$(xxh128sum build/pc/shaders/main.spv | cut -d' ' -f1)
	# SPIR-V magic number
	[ "$(od -An -tx4 -N4 build/pc/shaders/main.spv | tr -d ' ')" = "07230203" ]
	run "$KILN" build --json
	[ "$(ran)" = "" ]
	# the inner include is no declared input: only the depfile names it
	printf 'float inner_value() { return 0.25; }\n' >shaders/lib/inner.glsl
	run "$KILN" build --json
	[ "$(ran)" = "shaders/main.spv" ] || { echo "$output"; false; }
	[ "$(xxh128sum build/pc/shaders/main.spv | cut -d' ' -f1)" != "$first" ]
	run "$KILN" why -p pc shaders/main.spv
	[[ "$output" == *"discovered dependency shaders/lib/inner.glsl (depfile) changed"* ]] || { echo "$output"; false; }
	# a comment-only edit of the middle include reruns the compiler, whose
	# output is the same bytes (early cutoff for anything downstream)
	printf '// a comment\n' >>shaders/lib/common.glsl
	run "$KILN" build --json
	[ "$(ran)" = "shaders/main.spv" ]
}

@test "kiln deps lists declared inputs and depfile discoveries; kiln rdeps finds the shader from its inner include in one lookup" {
	command -v glslangValidator >/dev/null || skip "glslangValidator is not installed (Debian: glslang-tools)"
	write_shaders
	# a second stage that takes the compiled shader: a declared dependent
	sed -i 's/^tools:$/tools:\n  copyspv: { run: [cp, "${in}", "${out}"] }/' kiln.yaml
	cat >>kiln.yaml <<'YAML'
assets:
  - url: pack/main.bin
    tool: copyspv
    inputs: ["@shaders/main.spv"]
YAML
	run "$KILN" deps shaders/main.spv
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ "$output" == *"no successful run recorded"* ]]
	[[ "$output" == *"input shaders/main.frag"* ]]
	[[ "$output" != *"discovered shaders"* ]]
	run "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	run "$KILN" deps shaders/main.spv
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	inner=$(xxh128sum shaders/lib/inner.glsl | cut -c1-8)
	[[ "$output" == *"discovered shaders/lib/inner.glsl (depfile) $inner"* ]] || { echo "$output"; false; }
	[[ "$output" == *"discovered shaders/lib/common.glsl (depfile)"* ]]
	run "$KILN" deps pack/main.bin
	[[ "$output" == *"prerequisite shaders/main.spv"* ]] || { echo "$output"; false; }
	# reverse: the inner include (relative to the current folder, too)
	run "$KILN" rdeps shaders/lib/inner.glsl
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$output" = "shaders/main.spv  (discovered shaders/lib/inner.glsl)" ] || { echo "$output"; false; }
	(cd shaders/lib && "$KILN" rdeps inner.glsl) | grep -qx 'shaders/main.spv  (discovered shaders/lib/inner.glsl)'
	run "$KILN" rdeps --all shaders/lib/inner.glsl
	[ "${lines[0]}" = "shaders/main.spv  (discovered shaders/lib/inner.glsl)" ] || { echo "$output"; false; }
	[ "${lines[1]}" = "  pack/main.bin  (prerequisite shaders/main.spv)" ] || { echo "$output"; false; }
	run "$KILN" rdeps shaders/main.frag
	[ "$output" = "shaders/main.spv  (input shaders/main.frag)" ] || { echo "$output"; false; }
	run "$KILN" rdeps shaders/main.spv
	[ "$output" = "pack/main.bin  (prerequisite shaders/main.spv)" ] || { echo "$output"; false; }
	# a restarted daemon answers from the store's records
	"$KILN" stop >/dev/null
	run "$KILN" rdeps shaders/lib/inner.glsl
	[ "$output" = "shaders/main.spv  (discovered shaders/lib/inner.glsl)" ] || { echo "$output"; false; }
	# the include chain changes: the old include leaves the reverse records
	printf '#version 450\nlayout(location = 0) out vec4 color;\nvoid main() { color = vec4(1.0); }\n' >shaders/main.frag
	run "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	run --separate-stderr "$KILN" rdeps shaders/lib/inner.glsl
	[ "$status" -eq 0 ] && [ "$output" = "" ] || { echo "$output"; false; }
	[[ "$stderr" == *"no step depends on file shaders/lib/inner.glsl"* ]]
	run "$KILN" deps shaders/main.spv
	[[ "$output" != *"discovered shaders/lib"* ]] || { echo "$output"; false; }
	run "$KILN" deps no/such
	[ "$status" -eq 2 ]
	[[ "$output" == *"no step no/such"* ]] || { echo "$output"; false; }
}
