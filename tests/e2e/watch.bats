#!/usr/bin/env bats
# The daemon's inotify watch: a warm build stats only files something
# touched, and never trusts a file the watch cannot vouch for. Each case
# changes files the way users and editors do, right before a build (no
# sleeps), and checks exactly what ran; `files_statted` in the summary
# says how many files the daemon stat'ed to decide.

bats_require_minimum_version 1.5.0

load daemon_helpers

write_project() {
	mkdir -p src/sub
	for i in 1 2 3 4 5 6; do printf 'file %s\n' "$i" >src/f$i.txt; done
	printf 'deep\n' >src/sub/deep.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: w
sources: [src]
profiles: { default: }
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  concat: { run: [sh, -c, 'cat "$@" > "$0"', "${out}", "${in...}"] }
rules:
  - match: "src/**/*.txt"
    url: "copy/${match.name}"
    tool: copy
assets:
  - { url: all, tool: concat, inputs: ["@copy/**"] }
YAML
}

# build ARGS...: kiln build --json; RAN is the sorted URLs of the steps
# that ran, STATTED the summary's files_statted.
build() {
	run --separate-stderr "$KILN" build --json "$@"
	[ "$status" -eq 0 ] || { echo "status $status"; echo "$output"; echo "$stderr"; false; }
	RAN=$(printf '%s\n' "$output" | grep '"event":"step"' | grep '"result":"ran"' |
	      sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
	STATTED=$(printf '%s\n' "$output" | grep '"event":"build"' |
	          sed 's/.*"files_statted":\([0-9]*\).*/\1/')
}

expect_ran() {
	[ "$RAN" = "$1" ] || { echo "ran: '$RAN'"; echo "expected: '$1'"; echo "$output"; false; }
}

# Two builds to settle: the first stats everything, the second has the
# watch's word for every file (the folders the first made in build/ do
# not count as changes).
settle() {
	build
	build
	expect_ran ""
}

@test "a warm no-op build stats no source file; one edit is seen at once and stats only that file" {
	write_project
	settle
	# the two tools' programs (/usr/bin/cp, sh) are stat'ed, no source
	[ "$STATTED" -eq 2 ] || { echo "statted $STATTED"; false; }
	printf 'changed\n' >src/f3.txt
	build
	expect_ran "all copy/f3"
	# the tools and the changed file (looked at again after its run), not
	# the six others: 9 without the watch
	[ "$STATTED" -le 5 ] || { echo "statted $STATTED"; false; }
	cmp build/default/copy/f3 src/f3.txt
}

@test "an editor's save (write a temp file, rename it over) and a delete then re-create are seen" {
	write_project
	settle
	printf 'saved\n' >src/.f2.swp
	mv src/.f2.swp src/f2.txt
	build
	expect_ran "all copy/f2"
	cmp build/default/copy/f2 src/f2.txt
	rm src/f4.txt
	printf 'back again\n' >src/f4.txt
	build
	expect_ran "all copy/f4"
	cmp build/default/copy/f4 src/f4.txt
}

@test "a folder moved away and another put in its place is seen (everything is looked at again)" {
	write_project
	settle
	mv src/sub src/old
	mkdir src/sub
	printf 'other deep\n' >src/sub/deep.txt
	rm -r src/old
	build
	expect_ran "all copy/deep"
	cmp build/default/copy/deep src/sub/deep.txt
}

@test "a source that is a symlink is stat'ed every build: its target changing is seen" {
	write_project
	mkdir -p elsewhere
	printf 'target one\n' >elsewhere/t.txt
	ln -s ../elsewhere/t.txt src/link.txt
	settle
	printf 'target two\n' >elsewhere/t.txt
	build
	expect_ran "all copy/link"
	[ "$(cat build/default/copy/link)" = "target two" ]
}

@test "an output edited in build/ is seen through the watch and rebuilt" {
	write_project
	settle
	chmod u+w build/default/copy/f1 2>/dev/null || true
	rm -f build/default/copy/f1
	printf 'edited\n' >build/default/copy/f1
	build
	[ "$(cat build/default/copy/f1)" = "file 1" ] || { cat build/default/copy/f1; false; }
}

@test "thousands of changes in one folder become one record for it: its files are stat'ed once, an edit among them is seen" {
	write_project
	settle
	# more names than the watch keeps for one folder (4,096), then an edit
	for i in $(seq 5000); do : >src/other$i.tmp; done
	printf 'changed\n' >src/f2.txt
	build
	expect_ran "all copy/f2"
	cmp build/default/copy/f2 src/f2.txt
	# the tools and all six sources of src/ (kept by name: the tools, f2
	# and its output), not src/sub's
	[ "$STATTED" -ge 8 ] && [ "$STATTED" -le 10 ] || { echo "statted $STATTED"; false; }
	build
	expect_ran ""
	[ "$STATTED" -eq 2 ] || { echo "statted $STATTED"; false; }
}

@test "with KILN_NO_WATCH=1 every build stats every source" {
	write_project
	KILN_NO_WATCH=1 build
	build
	build
	[ "$STATTED" -eq 9 ] || { echo "statted $STATTED"; false; }
	printf 'changed\n' >src/f5.txt
	build
	expect_ran "all copy/f5"
}
