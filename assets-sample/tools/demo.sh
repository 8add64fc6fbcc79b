#!/bin/sh
# assets-sample/tools/demo.sh [BIN] — the main job of kiln on the sample
# project, as `make demo` runs it once kiln (BIN/kiln, default bin/) and the
# sample's C tools (make sample-tools) are built:
#
#   1. build every asset of profile pc (the daemon starts by itself)
#   2. say what ran and where the outputs are: assets-sample/build/pc/,
#      the bundles and their C headers, the index map
#   3. check both bundles with the sample's loader (every entry's hash
#      against its bytes and against the index map)
#   4. build again and show that nothing reruns
#   5. stop the daemon
#
# Exits non-zero when any of these fails.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
case ${1:-bin} in
/*) bin=$1 ;;
*) bin=$top/${1:-bin} ;;
esac
kiln=$bin/kiln
# the daemon kiln starts is the one built beside it, whatever the caller's
# environment names
KILND=$bin/kilnd
export KILND
P=assets-sample
B=$P/build/pc
loader=$P/tools/bin/loader
out=$(mktemp "${TMPDIR:-/tmp}/kiln-demo.XXXXXX")
trap 'rm -f "$out"' EXIT INT TERM

say() {
	if [ -t 1 ]; then
		printf '\n\033[1m== %s\033[0m\n' "$*"
	else
		printf '\n== %s\n' "$*"
	fi
}

# build LABEL: build the chosen targets, show its lines, fail loudly.
build() {
	say "$1"
	echo "\$ bin/kiln build -C $P -p pc${targets:+ $targets}"
	# shellcheck disable=SC2086 # targets are globs for kiln, not the shell
	set -f
	if ! "$kiln" build -C "$P" -p pc $targets >"$out" 2>&1; then
		set +f
		cat "$out"
		echo "make demo: the build failed (bin/kiln log -C $P URL shows a tool's output)" >&2
		exit 1
	fi
	set +f
	cat "$out"
}

targets=""
bundles="preload level1"

build "1. every asset of profile pc (first build: every step runs)"
ran=$(sed -n 's/^profile pc: [0-9]* steps, \([0-9]*\) ran.*/\1/p' "$out")

say "2. where the outputs are"
echo "$ran tools ran. Outputs (hard links into kiln's store) in $B/:"
awk -F'\t' 'NR > 1 { printf "  %-22s %7d bytes  %s\n", $1, $3, $4 }' "$B/kiln-index.txt"
echo "The index map (URL, XXH3-128, size, file) a game reads: $B/kiln-index.txt"
echo "Bundles (docs/bundles.md) and their generated C headers of entry ids:"
for b in $bundles; do
	printf '  %s/bundles/%s.kpak  %s bytes, %s entries\n' "$B" "$b" \
		"$(wc -c <"$B/bundles/$b.kpak")" \
		"$(grep -c '^#define KPAK_.*0x' "$B/bundles/$b.h")"
	grep '^#define KPAK_.*0x' "$B/bundles/$b.h" | sed -n '1,2s/^/      /p'
done

say "3. the loader checks every bundle entry against its bytes and the index"
for b in $bundles; do
	echo "\$ $loader $B/bundles/$b.kpak $B/kiln-index.txt"
	"$loader" "$B/bundles/$b.kpak" "$B/kiln-index.txt"
done

build "4. build again: nothing changed, so nothing runs"
if ! grep -q '^profile pc: [0-9]* steps, 0 ran,' "$out"; then
	echo "make demo: the second build ran tools; it should have run none" >&2
	exit 1
fi
echo "-> no tool ran: every step's inputs, tool and variables hash as before."

say "5. stop the daemon"
(cd "$P" && "$kiln" stop)
echo
echo "Done. Try: edit $P/art/ui/star.png, then bin/kiln build -C $P -p pc"
echo "(only its resize, optimize, atlas and bundle steps run), or -p mobile."
