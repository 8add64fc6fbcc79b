#!/usr/bin/env bats
# Which program a tool name means: the PATH of the client that asks for the
# build (as with make), or the project's `path:` when kiln.yaml pins one —
# never the PATH of whichever shell happened to start the daemon. Two
# folders each hold a program `mytool` that writes its own marker and the
# PATH it ran with; one warm daemon serves builds from "shells" with
# either folder first on PATH.

bats_require_minimum_version 1.5.0

load daemon_helpers

# mytool_in DIR MARK: DIR/mytool writes MARK, then its $PATH, into $1.
mytool_in() {
	mkdir -p "$1"
	printf '#!/bin/sh\nprintf "%%s\\n%%s\\n" %s "$PATH" > "$1"\n' "$2" >"$1/mytool"
	chmod +x "$1/mytool"
}

# write_project [PATH-LINE]: one step whose tool runs `mytool`.
write_project() {
	mkdir -p src
	printf 'x\n' >src/a.txt
	{
		printf 'kiln: 1\nproject: t\nsources: [src]\nprofiles:\n  default:\n'
		[ -z "${1:-}" ] || printf '%s\n' "$1"
		printf 'tools:\n  mine: { run: [mytool, "${out}"] }\n'
		printf 'assets:\n  - url: out.txt\n    tool: mine\n    inputs: [src/a.txt]\n'
	} >kiln.yaml
}

# build_with DIR: kiln build --json from a shell with DIR first on PATH;
# RESULT is the step's result ("ran", "reused", ...).
build_with() {
	run --separate-stderr env PATH="$1:$PATH" "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "status $status"; echo "$output"; echo "$stderr"; false; }
	RESULT=$(printf '%s\n' "$output" | grep '"url":"out.txt"' |
	         sed 's/.*"result":"\([^"]*\)".*/\1/')
}

# expect_output MARK DIR: out.txt came from DIR's mytool, run with DIR
# first on its PATH.
expect_output() {
	local got
	got=$(sed -n 1p build/default/out.txt)
	[ "$got" = "$1" ] || { echo "out.txt from mytool '$got', expected '$1'"; cat build/default/out.txt; false; }
	got=$(sed -n 2p build/default/out.txt)
	case "$got" in
	"$2":*) ;;
	*) echo "the tool ran with PATH '$got', expected '$2' first"; false ;;
	esac
}

@test "a warm daemon finds a tool's program on the PATH of the client that asks for the build" {
	mytool_in "$BATS_TEST_TMPDIR/a" A
	mytool_in "$BATS_TEST_TMPDIR/b" B
	write_project
	# the first build starts the daemon: with a's folder on its PATH
	build_with "$BATS_TEST_TMPDIR/a"
	[ "$RESULT" = ran ] || { echo "first build: $RESULT"; false; }
	expect_output A "$BATS_TEST_TMPDIR/a"
	# another shell: its mytool is another program, so the step runs again
	build_with "$BATS_TEST_TMPDIR/b"
	[ "$RESULT" = ran ] || { echo "b's build: '$RESULT', expected ran"; echo "$output"; false; }
	expect_output B "$BATS_TEST_TMPDIR/b"
	run "$KILN" why out.txt
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" | grep -qx "program: $BATS_TEST_TMPDIR/b/mytool" ||
		{ echo "kiln why, no 'program: .../b/mytool' line:"; echo "$output"; false; }
	# back in the first shell: a's result is in the store
	build_with "$BATS_TEST_TMPDIR/a"
	[ "$RESULT" = reused ] || { echo "a's build again: '$RESULT', expected reused"; echo "$output"; false; }
	expect_output A "$BATS_TEST_TMPDIR/a"
	run "$KILN" ls --json
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" | grep -q "\"program\":\"$BATS_TEST_TMPDIR/a/mytool\"" ||
		{ echo "kiln ls --json, no program field naming a's mytool:"; echo "$output"; false; }
}

@test "with path: pinned in kiln.yaml the client's PATH does not matter" {
	mytool_in "$P/tools/bin" A
	mytool_in "$BATS_TEST_TMPDIR/b" B
	write_project "path: [tools/bin, /usr/bin, /bin]"
	build_with "$BATS_TEST_TMPDIR/b"
	[ "$RESULT" = ran ] || { echo "first build: $RESULT"; false; }
	expect_output A "$P/tools/bin"
	[ "$(sed -n 2p build/default/out.txt)" = "$P/tools/bin:/usr/bin:/bin" ] ||
		{ echo "tool's PATH: $(sed -n 2p build/default/out.txt)"; false; }
	# another shell, another PATH: nothing to do
	build_with "/nonexistent"
	[ "$RESULT" != ran ] || { echo "ran again under another client PATH"; echo "$output"; false; }
	expect_output A "$P/tools/bin"
	run "$KILN" why out.txt
	printf '%s\n' "$output" | grep -qx "program: $P/tools/bin/mytool" ||
		{ echo "kiln why:"; echo "$output"; false; }
}

@test "path: entries must be folders of the project or absolute, one per entry" {
	write_project "path: [../elsewhere, '/usr/bin:/bin']"
	run "$KILN" check
	[ "$status" -eq 2 ] || { echo "status $status"; echo "$output"; false; }
	printf '%s\n' "$output" | grep -q "path\[0\]" || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -q "path\[1\].*':'" || { echo "$output"; false; }
}

# versions_folder: a folder for the programs behind a shim, under /tmp (a
# machine folder) and not beside the project (whose files would be
# external dependencies), as ~/.pyenv/versions is under a hidden folder.
versions_folder() {
	printf '%s/versions-%s\n' "$BATS_FILE_TMPDIR" "$BATS_TEST_NUMBER"
}

# shim_in DIR TARGET: DIR/mytool is a shell-script shim that execs TARGET
# with its arguments, as pyenv's python3 shim execs the interpreter.
shim_in() {
	mkdir -p "$1"
	printf '#!/bin/sh\nexec "%s" "$@"\n' "$2" >"$1/mytool"
	chmod +x "$1/mytool"
}

@test "a program found through a shim: another program behind the shim reruns the step (warm and after a restart); the first one back is reused" {
	local shims=$BATS_TEST_TMPDIR/shims versions
	versions=$(versions_folder)
	mytool_in "$versions" V1
	shim_in "$shims" "$versions/mytool"
	write_project
	build_with "$shims"
	[ "$RESULT" = ran ] || { echo "first build: $RESULT"; false; }
	expect_output V1 "$shims"
	build_with "$shims"
	[ "$RESULT" != ran ] || { echo "ran again with nothing changed"; echo "$output"; false; }
	# an upgrade behind the shim (no discovered dependency sees it)
	mytool_in "$versions" V2
	build_with "$shims"
	[ "$RESULT" = ran ] || { echo "after the swap: '$RESULT', expected ran"; echo "$output"; false; }
	expect_output V2 "$shims"
	run "$KILN" why out.txt
	[[ "$output" == *"tool runs changed "* ]] || { echo "$output"; false; }
	[[ "$output" == *"program: $shims/mytool"* ]] || { echo "$output"; false; }
	# a new daemon knows what the shim execs from the step's record
	"$KILN" stop
	build_with "$shims"
	[ "$RESULT" != ran ] || { echo "ran after a restart with nothing changed"; echo "$output"; false; }
	mytool_in "$versions" V3
	build_with "$shims"
	[ "$RESULT" = ran ] || { echo "after a restart and a swap: '$RESULT', expected ran"; echo "$output"; false; }
	expect_output V3 "$shims"
	# the first program back: its result is in the store
	mytool_in "$versions" V1
	build_with "$shims"
	[ "$RESULT" = reused ] || { echo "V1 back: '$RESULT', expected reused"; echo "$output"; false; }
	expect_output V1 "$shims"
}

@test "a shim and a PATH that finds the program directly: each is keyed by what it runs, and once both built, switching reruns nothing" {
	local shims=$BATS_TEST_TMPDIR/shims versions
	versions=$(versions_folder)
	mytool_in "$versions" V1
	shim_in "$shims" "$versions/mytool"
	write_project
	build_with "$shims"
	[ "$RESULT" = ran ] || { echo "first build: $RESULT"; false; }
	# the shim's own text is in its key (a wrapper may add options or
	# environment), so a client reaching the program directly builds once
	build_with "$versions"
	[ "$RESULT" = ran ] || { echo "direct: '$RESULT', expected ran"; echo "$output"; false; }
	build_with "$shims"
	[ "$RESULT" = reused ] || { echo "shim again: '$RESULT', expected reused"; echo "$output"; false; }
	build_with "$versions"
	[ "$RESULT" = reused ] || { echo "direct again: '$RESULT', expected reused"; echo "$output"; false; }
	# both see the program behind the shim change
	mytool_in "$versions" V2
	build_with "$shims"
	[ "$RESULT" = ran ] || { echo "shim after the swap: '$RESULT', expected ran"; echo "$output"; false; }
	build_with "$versions"
	[ "$RESULT" = ran ] || { echo "direct after the swap: '$RESULT', expected ran"; echo "$output"; false; }
	expect_output V2 "$versions"
}
