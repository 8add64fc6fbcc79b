#!/usr/bin/env bats
# `make install` (README "Install"): the programs, libkiln with its
# pkg-config file, the bash completion where bash-completion looks, and
# the man pages kiln(1) and kiln.yaml(5); the completion works when
# called as bash calls it, and the man pages render without warnings.
# (`make install` builds the release variant first when it is not built.)

bats_require_minimum_version 1.5.0

load daemon_helpers

setup_file() {
	export ROOT="$BATS_FILE_TMPDIR/root"
	make -C "$KILN_TOP" --no-print-directory install DESTDIR="$ROOT" PREFIX=/usr \
		>"$BATS_FILE_TMPDIR/install.log" 2>&1 ||
		{ tail -n 30 "$BATS_FILE_TMPDIR/install.log"; return 1; }
}

# complete WORD...: call the completion function as bash does for the
# command line "WORD...", the last word being completed; REPLY_WORDS is
# what it offers, space-separated.
complete_words() {
	REPLY_WORDS=$(bash -c '
		source "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
		_kiln
		printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " " | sed "s/ \$//"
	' complete "$ROOT/usr/share/bash-completion/completions/kiln" "$@")
}

@test "make install puts the programs, the library, kiln.pc, the completion and the man pages in place" {
	for f in bin/kiln bin/kilnd lib/kiln/libkilntrace.so include/kiln/kiln.h lib/libkiln.a \
	         lib/pkgconfig/kiln.pc share/bash-completion/completions/kiln \
	         share/man/man1/kiln.1 share/man/man5/kiln.yaml.5; do
		[ -f "$ROOT/usr/$f" ] || { echo "missing: $f"; false; }
	done
	[ -x "$ROOT/usr/bin/kiln" ]
	# the pkg-config file names the installed prefix
	run env PKG_CONFIG_PATH="$ROOT/usr/lib/pkgconfig" pkg-config --cflags kiln
	[ "$status" -eq 0 ] && [ "$(echo $output)" = "-I/usr/include/kiln" ] || { echo "$output"; false; }
	run env PKG_CONFIG_PATH="$ROOT/usr/lib/pkgconfig" pkg-config --libs kiln
	[[ "$output" == *"-lkiln"* ]] || { echo "$output"; false; }
}

@test "the man pages render without warnings" {
	command -v man >/dev/null || skip "man is not installed (Debian: man-db)"
	for page in man1/kiln.1 man5/kiln.yaml.5; do
		run --separate-stderr env MANWIDTH=80 man --warnings -l "$ROOT/usr/share/man/$page"
		[ "$status" -eq 0 ] || { echo "$page: status $status: $stderr"; false; }
		[ -z "$stderr" ] || { echo "$page warns: $stderr"; false; }
		[[ "$output" == *"NAME"*"kiln"* ]]
	done
	run env MANWIDTH=80 man -l "$ROOT/usr/share/man/man1/kiln.1"
	[[ "$output" == *"graph [URL|GLOB...]"* ]] || { echo "$output"; false; }
}

@test "the bash completion parses and completes commands, flags, profiles and URLs" {
	run bash -n "$ROOT/usr/share/bash-completion/completions/kiln"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	cat >kiln.yaml <<'YAML'
kiln: 1
project: c
sources: [src]
profiles:
  pc:
  mobile: { inherits: pc }
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - { match: "src/*.txt", url: "text/${match.name}", outputs: "${match.name}.txt", tool: copy }
YAML
	mkdir src
	echo a >src/alpha.txt
	echo b >src/beta.txt
	complete_words "$KILN" gr
	[ "$REPLY_WORDS" = graph ] || { echo "got '$REPLY_WORDS'"; false; }
	complete_words "$KILN" st
	[ "$REPLY_WORDS" = "status stop" ] || { echo "got '$REPLY_WORDS'"; false; }
	complete_words "$KILN" graph --r
	[ "$REPLY_WORDS" = "--rdeps" ] || { echo "got '$REPLY_WORDS'"; false; }
	complete_words "$KILN" graph --format ""
	[ "$REPLY_WORDS" = "dot json" ] || { echo "got '$REPLY_WORDS'"; false; }
	complete_words "$KILN" build -p ""
	[ "$REPLY_WORDS" = "mobile pc" ] || { echo "got '$REPLY_WORDS'"; false; }
	complete_words "$KILN" build text/a
	[ "$REPLY_WORDS" = "text/alpha" ] || { echo "got '$REPLY_WORDS'"; false; }
	# -C on the line: that project's URLs, from anywhere
	cd "$BATS_TEST_TMPDIR"
	complete_words "$KILN" why -C "$P" text/
	[ "$REPLY_WORDS" = "text/alpha text/beta" ] || { echo "got '$REPLY_WORDS'"; false; }
	cd "$P"
	# completing starts no daemon
	[ ! -e .kiln ]
}
