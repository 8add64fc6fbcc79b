#!/bin/sh
# Build the nng kiln links: Debian 12's nng 1.5.2 (its source package, the
# upstream tarball plus Debian's own patches) with kiln's fix for the
# listener wedge (peer-closed-during-negotiation.patch, see its header) and
# for a reply lost to a closing connection (rep0-send-on-closed-pipe.patch),
# for TLS to a server named by its address (tls-ip-san.patch), and for a
# websocket upgrade refused by the listener's hook (ws-hook-refusal.patch),
# as a static library under OUT.
#
# Usage: third_party/nng/build.sh OUT
#   OUT/include/nng/*.h and OUT/lib/libnng.a on success.
# Environment:
#   KILN_NNG_SOURCES  a folder already holding the two source files below
#                     (for a machine without network); default: download
#                     them from DEBIAN_MIRROR into OUT/dl.
#   DEBIAN_MIRROR     default http://deb.debian.org/debian
#
# The downloads are checked against the SHA-256 sums of Debian's signed
# nng_1.5.2-2.dsc, so a mirror cannot hand us other code.
set -eu

out=${1:?usage: third_party/nng/build.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
pool="$mirror/pool/main/n/nng"

orig=nng_1.5.2.orig.tar.gz
orig_sha=f8b25ab86738864b1f2e3128e8badab581510fa8085ff5ca9bb980d317334c46
deb=nng_1.5.2-2.debian.tar.xz
deb_sha=ecf0bcd3b5645b95aa1f1f58519547bcfaaab81a863f88a59178d72fdfdffd72

mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/build.log"
: >"$log"

fail() {
	echo "third_party/nng/build.sh: $*" >&2
	exit 1
}

# fetch NAME SHA256: leaves a verified copy in $out/dl/NAME.
fetch() {
	name=$1 sha=$2 dest="$out/dl/$1"
	mkdir -p "$out/dl"
	if [ -n "${KILN_NNG_SOURCES:-}" ]; then
		cp "$KILN_NNG_SOURCES/$name" "$dest.part" ||
			fail "KILN_NNG_SOURCES=$KILN_NNG_SOURCES has no $name"
	elif [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then
		return 0
	elif command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 -o "$dest.part" "$pool/$name" ||
			fail "could not download $pool/$name (curl exit $?); put $orig and $deb in a folder and set KILN_NNG_SOURCES to it"
	elif [ -x /usr/lib/apt/apt-helper ]; then
		/usr/lib/apt/apt-helper download-file "$pool/$name" "$dest.part" >>"$log" 2>&1 ||
			fail "could not download $pool/$name (see $log); put $orig and $deb in a folder and set KILN_NNG_SOURCES to it"
	else
		fail "neither curl nor apt-helper to download $pool/$name"
	fi
	echo "$sha  $dest.part" | sha256sum -c --status ||
		fail "$name does not have the SHA-256 of Debian's nng_1.5.2-2.dsc ($sha)"
	mv "$dest.part" "$dest"
}

echo "nng: Debian's nng 1.5.2 with kiln's listener fix, into $out (log: $log)"
fetch "$orig" "$orig_sha"
fetch "$deb" "$deb_sha"

src="$out/src"
rm -rf "$src" "$out/build" "$out/include" "$out/lib"
mkdir -p "$src"
tar -xzf "$out/dl/$orig" -C "$src" --strip-components=1
tar -xJf "$out/dl/$deb" -C "$src"
# Debian's series, in its order (commented lines are patches Debian skips),
# then kiln's own.
for p in $(grep -v '^#' "$src/debian/patches/series"); do
	patch -d "$src" -p1 -s <"$src/debian/patches/$p" >>"$log" 2>&1 ||
		fail "Debian's patch $p does not apply (see $log)"
done
patch -d "$src" -p1 -s <"$here/peer-closed-during-negotiation.patch" >>"$log" 2>&1 ||
	fail "peer-closed-during-negotiation.patch does not apply (see $log)"
patch -d "$src" -p1 -s <"$here/rep0-send-on-closed-pipe.patch" >>"$log" 2>&1 ||
	fail "rep0-send-on-closed-pipe.patch does not apply (see $log)"
patch -d "$src" -p1 -s <"$here/tls-ip-san.patch" >>"$log" 2>&1 ||
	fail "tls-ip-san.patch does not apply (see $log)"
patch -d "$src" -p1 -s <"$here/ws-hook-refusal.patch" >>"$log" 2>&1 ||
	fail "ws-hook-refusal.patch does not apply (see $log)"

jobs=$(nproc 2>/dev/null || echo 2)
{
	cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release \
		-DBUILD_SHARED_LIBS=OFF -DNNG_ENABLE_TLS=ON -DNNG_TESTS=OFF \
		-DNNG_TOOLS=OFF -DNNG_ENABLE_NNGCAT=OFF \
		-DCMAKE_INSTALL_PREFIX="$out" -DCMAKE_INSTALL_LIBDIR=lib &&
		cmake --build "$out/build" -j "$jobs" &&
		cmake --install "$out/build"
} >>"$log" 2>&1 || fail "building nng failed; the last lines of $log:
$(tail -n 20 "$log")"
[ -f "$out/lib/libnng.a" ] || fail "no $out/lib/libnng.a after the build (see $log)"
rm -rf "$out/build" "$out/src"
echo "nng: built $out/lib/libnng.a"
