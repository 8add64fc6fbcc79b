#!/bin/sh
# bench/engine/restore_ab.sh RUNS PROJECT LABEL:BIN_DIR:MODE... — the time of
# a restore from the store (build/ removed, the warm daemon puts every
# output back without running a tool) of one generated project, for
# several kiln builds and materialize modes (copy, hardlink, or none: the
# line left out, for a kiln from before the setting), sides alternating,
# each run on a fresh no-journal ext4 in a loop file (as ab.sh, and for
# the same reason: ext4 makes a new inode walk past those freed in the
# last minutes, recently_deleted(), so runs on one file system slow down
# run by run). Per run: a full build (untimed); "now": rm -rf build, then
# at once kiln build (timed: what a user who just deleted build/ sees);
# "settled": rm -rf build; sync; sleep 6 (past ext4's 5 s window for
# clean inode blocks), then kiln build (timed). Prints one line a run:
#   LABEL NOW_MS SETTLED_MS copies|links LOAD1
# Needs root (mount) and mkfs.ext4. PROJECT comes from
#   bin/bench/bench_engine --kiln bin/kiln -n 10000 --gen-only DIR
# (use DIR/n10000-kiln). KILN_AB_IMG (default /tmp/kiln-restore-ab.img,
# 2 GiB) and KILN_AB_MNT (default /mnt/kiln-restore-ab) place it.
set -eu
if [ $# -lt 3 ]; then
	echo "usage: bench/engine/restore_ab.sh RUNS PROJECT LABEL:BIN_DIR:MODE..." >&2
	exit 2
fi
runs=$1 src=$2
shift 2
img=${KILN_AB_IMG:-/tmp/kiln-restore-ab.img}
mnt=${KILN_AB_MNT:-/mnt/kiln-restore-ab}
mkdir -p "$mnt"
truncate -s 2G "$img"
trap 'cd /; umount "$mnt" 2>/dev/null || true' EXIT
ms() { echo $((($2 - $1) / 1000000)); }
timed_build() {
	t0=$(date +%s%N)
	"$1/kiln" build -j2 >/dev/null
	t1=$(date +%s%N)
	ms "$t0" "$t1"
}
for r in $(seq "$runs"); do
	for v in "$@"; do
		label=${v%%:*} rest=${v#*:}
		b=${rest%%:*} mode=${rest#*:}
		umount "$mnt" 2>/dev/null || true
		mkfs.ext4 -q -F -O ^has_journal "$img"
		mount -o loop "$img" "$mnt"
		cp -r "$src" "$mnt/p"
		rm -rf "$mnt/p/.kiln" "$mnt/p/build"
		sed -i '/^materialize:/d' "$mnt/p/kiln.yaml"
		[ "$mode" = none ] ||
			sed -i "s/^sources: \[src\]$/&\nmaterialize: $mode/" "$mnt/p/kiln.yaml"
		sync
		cd "$mnt/p"
		"$b/kiln" build -j2 >/dev/null
		rm -rf build
		now=$(timed_build "$b")
		rm -rf build
		sync
		sleep 6
		settled=$(timed_build "$b")
		kind=links
		[ "$(stat -c %h build/default/cp/f00001)" != 1 ] || kind=copies
		"$b/kiln" stop >/dev/null 2>&1 || true
		cd /
		echo "$label $now $settled $kind $(cut -d' ' -f1 /proc/loadavg)"
	done
done
