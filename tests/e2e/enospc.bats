#!/usr/bin/env bats
# A full disk under a build (issue 21): a project on a small tmpfs of its
# own, filled with a filler file, builds steps whose outputs are empty (so
# the tools and the store's blobs need no space) while their records
# outgrow the disk. Every commit of records then fails: the build must
# fail and say why, and once space is freed the next build must redo what
# was not recorded and leave a sound store and build/. Needs root (mount).

bats_require_minimum_version 1.5.0

load daemon_helpers

NSTEPS=300

# the helpers' setup and teardown, wrapped: the project lives on the tmpfs
eval "helpers_$(declare -f setup)"
eval "helpers_$(declare -f teardown)"

setup() {
	helpers_setup || return 1
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a tmpfs"
	FS=$BATS_TEST_TMPDIR/fs
	mkdir -p "$FS"
	mount -t tmpfs -o size=8m tmpfs "$FS" || skip "cannot mount a tmpfs here"
	mkdir "$FS/p"
	cd "$FS/p" || return 1
	P=$(pwd -P)
}

teardown() {
	local rv=0
	if [ -n "${FS:-}" ] && mountpoint -q "$FS"; then
		helpers_teardown || rv=1
		cd "$BATS_TEST_TMPDIR" || true
		umount "$FS" || umount -l "$FS"
	else
		helpers_teardown || rv=1
	fi
	return $rv
}

# One step per source: an empty output, made only from a non-empty source
# (a tool that misread its input fails).
write_project() {
	mkdir -p src
	printf 'source 1\n' >src/s1.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  mark: { run: [sh, -c, 'test -s "$0" && : > "$1"', "${in}", "${out}"] }
rules:
  - match: "src/*.txt"
    url: "mark/${match.name}.txt"
    tool: mark
YAML
}

# fill_disk KIB: leave about KIB KiB free on the tmpfs
fill_disk() {
	local avail
	avail=$(df --output=avail -k "$FS" | tail -n 1)
	dd if=/dev/zero of="$FS/filler" bs=1k count=$((avail - $1)) 2>/dev/null || true
}

# build: kiln build --json; RAN the sorted URLs of the steps that ran
build() {
	run --separate-stderr "$KILN" build --json
	RAN=$(printf '%s\n' "$output" | grep '"event":"step"' | grep '"result":"ran"' |
	      sed 's/.*"url":"\([^"]*\)".*/\1/' | sort)
}

# Every step's output is in build/ and in the index map with its hash, and
# the store is sound.
check_outputs() {
	local n=0 url h size file
	for i in $(seq 1 "$NSTEPS"); do
		[ -f "build/default/mark/s$i.txt" ] && [ ! -s "build/default/mark/s$i.txt" ] ||
			{ echo "build/default/mark/s$i.txt missing or not empty"; return 1; }
	done
	while IFS=$'\t' read -r url h size file; do
		case $url in "kiln-index "*) continue ;; esac
		[ "$(xxh128sum "build/default/$file" | cut -d' ' -f1)" = "$h" ] ||
			{ echo "index: $url has $h, build/default/$file differs"; return 1; }
		n=$((n + 1))
	done <build/default/kiln-index.txt
	[ "$n" -eq "$NSTEPS" ] ||
		{ echo "the index map lists $n outputs, not $NSTEPS"; cat build/default/kiln-index.txt; return 1; }
	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "kiln fsck: status $status"; echo "$output"; return 1; }
}

@test "records that cannot be committed on a full disk fail the build with why; the next build redoes them" {
	write_project
	"$KILN" build >/dev/null   # the store and the daemon, with room
	for i in $(seq 2 "$NSTEPS"); do printf 'source %d\n' "$i" >"src/s$i.txt"; done
	fill_disk 100

	build
	[ "$status" -eq 1 ] || { echo "a build whose records were lost exited $status"; echo "$output"; echo "$stderr"; false; }
	printf '%s\n' "$output" | tail -n 1 | grep -q '"error":"the results of [0-9]* steps\? could not be recorded (committing build records: no space left on device)' ||
		{ echo "the summary does not say why:"; printf '%s\n' "$output" | tail -n 1; false; }
	grep -q 'committing build records: no space left on device' .kiln/kilnd.log ||
		{ echo "kilnd.log:"; cat .kiln/kilnd.log; false; }
	[ "$(printf '%s\n' "$RAN" | grep -c .)" -eq $((NSTEPS - 1)) ] ||
		{ echo "ran: $RAN"; false; }
	RAN1=$RAN

	rm -f "$FS/filler"
	# past the 30 ms in which a fresh output's stat is not trusted: the
	# warm daemon's fast path would take a step it remembers for up to date
	sleep 0.1

	# the same warm daemon: what was not recorded runs again
	build
	[ "$status" -eq 0 ] || { echo "status $status after freeing space"; echo "$output"; echo "$stderr"; false; }
	[ -n "$RAN" ] || { echo "nothing ran again: lost results taken for up to date"; false; }
	extra=$(comm -13 <(printf '%s\n' "$RAN1") <(printf '%s\n' "$RAN"))
	[ -z "$extra" ] || { echo "ran again without having run before: $extra"; false; }
	build
	[ "$status" -eq 0 ] && [ -z "$RAN" ] || { echo "a third build: status $status, ran: $RAN"; false; }
	# everything is recorded now: a cold daemon runs nothing either
	"$KILN" stop >/dev/null
	build
	[ "$status" -eq 0 ] && [ -z "$RAN" ] ||
		{ echo "after a restart: status $status, ran: $RAN (results the warm daemon never recorded)"; false; }
	check_outputs
}

@test "a plain kiln build names the lost results on stderr and exits 1" {
	write_project
	"$KILN" build >/dev/null
	for i in $(seq 2 "$NSTEPS"); do printf 'source %d\n' "$i" >"src/s$i.txt"; done
	fill_disk 100
	run --separate-stderr "$KILN" build
	[ "$status" -eq 1 ] || { echo "status $status"; echo "$output"; echo "$stderr"; false; }
	[[ "$stderr" == *"could not be recorded (committing build records: no space left on device); the next build runs them again"* ]] ||
		{ echo "stderr: $stderr"; false; }
	rm -f "$FS/filler"
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "status $status after freeing space"; echo "$output"; false; }
	check_outputs
}

@test "a cold daemon after lost records redoes them too" {
	write_project
	"$KILN" build >/dev/null
	for i in $(seq 2 "$NSTEPS"); do printf 'source %d\n' "$i" >"src/s$i.txt"; done
	fill_disk 100
	build
	[ "$status" -eq 1 ] || { echo "status $status"; false; }
	"$KILN" stop >/dev/null
	rm -f "$FS/filler"
	build
	[ "$status" -eq 0 ] && [ -n "$RAN" ] || { echo "status $status, ran: $RAN"; echo "$stderr"; false; }
	check_outputs
}
