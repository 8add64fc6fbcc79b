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
