#!/usr/bin/env bats
# store_cli.bats — the offline store commands of the real kiln binary:
# put, cat, fsck, gc, store discovery, bad input and usage.
#
# Run by tests/run.sh with $KILN (the binary under test) and $KILN_TOP (the
# repository). Every case works in its own $BATS_TEST_TMPDIR.

bats_require_minimum_version 1.5.0

setup() {
	[ -x "${KILN:-}" ] || { echo "KILN='${KILN:-}' is not an executable" >&2; return 1; }
	cd "$BATS_TEST_TMPDIR"
	S=$BATS_TEST_TMPDIR/store
	printf 'hello, kiln\n' >a.txt
	head -c 300000 /dev/urandom >b.bin
}

# blob_path HASH: where the store keeps a blob (kiln_store.h's layout).
blob_path() {
	echo "$S/objects/${1:0:2}/${1:2}"
}

# put_hash FILE: put FILE into $S, print its hash.
put_hash() {
	"$KILN" put --store "$S" "$1" | cut -d' ' -f1
}

# snapshot DIR: every path, type, mode, size, mtime and content hash under
# DIR, to prove a command changed nothing.
snapshot() {
	(cd "$1" && find . -printf '%p %y %m %s %T@\n' | sort &&
		find . -type f -exec xxh128sum {} + | sort)
}

# snapshot_data DIR: snapshot without db/lock.mdb, LMDB's table of live
# readers, which every reader of a store writes to by design.
snapshot_data() {
	snapshot "$1" | grep -v '^\(\./\|[0-9a-f]*  \./\)db/lock\.mdb\b'
}

# corrupt_byte FILE: flip the content of the first byte in place.
corrupt_byte() {
	chmod u+w "$1"
	local first
	first=$(head -c 1 "$1" | od -An -tu1 | tr -d ' ')
	printf "\\$(printf '%03o' $(((first + 1) % 256)))" |
		dd of="$1" bs=1 seek=0 count=1 conv=notrunc status=none
}

# ---- put --------------------------------------------------------------

@test "put prints the same hash and line format as xxh128sum" {
	run --separate-stderr "$KILN" put --store "$S" a.txt b.bin
	[ "$status" -eq 0 ] || { echo "status $status, stderr: $stderr"; false; }
	expected=$(xxh128sum a.txt b.bin)
	[ "$output" = "$expected" ] || { printf 'got:\n%s\nwant:\n%s\n' "$output" "$expected"; false; }
}

@test "put - reads stdin and prints the hash of its bytes" {
	run --separate-stderr bash -c '"$KILN" put --store "$1" - <b.bin' _ "$S"
	[ "$status" -eq 0 ]
	[ "$output" = "$(xxh128sum <b.bin | cut -d' ' -f1)  -" ]
}

@test "put stores an empty file" {
	: >empty
	run --separate-stderr "$KILN" put --store "$S" empty
	[ "$status" -eq 0 ]
	[ "$output" = "$(xxh128sum empty)" ]
	run "$KILN" cat --store "$S" "${output%% *}"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "put creates the store, a read-only blob named by its hash" {
	[ ! -e "$S" ]
	h=$(put_hash b.bin)
	[ -f "$S/kiln-store" ]
	[ -f "$(blob_path "$h")" ]
	cmp b.bin "$(blob_path "$h")"
	[ ! -w "$(blob_path "$h")" ] || [ "$(id -u)" -eq 0 ]
}

@test "put of a missing file exits 2, names it, and still stores the others" {
	run --separate-stderr "$KILN" put --store "$S" a.txt nosuch.png b.bin
	[ "$status" -eq 2 ]
	[[ $stderr == *nosuch.png* ]] || { echo "stderr: $stderr"; false; }
	[ "$output" = "$(xxh128sum a.txt b.bin)" ]
}

@test "put of only missing files exits 2 and creates no store" {
	run --separate-stderr "$KILN" put --store "$S" nosuch.png
	[ "$status" -eq 2 ]
	[[ $stderr == *nosuch.png* ]]
	[ ! -e "$S" ]
}

@test "put of a folder exits 2 and names it" {
	mkdir art
	run --separate-stderr "$KILN" put --store "$S" art
	[ "$status" -eq 2 ]
	[[ $stderr == *art* ]]
	[ -z "$output" ]
}

@test "put without a FILE exits 2 with usage on stderr" {
	run --separate-stderr "$KILN" put --store "$S"
	[ "$status" -eq 2 ]
	[[ $stderr == *"usage: kiln put"* ]]
	[ ! -e "$S" ]
}

@test "put whose stdout cannot be written exits 2" {
	[ -w /dev/full ] || skip "no /dev/full"
	run --separate-stderr bash -c '"$KILN" put --store "$1" a.txt >/dev/full' _ "$S"
	[ "$status" -eq 2 ]
	[[ $stderr == *stdout* ]]
}

@test "put with stdin and stdout closed never writes into the store's files" {
	put_hash b.bin >/dev/null
	"$KILN" put --store "$S" - a.txt <&- >&-
	run --separate-stderr "$KILN" fsck --store "$S"
	[ "$status" -eq 0 ] || { echo "fsck: $output $stderr"; false; }
	[[ $output == *"checked 3 blobs"* ]] || { echo "fsck: $output"; false; }
}

# ---- cat --------------------------------------------------------------

@test "cat gives back the exact bytes that were put" {
	h=$(put_hash b.bin)
	"$KILN" cat --store "$S" "$h" >out.bin
	cmp b.bin out.bin
}

@test "cat accepts the hash in upper case" {
	h=$(put_hash a.txt)
	"$KILN" cat --store "$S" "${h^^}" >out.txt
	cmp a.txt out.txt
}

@test "cat of a corrupted blob exits 1 and prints nothing" {
	h=$(put_hash b.bin)
	corrupt_byte "$(blob_path "$h")"
	run --separate-stderr "$KILN" cat --store "$S" "$h"
	[ "$status" -eq 1 ] || { echo "status $status"; false; }
	[ -z "$output" ] || { echo "stdout had ${#output} characters"; false; }
	[[ $stderr == *"$h"* ]] || { echo "stderr does not name the hash: $stderr"; false; }
}

@test "cat of a truncated blob exits 1 and prints nothing" {
	h=$(put_hash b.bin)
	chmod u+w "$(blob_path "$h")"
	truncate -s 1000 "$(blob_path "$h")"
	"$KILN" cat --store "$S" "$h" >out.bin && status=0 || status=$?
	[ "$status" -eq 1 ]
	[ ! -s out.bin ]
}

@test "cat of a blob not in the store exits 1 and names the hash" {
	put_hash a.txt >/dev/null
	h=$(xxh128sum b.bin | cut -d' ' -f1)
	run --separate-stderr "$KILN" cat --store "$S" "$h"
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	[[ $stderr == *"$h"* ]]
}

@test "cat of a malformed hash exits 2 and creates no store" {
	good=$(xxh128sum a.txt | cut -d' ' -f1)
	for bad in "${good:1}" "${good}0" "${good}${good}" "" "../$good" "/$good"; do
		run --separate-stderr "$KILN" cat --store "$S" "$bad"
		[ "$status" -eq 2 ] || { echo "'$bad': status $status"; false; }
		[ -z "$output" ]
		[[ $stderr == *"not a blob hash"* ]] || { echo "'$bad': $stderr"; false; }
	done
	[ ! -e "$S" ]
}

@test "cat of something that is no hash is looked up as a URL, and creates no store" {
	good=$(xxh128sum a.txt | cut -d' ' -f1)
	for url in xyz "g${good:1}" " $good"; do
		run --separate-stderr "$KILN" cat --store "$S" "$url"
		[ "$status" -eq 2 ] || { echo "'$url': status $status"; false; }
		[ -z "$output" ]
		[[ $stderr == *"$S: no kiln store here"* ]] || { echo "'$url': $stderr"; false; }
	done
	[ ! -e "$S" ]
}

@test "cat on a folder with no store exits 2 and creates nothing" {
	h=$(xxh128sum a.txt | cut -d' ' -f1)
	run --separate-stderr "$KILN" cat --store "$S" "$h"
	[ "$status" -eq 2 ]
	[[ $stderr == *"$S"* ]]
	[ ! -e "$S" ]
}

# ---- fsck -------------------------------------------------------------

@test "fsck on a clean store exits 0 and counts its blobs" {
	put_hash a.txt >/dev/null
	put_hash b.bin >/dev/null
	run --separate-stderr "$KILN" fsck --store "$S"
	[ "$status" -eq 0 ] || { echo "status $status: $output $stderr"; false; }
	[[ $output == *"checked 2 blobs"* ]] || { echo "output: $output"; false; }
	[[ $output == *"no problems"* ]]
}

@test "fsck after corrupting a blob exits 1, names its hash and changes nothing" {
	h=$(put_hash b.bin)
	put_hash a.txt >/dev/null
	corrupt_byte "$(blob_path "$h")"
	before=$(snapshot_data "$S")
	run --separate-stderr "$KILN" fsck --store "$S"
	[ "$status" -eq 1 ] || { echo "status $status"; false; }
	[[ $output == *corrupt*"$h"* ]] || { echo "output: $output"; false; }
	[[ $output == *"1 problem"* ]]
	[[ $output != *repaired:* ]]
	diff <(echo "$before") <(snapshot_data "$S")
}

@test "fsck --repair moves a corrupt blob away and a second fsck exits 0" {
	h=$(put_hash b.bin)
	good=$(put_hash a.txt)
	corrupt_byte "$(blob_path "$h")"
	run --separate-stderr "$KILN" fsck --repair --store "$S"
	[ "$status" -eq 1 ] || { echo "status $status"; false; }
	[[ $output == *corrupt*"$h"*repaired* ]] || { echo "output: $output"; false; }
	[[ $output == *"1 repaired"* ]]
	[ ! -e "$(blob_path "$h")" ]
	[ -n "$(find "$S/corrupt" -type f)" ]
	run --separate-stderr "$KILN" fsck --store "$S"
	[ "$status" -eq 0 ] || { echo "second fsck: status $status: $output"; false; }
	run "$KILN" cat --store "$S" "$h"
	[ "$status" -eq 1 ]
	"$KILN" cat --store "$S" "$good" | cmp - a.txt
}

@test "fsck on a folder with no store exits 2 and creates nothing" {
	run --separate-stderr "$KILN" fsck --store "$S"
	[ "$status" -eq 2 ]
	[[ $stderr == *"$S"* ]]
	[ ! -e "$S" ]
}

# ---- gc ---------------------------------------------------------------

@test "gc --dry-run removes nothing" {
	ha=$(put_hash a.txt)
	hb=$(put_hash b.bin)
	before=$(snapshot "$S/objects")
	run --separate-stderr "$KILN" gc --dry-run --grace 0 --store "$S"
	[ "$status" -eq 0 ] || { echo "status $status: $stderr"; false; }
	[[ $output == *"would remove 2 of 2 blobs"* ]] || { echo "output: $output"; false; }
	[[ $output == *"would remove $ha "* && $output == *"would remove $hb "* ]] || { echo "output: $output"; false; }
	diff <(echo "$before") <(snapshot "$S/objects")
	"$KILN" cat --store "$S" "$ha" | cmp - a.txt
	"$KILN" cat --store "$S" "$hb" | cmp - b.bin
}

@test "gc --grace 0 removes unrooted blobs put by the CLI" {
	ha=$(put_hash a.txt)
	hb=$(put_hash b.bin)
	run --separate-stderr "$KILN" gc --grace 0 --store "$S"
	[ "$status" -eq 0 ] || { echo "status $status: $stderr"; false; }
	[[ $output == *"removed 2 of 2 blobs"* ]] || { echo "output: $output"; false; }
	[[ $output == *"removed $ha "* && $output == *"removed $hb "* ]] || { echo "output: $output"; false; }
	[ ! -e "$(blob_path "$ha")" ]
	[ ! -e "$(blob_path "$hb")" ]
	run "$KILN" cat --store "$S" "$hb"
	[ "$status" -eq 1 ]
	run "$KILN" fsck --store "$S"
	[ "$status" -eq 0 ]
}

@test "gc keeps blobs put within the default 5 minute grace" {
	h=$(put_hash b.bin)
	run --separate-stderr "$KILN" gc --store "$S"
	[ "$status" -eq 0 ] || { echo "status $status: $stderr"; false; }
	[[ $output == *"removed 0 of 1 blob ("* ]] || { echo "output: $output"; false; }
	"$KILN" cat --store "$S" "$h" | cmp - b.bin
}

@test "gc accepts sizes with K M G T suffixes and durations with s m h d" {
	put_hash a.txt >/dev/null
	for size in 0 4096 512M 512m 10G 1T 2KiB 3kb 7B; do
		run --separate-stderr "$KILN" gc --dry-run --max-size "$size" --store "$S"
		[ "$status" -eq 0 ] || { echo "--max-size $size: status $status: $stderr"; false; }
		[[ $output == *"would remove"* ]] || { echo "--max-size $size: $output"; false; }
	done
	for dur in 0 90 10s 5m 12h 30d; do
		run --separate-stderr "$KILN" gc --dry-run --max-age "$dur" --grace "$dur" --store "$S"
		[ "$status" -eq 0 ] || { echo "duration $dur: status $status: $stderr"; false; }
		[[ $output == *"would remove"* ]] || { echo "duration $dur: $output"; false; }
	done
}

@test "gc --max-size reads K as 1024 bytes and stops once the blobs fit" {
	put_hash a.txt >/dev/null  # 12 bytes
	put_hash b.bin >/dev/null  # 300000 bytes: 300012 in all
	for fits in 300012 293K 293k 293KiB 1M 1G; do
		run --separate-stderr "$KILN" gc --dry-run --grace 0 --max-size "$fits" --store "$S"
		[ "$status" -eq 0 ]
		[[ $output == *"would remove 0 of 2 blobs"* ]] || { echo "--max-size $fits: $output"; false; }
	done
	for over in 300011 292K 1000; do
		run --separate-stderr "$KILN" gc --dry-run --grace 0 --max-size "$over" --store "$S"
		[ "$status" -eq 0 ]
		[[ $output == *"would remove "[12]" of 2 blobs"* ]] || { echo "--max-size $over: $output"; false; }
	done
}

@test "gc with a malformed size or duration exits 2 and removes nothing" {
	h=$(put_hash a.txt)
	for args in "--max-size 10X" "--max-size -1" "--max-size 1.5G" "--max-size G" \
		"--max-size 99999999999T" "--grace 5y" "--grace -5m" "--max-age 1dd" "--max-age="; do
		run --separate-stderr "$KILN" gc --grace 0 $args --store "$S"
		[ "$status" -eq 2 ] || { echo "$args: status $status"; false; }
		[[ $stderr == *"usage: kiln gc"* ]] || { echo "$args: $stderr"; false; }
	done
	[ -f "$(blob_path "$h")" ]
}

@test "gc on a folder with no store exits 2 and creates nothing" {
	run --separate-stderr "$KILN" gc --store "$S"
	[ "$status" -eq 2 ]
	[ ! -e "$S" ]
}

# ---- folders that are not (usable) stores ------------------------------

@test "a folder that is not a store is refused with exit 2 and left unchanged" {
	mkdir "$S"
	echo "precious" >"$S/notes.txt"
	mkdir "$S/objects"
	before=$(snapshot "$S")
	h=$(xxh128sum a.txt | cut -d' ' -f1)
	for cmd in "put a.txt" "cat $h" "fsck" "fsck --repair" "gc --grace 0"; do
		run --separate-stderr "$KILN" $cmd --store "$S"
		[ "$status" -eq 2 ] || { echo "$cmd: status $status"; false; }
		[[ $stderr == *"$S"*"not a kiln store"* ]] || { echo "$cmd: $stderr"; false; }
		[ -z "$output" ]
	done
	diff <(echo "$before") <(snapshot "$S")
}

@test "an empty folder is no store for cat, fsck and gc: exit 2, still empty" {
	mkdir "$S"
	h=$(xxh128sum a.txt | cut -d' ' -f1)
	for cmd in "cat $h" "fsck" "fsck --repair" "gc --grace 0"; do
		run --separate-stderr "$KILN" $cmd --store "$S"
		[ "$status" -eq 2 ] || { echo "$cmd: status $status"; false; }
		[[ $stderr == *"$S"*"no kiln store"* ]] || { echo "$cmd: $stderr"; false; }
	done
	[ -z "$(ls -A "$S")" ]
}

@test "a file given as --store is refused with exit 2 and left unchanged" {
	cp a.txt precious
	for cmd in "put b.bin" "fsck" "gc"; do
		run --separate-stderr "$KILN" $cmd --store precious
		[ "$status" -eq 2 ] || { echo "$cmd: status $status"; false; }
		[[ $stderr == *"precious: not a kiln store"* ]] || { echo "$cmd: $stderr"; false; }
	done
	cmp a.txt precious
}

@test "a store of a newer version is refused with exit 2 and left unchanged" {
	h=$(put_hash a.txt)
	chmod u+w "$S/kiln-store" 2>/dev/null || true
	echo "kiln-store 999" >"$S/kiln-store"
	before=$(snapshot "$S")
	for cmd in "put b.bin" "cat $h" "fsck" "fsck --repair" "gc --grace 0"; do
		run --separate-stderr "$KILN" $cmd --store "$S"
		[ "$status" -eq 2 ] || { echo "$cmd: status $status"; false; }
		[[ $stderr == *"$S"*"newer version"* ]] || { echo "$cmd: $stderr"; false; }
		[ -z "$output" ]
	done
	diff <(echo "$before") <(snapshot "$S")
}

# ---- finding the store ------------------------------------------------

@test "without --store, put uses <project>/.kiln/store of the nearest kiln.yaml upward" {
	mkdir -p proj/levels/forest
	: >proj/kiln.yaml
	cp b.bin proj/levels/forest/
	cd proj/levels/forest
	run --separate-stderr "$KILN" put b.bin
	[ "$status" -eq 0 ] || { echo "status $status: $stderr"; false; }
	h=${output%% *}
	cd "$BATS_TEST_TMPDIR"
	[ -f proj/.kiln/store/kiln-store ]
	[ -f "proj/.kiln/store/objects/${h:0:2}/${h:2}" ]
	[ ! -e proj/levels/forest/.kiln ]
	[ ! -e proj/levels/.kiln ]
	cd proj/levels
	"$KILN" cat "$h" | cmp - "$BATS_TEST_TMPDIR/b.bin"
}

@test "without --store or kiln.yaml, put uses ./.kiln/store" {
	mkdir loose
	cd loose
	h=$("$KILN" put ../a.txt | cut -d' ' -f1)
	[ -f ".kiln/store/objects/${h:0:2}/${h:2}" ]
}

@test "--store before the command applies to it" {
	run --separate-stderr "$KILN" --store "$S" put a.txt
	[ "$status" -eq 0 ]
	[ "$output" = "$(xxh128sum a.txt)" ]
	"$KILN" --store "$S" cat "${output%% *}" | cmp - a.txt
}

# ---- usage ------------------------------------------------------------

@test "--help and -h on kiln and each command print usage and exit 0" {
	for cmd in "" put cat fsck gc; do
		for opt in --help -h; do
			run --separate-stderr "$KILN" $cmd $opt
			[ "$status" -eq 0 ] || { echo "kiln $cmd $opt: status $status"; false; }
			[[ $output == *"usage: kiln $cmd"* ]] || { echo "kiln $cmd $opt: $output"; false; }
			[[ $output == *"examples:"* ]]
			[ -z "$stderr" ]
		done
	done
	run "$KILN" help gc
	[ "$status" -eq 0 ]
	[[ $output == *"--max-size SIZE"* ]]
}

@test "--version prints kiln 0.1.0" {
	run --separate-stderr "$KILN" --version
	[ "$status" -eq 0 ]
	[ "$output" = "kiln 0.1.0" ]
}

@test "an unknown command exits 2 with usage on stderr" {
	run --separate-stderr "$KILN" frobnicate
	[ "$status" -eq 2 ]
	[ -z "$output" ]
	[[ $stderr == *"unknown command 'frobnicate'"* ]]
	[[ $stderr == *"usage: kiln"* ]]
}

@test "kiln without a command exits 2 with usage on stderr" {
	run --separate-stderr "$KILN"
	[ "$status" -eq 2 ]
	[ -z "$output" ]
	[[ $stderr == *"usage: kiln"* ]]
}

@test "an unknown option exits 2 with usage on stderr and touches nothing" {
	for cmd in "" put cat fsck gc; do
		run --separate-stderr "$KILN" $cmd --bogus a.txt
		[ "$status" -eq 2 ] || { echo "kiln $cmd --bogus: status $status"; false; }
		[[ $stderr == *"unknown option '--bogus'"* ]] || { echo "kiln $cmd: $stderr"; false; }
		[[ $stderr == *usage:* ]]
		[ -z "$output" ]
	done
	run --separate-stderr "$KILN" gc -x
	[ "$status" -eq 2 ]
	[[ $stderr == *"unknown option '-x'"* ]]
	run --separate-stderr "$KILN" put --store
	[ "$status" -eq 2 ]
	[[ $stderr == *"'--store' needs a value"* ]]
	run --separate-stderr "$KILN" fsck --repair=yes
	[ "$status" -eq 2 ]
	[[ $stderr == *"'--repair' takes no value"* ]]
	run --separate-stderr "$KILN" gc --dry-run=no -xn
	[ "$status" -eq 2 ]
	[[ $stderr == *"'--dry-run' takes no value"* ]]
	run --separate-stderr "$KILN" gc --dry-run -xn
	[ "$status" -eq 2 ]
	[[ $stderr == *"unknown option '-x'"* ]] || { echo "$stderr"; false; }
	[ ! -e .kiln ]
}

@test "extra arguments to cat, fsck and gc exit 2" {
	run "$KILN" cat --store "$S" aa bb
	[ "$status" -eq 2 ]
	run "$KILN" fsck --store "$S" extra
	[ "$status" -eq 2 ]
	run "$KILN" gc --store "$S" extra
	[ "$status" -eq 2 ]
	[ ! -e "$S" ]
}
