#!/usr/bin/env bats
# Paths in depfiles and traces (docs/build.md, "Discovered paths"), with
# real tools: gcc and glslangValidator write includes as they found them
# ("src/shaders/ge/../utils/rgb.h", "../common/c.h"); kiln cleans them,
# records files outside the project by absolute path and leaves system
# headers out. A traced tool that reads another step's output under build/
# without declaring it gets a warning, in the build's output and in
# `kiln why`.

bats_require_minimum_version 1.5.0

load daemon_helpers

# build ARGS...: kiln build --json; RAN is the sorted URLs that ran.
build() {
	run --separate-stderr "$KILN" build --json "$@"
	RAN=$(printf '%s\n' "$output" | grep '"result":"ran"' |
		sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
}

# write_c CFLAGS...: a C step, untraced, that only its depfile tells about
# its includes.
write_c() {
	mkdir -p src/shaders/ge src/shaders/utils
	cat >src/shaders/ge/x.c <<'C'
#include <stddef.h>
#include "../utils/rgb.h"
int x(void) { return RGB + (int)sizeof(size_t); }
C
	printf '#define RGB 1\n' >src/shaders/utils/rgb.h
	local flags=""
	for f in "$@"; do flags="$flags \"$f\","; done
	cat >kiln.yaml <<YAML
kiln: 1
project: c
sources: [src]
profiles:
  pc:
tools:
  cc:
    run: [gcc,$flags -MD, -MF, "\${depfile}", -c, -o, "\${out}", "\${in}"]
    depfile: true
    trace: false
rules:
  - match: "src/shaders/ge/*.c"
    url: "obj/\${match.name}.o"
    tool: cc
YAML
}

@test "gcc, untraced: an include named with '..' in the depfile is a dependency; editing it reruns the step" {
	command -v gcc >/dev/null || skip "gcc is not installed"
	write_c
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$RAN" = "obj/x.o" ]
	build
	[ "$RAN" = "" ] || { echo "second build ran: $RAN"; false; }
	printf '#define RGB 2\n' >src/shaders/utils/rgb.h
	build
	[ "$RAN" = "obj/x.o" ] || { echo "editing the include ran '$RAN', expected obj/x.o: $output"; false; }
	run "$KILN" deps obj/x.o
	[[ "$output" == *"discovered src/shaders/utils/rgb.h (depfile)"* ]] || { echo "$output"; false; }
	# system headers are the machine's
	[[ "$output" != *"discovered /usr/"* ]] || { echo "$output"; false; }
	run "$KILN" why obj/x.o
	[[ "$output" == *"discovered dependency src/shaders/utils/rgb.h (depfile) changed"* ]] || { echo "$output"; false; }
	# a restarted daemon checks it from the action cache
	"$KILN" stop >/dev/null
	printf '#define RGB 3\n' >src/shaders/utils/rgb.h
	build
	[ "$RAN" = "obj/x.o" ] || { echo "after a restart ran '$RAN': $output"; false; }
}

@test "gcc -I../common: an include from a folder beside the project is recorded by absolute path and reruns the step" {
	command -v gcc >/dev/null || skip "gcc is not installed"
	mkdir -p ../common
	printf '#define C 1\n' >../common/c.h
	common=$(cd .. && pwd -P)/common/c.h
	write_c -I../common
	sed -i 's|#include "../utils/rgb.h"|#include "../utils/rgb.h"\n#include "c.h"|' src/shaders/ge/x.c
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$RAN" = "obj/x.o" ]
	run "$KILN" deps obj/x.o
	[[ "$output" == *"discovered $common (depfile)"* ]] || { echo "expected $common in: $output"; false; }
	[[ "$output" != *"discovered /usr/"* ]] || { echo "$output"; false; }
	run "$KILN" rdeps ../common/c.h
	[ "$output" = "obj/x.o  (discovered $common)" ] || { echo "$output"; false; }
	build
	[ "$RAN" = "" ]
	printf '#define C 2\n' >../common/c.h
	build
	[ "$RAN" = "obj/x.o" ] || { echo "editing ../common/c.h ran '$RAN': $output"; false; }
	run "$KILN" why obj/x.o
	[[ "$output" == *"discovered dependency $common (depfile) changed"* ]] || { echo "$output"; false; }
	"$KILN" stop >/dev/null
	printf '#define C 3\n' >../common/c.h
	build
	[ "$RAN" = "obj/x.o" ] || { echo "after a restart ran '$RAN': $output"; false; }
}

@test "glslangValidator: #include \"../lib/x.glsl\" from a subfolder is a dependency" {
	command -v glslangValidator >/dev/null || skip "glslangValidator is not installed (Debian: glslang-tools)"
	mkdir -p shaders/main shaders/lib
	cat >shaders/main/m.frag <<'GLSL'
#version 450
#extension GL_GOOGLE_include_directive : require
#include "../lib/x.glsl"
layout(location = 0) out vec4 color;
void main() { color = tint(); }
GLSL
	printf 'vec4 tint() { return vec4(1.0); }\n' >shaders/lib/x.glsl
	cat >kiln.yaml <<'YAML'
kiln: 1
project: s
sources: [shaders]
profiles:
  pc:
tools:
  glsl:
    run: [glslangValidator, -V, --depfile, "${depfile}", -o, "${out}", "${in}"]
    depfile: true
    trace: false
rules:
  - match: "shaders/main/*.frag"
    url: "shaders/${match.name}.spv"
    tool: glsl
YAML
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$RAN" = "shaders/m.spv" ]
	printf 'vec4 tint() { return vec4(0.5); }\n' >shaders/lib/x.glsl
	build
	[ "$RAN" = "shaders/m.spv" ] || { echo "editing the include ran '$RAN': $output"; false; }
	run "$KILN" deps shaders/m.spv
	[[ "$output" == *"discovered shaders/lib/x.glsl (depfile)"* ]] || { echo "$output"; false; }
}

@test "a traced tool that reads another step's output under build/ without declaring it gets a warning, in the build and in kiln why" {
	[ -f "$(dirname "$KILND")/libkilntrace.so" ] || skip "no libkilntrace.so"
	mkdir -p src
	printf 'a\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  sneak:
    shell: true
    run: 'cat build/pc/gen/a.txt ${in} > ${out}'
  honest:
    shell: true
    run: 'cat ${in...} > ${out}'
assets:
  - url: gen/a.txt
    tool: copy
    inputs: [src/a.txt]
  - url: sneaky.txt
    tool: sneak
    inputs: [src/a.txt]
  - url: honest.txt
    tool: honest
    inputs: ["@gen/a.txt"]
YAML
	build gen/a.txt
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[[ "$output" == *"ran sneaky.txt"*"  warning: used build/pc/gen/a.txt, an output of step gen/a.txt it does not declare"*'"@gen/a.txt"'*"kiln need gen/a.txt"* ]] || { echo "$output"; false; }
	# a declared prerequisite's output is no warning
	[ "$(printf '%s\n' "$output" | grep -c 'warning:')" -eq 1 ] || { echo "$output"; false; }
	run "$KILN" why sneaky.txt
	[[ "$output" == *"warning: used build/pc/gen/a.txt, an output of step gen/a.txt"* ]] || { echo "$output"; false; }
	run "$KILN" why honest.txt
	[[ "$output" != *"warning"* ]] || { echo "$output"; false; }
	# a reused result keeps its warnings (--json too), after a restart too
	printf 'b\n' >src/a.txt
	build sneaky.txt
	[ "$RAN" = "sneaky.txt" ] || { echo "$output $stderr"; false; }
	"$KILN" stop >/dev/null
	printf 'a\n' >src/a.txt
	build sneaky.txt
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[[ "$output" == *'"result":"reused"'*'"warnings":["used build/pc/gen/a.txt'* ]] || { echo "$output"; false; }
	run "$KILN" why sneaky.txt
	[[ "$output" == *"reused a cached result"*"warning: used build/pc/gen/a.txt"* ]] || { echo "$output"; false; }
}

@test "paths that cannot be store keys are warnings, never lost silently: 32 kept, then 'and N more'" {
	[ -f "$(dirname "$KILND")/libkilntrace.so" ] || skip "no libkilntrace.so"
	mkdir -p src
	printf 'a\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc:
tools:
  probe:
    shell: true
    run: 'for i in $(seq 1 40); do test -e "$(printf "odd\001name%d" $i)" || :; done; cat ${in} > ${out}'
assets:
  - url: probed.txt
    tool: probe
    inputs: [src/a.txt]
YAML
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[[ "$output" == *'  warning: cannot record odd\x01name1 as a dependency (not a valid store key'* ]] || { echo "$output"; false; }
	[ "$(printf '%s\n' "$output" | grep -c '^  warning: cannot record')" -eq 32 ] || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -qx '  warning: and 8 more warnings like these' || { echo "$output"; false; }
	run "$KILN" why probed.txt
	[ "$(printf '%s\n' "$output" | grep -c '^warning: ')" -eq 33 ] || { echo "$output"; false; }
}

# write_link_project TRACE: a folder beside the project holds real/ and
# inc.h; the project's inc/lnk is a symlink to ../../outside/real, and the
# project has an inc/inc.h of its own. A tool that reads
# "inc/lnk/../inc.h" reads outside/inc.h (the kernel climbs from the
# link's target), never inc/inc.h. With TRACE=false the tool is untraced
# and only its depfile names the path.
write_link_project() {
	mkdir -p ../outside/real inc src
	printf 'outside 1\n' >../outside/inc.h
	printf 'project\n' >inc/inc.h
	ln -sfn ../../outside/real inc/lnk
	printf 'a\n' >src/a.txt
	if [ "$1" = true ]; then
		cat >kiln.yaml <<'YAML'
kiln: 1
project: l
sources: [src]
profiles:
  pc:
tools:
  grab: { run: [cp, inc/lnk/../inc.h, "${out}"] }
rules:
  - match: "src/*.txt"
    url: "g/${match.name}"
    tool: grab
YAML
	else
		cat >kiln.yaml <<'YAML'
kiln: 1
project: l
sources: [src]
profiles:
  pc:
tools:
  grab:
    run: 'cp inc/lnk/../inc.h "${out}" && printf "%s: inc/lnk/../inc.h\n" "${out}" >"${depfile}"'
    shell: true
    depfile: true
    trace: false
rules:
  - match: "src/*.txt"
    url: "g/${match.name}"
    tool: grab
YAML
	fi
}

# link_case TRACE: the step follows the file it really read, warm and
# after a restart; the project's inc/inc.h, which it never read, is no
# dependency.
link_case() {
	write_link_project "$1"
	outside=$(cd ../outside && pwd -P)/inc.h
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$RAN" = "g/a" ]
	[ "$(cat build/pc/g/a)" = "outside 1" ]
	run "$KILN" deps g/a
	[[ "$output" == *"$outside"* ]] || { echo "the file read, $outside, is not a dependency: $output"; false; }
	[[ "$output" != *" inc/inc.h"* ]] || { echo "inc/inc.h, never read, is a dependency: $output"; false; }
	printf 'outside 2\n' >../outside/inc.h
	build
	[ "$RAN" = "g/a" ] || { echo "editing the file read ran '$RAN', expected g/a: $output"; false; }
	[ "$(cat build/pc/g/a)" = "outside 2" ]
	printf 'project 2\n' >inc/inc.h
	build
	[ "$RAN" = "" ] || { echo "editing inc/inc.h, never read, ran '$RAN'"; false; }
	"$KILN" stop >/dev/null
	printf 'outside 3\n' >../outside/inc.h
	build
	[ "$RAN" = "g/a" ] || { echo "after a restart, editing the file read ran '$RAN': $output"; false; }
	[ "$(cat build/pc/g/a)" = "outside 3" ]
}

@test "traced: a read of inc/lnk/../inc.h, lnk a symlink leading out, depends on the file the kernel reached, warm and after a restart" {
	link_case true
}

@test "depfile: inc/lnk/../inc.h, lnk a symlink leading out, is the file the kernel reached, warm and after a restart" {
	link_case false
}
