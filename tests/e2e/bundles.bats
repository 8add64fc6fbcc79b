#!/usr/bin/env bats
# Bundles built by kiln itself (issue 26; docs/bundles.md): each `bundles:`
# entry is the step bundles/<name> of the built-in tool kiln-bundle, packing
# its entries' outputs into build/<profile>/bundles/<name>.kpak with a C
# header of ids (and a JSON manifest on request). The file is read back with
# kiln's reader client/kpak.h (bin/<variant>/tools/kpak-check, which also
# compares every entry byte for byte with the index map's file) and, for the
# header fields, straight from the bytes as docs/bundles.md lays them out.

bats_require_minimum_version 1.5.0

load daemon_helpers

write_project() {
	mkdir -p src
	# a.txt compresses well; b.txt and the rest are a byte or two
	for _ in $(seq 1 100); do printf 'all work and no play '; done >src/a.txt
	printf 'b' >src/b.txt
	printf 'p' >src/p.txt
	printf 'u' >src/u.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  pair: { run: [sh, -c, 'cp "$2" "$0"; printf B > "$1"', "${out.a}", "${out.b}", "${in}"] }
rules:
  - { match: "src/{a,b}.txt", url: "c/${match.name}", outputs: "${match.name}.txt", tool: copy }
  - { match: "src/u.txt", url: "unrelated", outputs: "u.txt", tool: copy }
assets:
  - url: pair
    tool: pair
    inputs: [src/p.txt]
    outputs: { a: pair-a.txt, b: pair-b.txt }
bundles:
  plain: ["c/*"]
  packed:
    entries: ["c/a", "pair#b"]
    compress: zstd
    align: 64
    manifest: true
YAML
}

# build ARGS...: kiln build --json; RAN is the sorted URLs that ran.
build() {
	run --separate-stderr "$KILN" build --json "$@"
	RAN=$(printf '%s\n' "$output" | grep '"event":"step"' | grep '"result":"ran"' |
	      sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
	[ "$status" -eq 0 ] || { echo "build: status $status"; echo "$output"; echo "$stderr"; false; }
}

# check BUNDLE: kpak-check reads it and every entry matches the index map.
check() {
	local c
	c="$(dirname "$KILN")/tools/kpak-check"
	[ -x "$c" ] || { echo "no $c: make $c"; return 1; }
	run "$c" "build/default/bundles/$1.kpak" build/default/kiln-index.txt
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[[ "$output" == *"every entry matches the index map byte for byte"* ]] || { echo "$output"; return 1; }
}

# u32 FILE OFFSET / u64 FILE OFFSET: a little-endian integer of the file.
u32() { od -An -tu4 -j "$2" -N4 --endian=little "$1" | tr -d ' '; }
u64() { od -An -tu8 -j "$2" -N8 --endian=little "$1" | tr -d ' '; }

@test "a bundle is a kpak as docs/bundles.md lays it out, and client/kpak.h reads it back byte for byte against the index map" {
	write_project
	build
	f=build/default/bundles/packed.kpak
	# the header, from the bytes alone: magic, version 2, 2 entries,
	# alignment 64, file_size = the file's size
	[ "$(head -c 7 "$f")" = KILNPAK ]
	[ "$(u32 "$f" 8)" = 2 ]
	[ "$(u32 "$f" 12)" = 2 ]
	[ "$(u32 "$f" 16)" = 64 ]
	[ "$(u64 "$f" 24)" = "$(wc -c <"$f")" ]
	# each entry: id = XXH32 of its name, data at a multiple of 64, ids ascending
	prev=-1
	for i in 0 1; do
		rec=$((32 + 56 * i))
		id=$(u32 "$f" $rec)
		off=$(u64 "$f" $((rec + 16)))
		[ $((off % 64)) -eq 0 ] || { echo "entry $i at $off"; false; }
		[ "$id" -gt "$prev" ]
		prev=$id
	done
	[ "$(printf '%08x' "$(u32 "$f" 32)")" = "$(printf 'pair-b.txt' | xxhsum -H0 | cut -d' ' -f1)" ]
	check packed
	check plain
	# the header names each entry's id; the bundle is in the index map
	grep -q "^#define KPAK_PACKED_C_A_TXT  *0x$(printf 'c/a.txt' | xxhsum -H0 | cut -d' ' -f1)u" \
		build/default/bundles/packed.h
	grep -q '^#define KPAK_PACKED_NENTRIES 2u' build/default/bundles/packed.h
	grep -q "^bundles/packed#bundle	$(xxh128sum "$f" | cut -d' ' -f1)	" build/default/kiln-index.txt
	# listed by kiln ls as a step of the built-in tool
	run "$KILN" ls
	[[ "$output" == *"bundles/packed"$'\n'"  tool     kiln-bundle"* ]] || { echo "$output"; false; }
}

@test "compress: zstd stores an entry that shrinks compressed, the rest as they are; without it nothing is" {
	write_project
	build
	c="$(dirname "$KILN")/tools/kpak-check"
	run "$c" build/default/bundles/packed.kpak build/default/kiln-index.txt
	[[ "$output" == *" c/a.txt "*" zstd "* ]] || { echo "$output"; false; }
	[[ "$output" == *" pair-b.txt "*" raw "* ]] || { echo "$output"; false; }
	[[ "$output" == *"2 entries (1 zstd)"* ]] || { echo "$output"; false; }
	run "$c" build/default/bundles/plain.kpak build/default/kiln-index.txt
	[[ "$output" == *"2 entries (0 zstd)"* ]] || { echo "$output"; false; }
	# the stored size of c/a.txt is well under its 2100 bytes
	grep -q '"name": "c/a.txt", "url": "c/a", "offset": [0-9]*, "stored_size": [0-9][0-9]\?[0-9]\?, "size": 2100, "compression": "zstd"' \
		build/default/bundles/packed.json || { cat build/default/bundles/packed.json; false; }
	[ ! -e build/default/bundles/plain.json ]
}

@test "URL#name puts that one output of a multi-output step in the bundle" {
	write_project
	build
	grep -q 'PACKED_PAIR_B_TXT' build/default/bundles/packed.h
	[ "$(grep -c 'PAIR_A' build/default/bundles/packed.h)" -eq 0 ]
	run "$(dirname "$KILN")/tools/kpak-check" build/default/bundles/packed.kpak build/default/kiln-index.txt
	[[ "$output" == *"pair-b.txt"*"ok = pair#b"* ]] || { echo "$output"; false; }
	[[ "$output" != *"pair-a.txt"* ]] || { echo "$output"; false; }
}

@test "a bundle is rebuilt only when one of its entries' bytes or its options change" {
	write_project
	build
	build
	[ "$RAN" = "" ] || { echo "second build ran: $RAN"; false; }
	# an asset in no bundle
	printf 'U' >src/u.txt
	build
	[ "$RAN" = "unrelated" ] || { echo "ran: '$RAN', expected 'unrelated'"; false; }
	# an entry of plain only
	printf 'B' >src/b.txt
	build
	[ "$RAN" = "bundles/plain c/b" ] || { echo "ran: '$RAN', expected 'bundles/plain c/b'"; false; }
	check plain
	# pair's output a, which packed does not hold (it holds pair#b)
	printf 'P' >src/p.txt
	build
	[ "$RAN" = "pair" ] || { echo "ran: '$RAN', expected 'pair'"; false; }
	# an option of packed
	sed -i 's/align: 64/align: 128/' kiln.yaml
	build
	[ "$RAN" = "bundles/packed" ] || { echo "ran: '$RAN', expected 'bundles/packed'"; false; }
	[ "$(u32 build/default/bundles/packed.kpak 16)" = 128 ]
	check packed
}

@test "kiln build bundles/NAME builds that bundle and what it holds, nothing else" {
	write_project
	build bundles/packed
	[ "$RAN" = "bundles/packed c/a pair" ] || { echo "ran: '$RAN'"; false; }
	[ -f build/default/bundles/packed.kpak ]
	[ ! -e build/default/bundles/plain.kpak ]
	[ ! -e build/default/u.txt ]
}

@test "two entries with one id fail the bundle's step with a message naming both" {
	write_project
	# XXH32("c/k14020.txt") = XXH32("c/k187544.txt") = 0x0c11a54d
	[ "$(printf 'c/k14020.txt' | xxhsum -H0 | cut -d' ' -f1)" = \
	  "$(printf 'c/k187544.txt' | xxhsum -H0 | cut -d' ' -f1)" ]
	printf 1 >src/k14020.txt
	printf 2 >src/k187544.txt
	sed -i 's|match: "src/{a,b}.txt"|match: "src/{a,b,k14020,k187544}.txt"|' kiln.yaml
	run --separate-stderr "$KILN" build -k
	[ "$status" -ne 0 ]
	[[ "$output$stderr" == *"bundles/plain"*"entries 'c/k14020.txt' (c/k14020) and 'c/k187544.txt' (c/k187544) have the same id 0x0c11a54d"* ]] ||
		{ echo "$output"; echo "$stderr"; false; }
	# the other bundle was built (-k: keep going); this one was not
	[ -f build/default/bundles/packed.kpak ]
	[ ! -e build/default/bundles/plain.kpak ]
	run "$KILN" log bundles/plain
	[[ "$output" == *"same id 0x0c11a54d"* ]] || { echo "$output"; false; }
}

@test "two entries with one C name fail the step with a message naming both" {
	write_project
	printf 1 >src/x-y.txt
	printf 2 >src/x_y.txt
	sed -i 's|match: "src/{a,b}.txt"|match: "src/{a,b,x-y,x_y}.txt"|' kiln.yaml
	run --separate-stderr "$KILN" build bundles/plain
	[ "$status" -ne 0 ]
	[[ "$output$stderr" == *"entries 'c/x-y.txt' (c/x-y) and 'c/x_y.txt' (c/x_y) have the same C name KPAK_PLAIN_C_X_Y_TXT"* ]] ||
		{ echo "$output"; echo "$stderr"; false; }
}

# bad_bundle YAML EXPECTED...: with the bundles section replaced by YAML,
# kiln check fails and its errors hold each EXPECTED text.
bad_bundle() {
	local yaml=$1
	shift
	write_project
	sed -i '/^bundles:/,$d' kiln.yaml
	printf 'bundles:\n%s\n' "$yaml" >>kiln.yaml
	run --separate-stderr "$KILN" check -q
	[ "$status" -ne 0 ] || { echo "kiln check passed"; false; }
	for want in "$@"; do
		[[ "$stderr" == *"$want"* ]] || { echo "missing: $want"; echo "$stderr"; false; }
	done
}

@test "a bundle naming an unknown URL is an error naming file, line and field" {
	bad_bundle '  x: ["c/a", "c/nosuch"]' \
		"kiln.yaml:18:14: error: bundles.x[1]: bundle 'x' names unknown URL 'c/nosuch' in profile 'default'"
}

@test "bad bundle options are errors naming file, line and field" {
	bad_bundle '  x:
    entries: ["c/a"]
    compress: lz4
    align: 24
    manifest: maybe
    level: 3' \
		"kiln.yaml:20:15: error: bundles.x.compress: unknown compression 'lz4' (zstd or none)" \
		"kiln.yaml:21:12: error: bundles.x.align: alignment '24': a power of two from 1 to 65536" \
		"kiln.yaml:22:15: error: bundles.x.manifest: expected true or false" \
		"kiln.yaml:23:5: error: bundles.x: unknown key 'level'"
}

@test "URL#name naming no output of the step is an error" {
	bad_bundle '  x: ["pair#c"]' \
		"kiln.yaml:18:7: error: bundles.x[0]: bundle 'x': 'pair#c': step 'pair' has no output 'c' (its outputs: 'a', 'b')"
}

@test "a bundle whose URL an asset already builds is a load error" {
	write_project
	cat >>kiln.yaml <<'YAML'
  clash: ["c/a"]
YAML
	sed -i 's|^assets:|assets:\n  - { url: bundles/clash, tool: copy, inputs: [src/a.txt] }|' kiln.yaml
	run --separate-stderr "$KILN" check -q
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"bundle 'clash' builds URL 'bundles/clash', which the asset at kiln.yaml:"*" builds too"* ]] ||
		{ echo "$stderr"; false; }
}

@test "a folder output in a bundle is an error (a bundle's entry is one file)" {
	write_project
	sed -i '/^bundles:/,$d' kiln.yaml
	cat >>kiln.yaml <<'YAML'
  - { url: dir, tool: copy, inputs: [src/u.txt], outputs: { d: "d/" } }
bundles:
  x: ["c/a", "dir"]
YAML
	run --separate-stderr "$KILN" check -q
	[ "$status" -ne 0 ] || { echo "kiln check passed"; false; }
	[[ "$stderr" == *"bundles.x[1]: bundle 'x': 'dir': output 'd' of step 'dir' is a folder; a bundle takes files"* ]] ||
		{ echo "$stderr"; false; }
}

@test "an entry name holding a star and a slash cannot end the header's comment: the header compiles" {
	write_project
	sed -i '/^bundles:/,$d' kiln.yaml
	cat >>kiln.yaml <<'YAML'
  - { url: "c/x*/z", tool: copy, inputs: [src/u.txt], outputs: "y.txt" }
bundles:
  star: ["c/x*/z"]
YAML
	build bundles/star
	grep -q 'c/x\*\\/y.txt' build/default/bundles/star.h || { cat build/default/bundles/star.h; false; }
	gcc -fsyntax-only -x c build/default/bundles/star.h
}
