#!/usr/bin/env bats
# What build/<profile>/ holds and what writing into it does (issue 20):
# by default every output is a file of its own (a reflink or a copy of its
# blob), so an edit there changes neither the store nor another output,
# and the next build puts the file back. With `materialize: hardlink`
# outputs are hard links to the blobs; an edit through one is found, the
# damaged blob quarantined in .kiln/store/corrupt/ and the step run again.
# build/ follows the umask of whoever started kilnd (0644 files, 0755
# folders under 022); the store stays private. With hardlink, outputs are
# the blobs' inodes (0400): the tests run as root, which writes anyway.

bats_require_minimum_version 1.5.0

load daemon_helpers

# write_project [MODE]: two sources with the same bytes, copied one to one
# to build/pc/c/a.txt and b.txt; MODE, when given, is kiln.yaml's
# top-level materialize.
write_project() {
	mkdir -p src
	printf 'same bytes\n' >src/a.txt
	printf 'same bytes\n' >src/b.txt
	{
		printf 'kiln: 1\nproject: m\nsources: [src]\n'
		[ -z "${1:-}" ] || printf 'materialize: %s\n' "$1"
		cat <<'YAML'
profiles:
  pc:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - match: "src/*.txt"
    url: "c/${match.name}.txt"
    tool: copy
YAML
	} >kiln.yaml
}

# build: kiln build --json, which must succeed; RAN is the sorted URLs of
# the steps that ran.
build() {
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "build: status $status"; echo "$output"; echo "$stderr"; false; }
	RAN=$(printf '%s\n' "$output" | grep '"event":"step"' | grep '"result":"ran"' |
	      sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
}

expect_ran() {
	[ "$RAN" = "$1" ] || { echo "ran: '$RAN', expected '$1'"; echo "$output"; false; }
}

# H: the content hash of c/a.txt (and c/b.txt) from the index map; BLOB
# its file in the store.
blob_of_a() {
	H=$(awk -F'\t' '$1 == "c/a.txt" { print $2 }' build/pc/kiln-index.txt)
	[ -n "$H" ] || { echo "c/a.txt is not in build/pc/kiln-index.txt"; false; }
	BLOB=.kiln/store/objects/${H:0:2}/${H:2}
}

# expect_content FILE: FILE holds the sources' bytes.
expect_content() {
	[ "$(cat "$1")" = "same bytes" ] || { echo "$1 holds '$(cat "$1")', expected 'same bytes'"; false; }
}

# expect_own_file FILE: a file of its own: link count 1, not the blob's inode.
expect_own_file() {
	[ "$(stat -c %h "$1")" -eq 1 ] ||
		{ echo "$1 has $(stat -c %h "$1") links (inode $(stat -c %i "$1"), blob $(stat -c %i "$BLOB")): a hard link, expected a copy"; false; }
	[ "$(stat -c %i "$1")" != "$(stat -c %i "$BLOB")" ] || { echo "$1 is the blob's inode"; false; }
}

@test "default mode: outputs are copies that share no inode with the blob or each other" {
	write_project
	build
	expect_ran "c/a.txt c/b.txt"
	blob_of_a
	expect_own_file build/pc/c/a.txt
	expect_own_file build/pc/c/b.txt
	[ "$(stat -c %i build/pc/c/a.txt)" != "$(stat -c %i build/pc/c/b.txt)" ] ||
		{ echo "a.txt and b.txt are one inode"; false; }
	expect_content build/pc/c/a.txt
}

# modes_of UMASK: build the project with kiln (so kilnd too) under UMASK;
# MODES is "build pc c a.txt b.txt kiln-index.txt"'s modes, in that order.
modes_of() {
	write_project
	run bash -c "umask $1 && exec \"\$KILN\" build"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	MODES=$(stat -c %a build build/pc build/pc/c build/pc/c/a.txt build/pc/c/b.txt \
	        build/pc/kiln-index.txt | tr '\n' ' ' | sed 's/ $//')
}

@test "build/ follows the user's umask: 022 gives folders 0755 and files 0644" {
	modes_of 022
	[ "$MODES" = "755 755 755 644 644 644" ] || { echo "modes: $MODES"; false; }
	# the store stays kilnd's own
	[ "$(stat -c %a .kiln/store/objects)" = 700 ] || { echo "store: $(stat -c %a .kiln/store/objects)"; false; }
}

@test "build/ follows the user's umask: 027 gives folders 0750 and files 0640" {
	modes_of 027
	[ "$MODES" = "750 750 750 640 640 640" ] || { echo "modes: $MODES"; false; }
}

@test "default mode: writing into an output changes neither its sibling nor the store, and the next build puts it back" {
	write_project
	build
	blob_of_a
	printf 'EDITED IN BUILD\n' >build/pc/c/a.txt
	expect_content build/pc/c/b.txt
	expect_content "$BLOB"
	[ "$("$KILN" cat "$H")" = "same bytes" ] || { echo "kiln cat $H: $("$KILN" cat "$H" 2>&1)"; false; }
	# the warm daemon
	build
	expect_ran ""
	expect_content build/pc/c/a.txt
	expect_own_file build/pc/c/a.txt
	# and a daemon started afresh
	printf 'EDITED AGAIN\n' >build/pc/c/a.txt
	"$KILN" stop
	build
	expect_ran ""
	expect_content build/pc/c/a.txt
	expect_own_file build/pc/c/a.txt
	expect_content build/pc/c/b.txt
}

@test "default mode: an in-place edit that keeps size and mtime is noticed (warm and cold)" {
	write_project
	build
	blob_of_a
	for round in warm cold; do
		touch -r build/pc/c/a.txt ref
		size=$(stat -c %s build/pc/c/a.txt)
		printf 'SAME BYTES\n' >build/pc/c/a.txt
		touch -r ref build/pc/c/a.txt
		[ "$(stat -c %s build/pc/c/a.txt)" = "$size" ]
		[ "$(stat -c %Y.%y build/pc/c/a.txt)" = "$(stat -c %Y.%y ref)" ]
		[ "$round" = warm ] || "$KILN" stop
		build
		expect_ran ""
		expect_content build/pc/c/a.txt || { echo "($round daemon)"; false; }
	done
	expect_content "$BLOB"
}

@test "default mode: tar of build/ holds no hard-link entries" {
	write_project
	build
	n=$(tar -cf - -C build pc | tar -tvf - | grep -c ' link to ' || true)
	[ "$n" -eq 0 ] || { tar -cf - -C build pc | tar -tvf -; false; }
}

@test "hardlink mode: outputs are hard links; an edit through one is found, the blob quarantined and the step rerun" {
	write_project hardlink
	build
	expect_ran "c/a.txt c/b.txt"
	blob_of_a
	[ "$(stat -c %i build/pc/c/a.txt)" = "$(stat -c %i "$BLOB")" ] || { echo "a.txt is not a link to its blob"; false; }
	[ "$(stat -c %i build/pc/c/b.txt)" = "$(stat -c %i "$BLOB")" ] || { echo "b.txt is not a link to its blob"; false; }
	printf 'EDITED IN BUILD\n' >build/pc/c/a.txt
	build
	expect_ran "c/a.txt c/b.txt"
	[ -f ".kiln/store/corrupt/$H" ] || { echo "no .kiln/store/corrupt/$H:"; ls -la .kiln/store/corrupt; false; }
	[ "$(cat ".kiln/store/corrupt/$H")" = "EDITED IN BUILD" ]
	expect_content build/pc/c/a.txt
	expect_content build/pc/c/b.txt
	expect_content "$BLOB"
	[ "$("$KILN" cat "$H")" = "same bytes" ]
	build
	expect_ran ""
}

@test "hardlink mode: an edit through a link that keeps size and mtime is found by its hash" {
	write_project hardlink
	build
	blob_of_a
	"$KILN" stop
	touch -r build/pc/c/a.txt ref
	printf 'SAME BYTES\n' >build/pc/c/a.txt
	touch -r ref build/pc/c/a.txt
	build
	expect_ran "c/a.txt c/b.txt"
	expect_content build/pc/c/a.txt
	expect_content build/pc/c/b.txt
	[ "$(cat ".kiln/store/corrupt/$H")" = "SAME BYTES" ]
}

@test "hardlink mode: a ctime moved by another link to the blob runs nothing" {
	write_project hardlink
	build
	"$KILN" stop
	# b.txt is linked after a.txt: a.txt's ctime moved since it was recorded
	build
	expect_ran ""
	ln build/pc/c/a.txt elsewhere.txt
	build
	expect_ran ""
	[ -z "$(ls -A .kiln/store/corrupt)" ] || { echo "quarantined:"; ls -la .kiln/store/corrupt; false; }
}

@test "KILN_MATERIALIZE overrides the project's setting for one daemon; going back to copies breaks the links" {
	write_project
	KILN_MATERIALIZE=hardlink build
	blob_of_a
	[ "$(stat -c %i build/pc/c/a.txt)" = "$(stat -c %i "$BLOB")" ] || { echo "KILN_MATERIALIZE=hardlink made no link"; false; }
	"$KILN" stop
	build
	expect_ran ""
	expect_own_file build/pc/c/a.txt
	expect_own_file build/pc/c/b.txt
}

@test "an unknown materialize value is an error naming the file, line and field" {
	write_project symlink
	run --separate-stderr "$KILN" check -q
	[ "$status" -eq 2 ] || { echo "status $status"; echo "$stderr"; false; }
	[[ "$stderr" == *"kiln.yaml:4:14: error: materialize: "*"copy"*"hardlink"* ]] || { echo "$stderr"; false; }
}

@test "kilnd --materialize overrides kiln.yaml; a bad mode, flag or environment, is refused" {
	write_project hardlink
	"$KILND" --project . --materialize copy
	build
	blob_of_a
	expect_own_file build/pc/c/a.txt
	"$KILN" stop
	run --separate-stderr "$KILND" --project . --materialize symlink
	[ "$status" -eq 2 ] || { echo "status $status"; echo "$stderr"; false; }
	[[ "$stderr" == *"--materialize 'symlink': expected copy or hardlink"* ]] || { echo "$stderr"; false; }
	KILN_MATERIALIZE=symlink run --separate-stderr "$KILND" --project . --foreground
	[ "$status" -eq 1 ] || { echo "status $status"; echo "$stderr"; false; }
	[[ "$stderr$output" == *"KILN_MATERIALIZE='symlink': expected copy or hardlink"* ]] || { echo "$output"; echo "$stderr"; false; }
}
