#!/usr/bin/env bats
# The sample game project (assets-sample/, README "Quick start") built by
# the kiln under test with its real tools: ImageMagick, optipng,
# glslangValidator, oggenc and the sample's own C tools (atlas, levelc,
# loader; `make sample-tools`); its bundles are kiln's built-in ones. Every case builds a copy of the
# project in its own folder, never the repository's; the last one runs
# `make demo` in a fresh clone of this repository's HEAD.

bats_require_minimum_version 1.5.0

load daemon_helpers

setup_file() {
	make -C "$KILN_TOP" --no-print-directory sample-tools >/dev/null
}

setup() {
	[ -x "${KILN:-}" ] || { echo "KILN='${KILN:-}' is not an executable" >&2; return 1; }
	[ -x "${KILND:-}" ] || { echo "KILND='${KILND:-}' is not an executable" >&2; return 1; }
	for t in convert optipng glslangValidator oggenc; do
		command -v $t >/dev/null || skip "$t is not installed (scripts/ensure-deps demo)"
	done
	mkdir -p "$BATS_TEST_TMPDIR/p"
	tar -C "$KILN_TOP/assets-sample" --exclude=./build --exclude=./.kiln -cf - . |
		tar -C "$BATS_TEST_TMPDIR/p" -xf -
	cd "$BATS_TEST_TMPDIR/p"
	P=$(pwd -P)
	L="$P/tools/bin/loader"
}

# build_all [ARGS...]: build every asset, --json, into $output.
build_all() {
	run "$KILN" build --json "$@"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
}

# ran: the sorted URLs of the steps that ran, from --json output.
ran() {
	printf '%s\n' "$output" | grep '"event":"step"' | grep '"result":"ran"' |
		sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//'
}

# summary_field NAME: that figure of the build's final JSON line.
summary_field() {
	json_field "$1" "$(printf '%s\n' "$output" | grep '"event":"build"')"
}

@test "the sample builds; the loader validates every entry of every bundle" {
	build_all -p pc
	[ "$(summary_field failed)" = 0 ]
	n=0
	for b in build/pc/bundles/*.kpak; do
		run "$L" "$b" build/pc/kiln-index.txt
		[ "$status" -eq 0 ] || { echo "$output"; false; }
		[[ "$output" == *"every entry matches its hash and the index"* ]]
		# one "ok" line per entry the generated header names, plus the
		# bundle file itself
		entries=$(grep -c '^#define KPAK_.*0x' "${b%.kpak}.h")
		[ "$(printf '%s\n' "$output" | grep -c ' ok$')" -eq $((entries + 1)) ]
		n=$((n + 1))
	done
	[ "$n" -eq 2 ]
	# real content: an atlas PNG with its frame table, SPIR-V, Ogg Vorbis
	[ "$(head -c 8 build/pc/ui/atlas.png | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ]
	grep -q '"star": { "x": ' build/pc/ui/atlas.json
	[ "$(od -An -tx4 -N4 build/pc/shaders/sprite.frag.spv | tr -d ' ')" = 07230203 ]
	[ "$(head -c 4 build/pc/sounds/jump.ogg)" = OggS ]
	head -c 35 build/pc/sounds/jump.ogg | grep -q vorbis
}

@test "kiln's reader (client/kpak.h) reads every bundle the sample builds, byte for byte against the index map" {
	build_all -p pc
	C="$(dirname "$KILN")/tools/kpak-check"
	[ -x "$C" ] || { echo "no $C (make $C)"; false; }
	n=0
	for b in build/pc/bundles/*.kpak; do
		run "$C" "$b" build/pc/kiln-index.txt
		[ "$status" -eq 0 ] || { echo "$output"; false; }
		[[ "$output" == *"every entry matches the index map byte for byte"* ]] || { echo "$output"; false; }
		n=$((n + 1))
	done
	[ "$n" -eq 2 ]
	# level1 is compressed (its manifest says so) and preload is not
	run "$C" build/pc/bundles/level1.kpak build/pc/kiln-index.txt
	[[ "$output" == *" zstd "* ]] || { echo "$output"; false; }
	grep -q '"compress": "zstd"' build/pc/bundles/level1.json
	[ ! -e build/pc/bundles/preload.json ]
}

@test "the loader refuses a bundle whose entry or index line does not match" {
	build_all -p pc
	cp build/pc/bundles/preload.kpak bad.kpak
	# flip the last byte: the last entry's data
	size=$(wc -c <bad.kpak)
	last=$(tail -c 1 bad.kpak | od -An -tu1 | tr -d ' ')
	printf "$(printf '\\%03o' $(((last + 1) % 256)))" |
		dd of=bad.kpak bs=1 seek=$((size - 1)) conv=notrunc status=none
	run "$L" bad.kpak build/pc/kiln-index.txt
	[ "$status" -eq 1 ]
	[[ "$output" == *"[bundle says "* ]] || { echo "$output"; false; }
	# an index whose hash of one entry differs
	sed 's/^\(shaders\/sprite.vert\t\)[0-9a-f]*/\100000000000000000000000000000000/' \
		build/pc/kiln-index.txt >bad-index.txt
	run "$L" build/pc/bundles/preload.kpak bad-index.txt
	[ "$status" -eq 1 ]
	[[ "$output" == *"shaders/sprite.vert.spv"*"[index says 00000000000000000000000000000000"* ]] || { echo "$output"; false; }
	# a truncated bundle
	head -c 100 build/pc/bundles/preload.kpak >short.kpak
	run "$L" short.kpak build/pc/kiln-index.txt
	[ "$status" -eq 1 ]
}

@test "a second build of the sample runs no tool" {
	build_all -p pc
	[ "$(summary_field ran)" -gt 20 ]
	build_all -p pc
	[ "$(ran)" = "" ] || { echo "ran: $(ran)"; false; }
	[ "$(summary_field ran)" = 0 ]
	[ "$(summary_field reused)" = "$(summary_field total)" ]
}

@test "editing one UI sprite reruns only its resize, optimize, atlas and bundle steps" {
	build_all -p pc
	before=$(xxh128sum build/pc/ui/atlas.png | cut -d' ' -f1)
	convert art/ui/star.png -fill '#1e88e5' -draw 'circle 32,34 32,26' -strip \
		-define png:exclude-chunks=date,time art/ui/star.png
	build_all -p pc
	[ "$(ran)" = "bundles/preload sized/ui/star ui/atlas ui/sprites/star" ] ||
		{ echo "ran: $(ran)"; false; }
	[ "$(xxh128sum build/pc/ui/atlas.png | cut -d' ' -f1)" != "$before" ]
	run "$L" build/pc/bundles/preload.kpak build/pc/kiln-index.txt
	[ "$status" -eq 0 ] || { echo "$output"; false; }
}

# trace_urls: the sorted URLs of the step slices of `kiln trace`, read
# with python3's json module.
trace_urls() {
	"$KILN" trace | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(sorted(e["args"]["url"] for e in d["traceEvents"]
                      if e["ph"] == "X" and e.get("cat") == "step")))'
}

@test "the sample's trace has one slice per step that ran (kiln trace)" {
	build_all -p pc
	[ "$(trace_urls)" = "$(ran)" ] || { echo "trace: $(trace_urls)"; echo "ran: $(ran)"; false; }
	[ "$(summary_field ran)" -gt 20 ]
	convert art/ui/star.png -fill '#1e88e5' -draw 'circle 32,34 32,26' -strip \
		-define png:exclude-chunks=date,time art/ui/star.png
	build_all -p pc
	[ "$(trace_urls)" = "bundles/preload sized/ui/star ui/atlas ui/sprites/star" ] ||
		{ echo "trace: $(trace_urls)"; false; }
}

@test "the mobile profile makes smaller textures than pc from the same sources" {
	run "$KILN" build --json -p pc 'sprites/**' 'ui/**'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	run "$KILN" build --json -p mobile 'sprites/**' 'ui/**'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	for f in sprites/hero.png sprites/coin.png sprites/crate.png sprites/tree.png \
	         ui/sprites/panel.png ui/atlas.png; do
		read -r pw ph < <(identify -format '%w %h\n' "build/pc/$f")
		read -r mw mh < <(identify -format '%w %h\n' "build/mobile/$f")
		ps=$(wc -c <"build/pc/$f")
		ms=$(wc -c <"build/mobile/$f")
		echo "$f: pc ${pw}x${ph} $ps bytes, mobile ${mw}x${mh} $ms bytes"
		[ "$mw" -lt "$pw" ] && [ "$mh" -lt "$ph" ]
		[ "$ms" -lt "$ps" ]
	done
	# the sources: 256x256 sprites; pc halves them, mobile quarters them
	[ "$(identify -format '%w' build/pc/sprites/hero.png)" = 128 ]
	[ "$(identify -format '%w' build/mobile/sprites/hero.png)" = 64 ]
}

# fake_kiln: a stand-in for "$KILN need URL [--output NAME]" that answers
# from build/pc/kiln-index.txt and logs each call to need.log.
fake_kiln() {
	cat >fake-kiln <<'SH'
#!/bin/sh
echo "$*" >>need.log
[ "$1" = need ] || exit 2
url=$2
[ "${3:-}" = --output ] && url="$url#$4"
file=$(awk -F'\t' -v u="$url" '$1 == u { print $4 }' build/pc/kiln-index.txt)
[ -n "$file" ] || { echo "kiln need: no asset '$url'" >&2; exit 1; }
echo "build/pc/$file"
SH
	chmod +x fake-kiln
}

@test "levelc asks kiln for each texture by argv and records its hash and size (fake KILN)" {
	run "$KILN" build --json -p pc 'sprites/**' ui/atlas
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	fake_kiln
	cat >lvl.yaml <<'YAML'
level: test
size: [4, 4]
entities:
  - { type: a, texture: sprites/hero, x: 0, y: 0 }
  - { type: b, texture: "ui/atlas#image", x: 1, y: 2 }
  - { type: c, texture: sprites/hero, x: 3, y: 3 }
  - { type: "with \"quotes\"; $(rm -rf /)", texture: sprites/coin, x: 2, y: 1 }
YAML
	KILN="$P/fake-kiln" run tools/bin/levelc -o lvl.json lvl.yaml
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# one call per distinct texture, in order of first use, by argv
	[ "$(cat need.log)" = "$(printf 'need sprites/hero\nneed ui/atlas --output image\nneed sprites/coin')" ]
	for pair in sprites/hero:sprites/hero.png ui/atlas#image:ui/atlas.png sprites/coin:sprites/coin.png; do
		url=${pair%%:*} f=build/pc/${pair#*:}
		h=$(xxh128sum "$f" | cut -d' ' -f1)
		grep -F "{ \"url\": \"$url\", \"xxh128\": \"$h\", \"size\": $(wc -c <"$f")," lvl.json
	done
	grep -F '"texture": 0, "x": 3, "y": 3' lvl.json
	grep -F '"type": "with \"quotes\"; $(rm -rf /)", "texture": 2' lvl.json
	# kiln refusing a texture fails the level
	sed -i 's|sprites/coin|sprites/nothing|' lvl.yaml
	KILN="$P/fake-kiln" run tools/bin/levelc -o lvl2.json lvl.yaml
	[ "$status" -ne 0 ]
	[[ "$output" == *"kiln need sprites/nothing failed"* ]]
	# a texture that kiln need would take for an option is refused
	sed -i 's|sprites/nothing|--help|' lvl.yaml
	rm -f need.log
	KILN="$P/fake-kiln" run tools/bin/levelc -o lvl2.json lvl.yaml
	[ "$status" -ne 0 ]
	[[ "$output" == *"'--help' is not a URL"* ]]
	[ ! -e need.log ]
	# outside kiln (no KILN), levelc says what it needs
	run env -u KILN tools/bin/levelc -o lvl3.json levels/level1.yaml
	[ "$status" -ne 0 ]
	[[ "$output" == *"KILN is not set"* ]]
}

@test "the level step gets its textures from kiln need while it runs" {
	run "$KILN" build --json -p pc levels/level1
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# nothing declared the sprites: levelc's kiln need built them
	[[ "$(ran)" == *"sprites/hero"* ]] || { echo "ran: $(ran)"; false; }
	for s in hero coin crate tree; do
		h=$(xxh128sum build/pc/sprites/$s.png | cut -d' ' -f1)
		grep -F "{ \"url\": \"sprites/$s\", \"xxh128\": \"$h\"," build/pc/levels/level1.json
	done
	build_all -p pc
	run "$L" build/pc/bundles/level1.kpak build/pc/kiln-index.txt
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# a texture the level asked for changes: the level is compiled again
	convert art/sprites/coin.png -fill black -draw 'rectangle 100,100 156,156' -strip \
		-define png:exclude-chunks=date,time art/sprites/coin.png
	build_all -p pc
	[ "$(ran)" = "bundles/level1 levels/level1 sized/sprites/coin sprites/coin" ] ||
		{ echo "ran: $(ran)"; false; }
	h=$(xxh128sum build/pc/sprites/coin.png | cut -d' ' -f1)
	grep -F "{ \"url\": \"sprites/coin\", \"xxh128\": \"$h\"," build/pc/levels/level1.json
}

@test "make demo succeeds in a fresh clone of this repository's HEAD" {
	command -v git >/dev/null || skip "git is not installed"
	head=$(git -C "$KILN_TOP" rev-parse HEAD)
	git clone -q --no-checkout "$KILN_TOP" "$BATS_TEST_TMPDIR/clone"
	cd "$BATS_TEST_TMPDIR/clone"
	git checkout -q "$head"
	# the clone's own kiln and kilnd, not the ones under test
	run env -u KILN -u KILND make -j2 --no-print-directory demo
	if [ -f assets-sample/.kiln/kilnd.pid ]; then
		kill "$(cat assets-sample/.kiln/kilnd.pid)" 2>/dev/null || true
	fi
	cd "$P"
	[ "$status" -eq 0 ] || { printf '%s\n' "$output" | tail -n 60; false; }
	[[ "$output" == *"every entry matches its hash and the index"* ]]
	[[ "$output" == *"profile pc: "*", 0 ran, "* ]]
	[[ "$output" == *"-> no tool ran"* ]]
	[[ "$output" == *"stopped kilnd"* ]]
	[ ! -e "$BATS_TEST_TMPDIR/clone/assets-sample/.kiln/kilnd.sock" ]
}
