#!/bin/sh
# bench/engine/ab.sh RUNS PROJECT BIN_DIR... — A/B the full build from clean
# of one generated project between kiln builds (each BIN_DIR holds kiln,
# kilnd and libkilntrace.so, copied out of bin/ so rebuilding does not
# change them mid-run), alternating, each run on a fresh ext4 file system
# (no journal, like this machine's root) in a loop file: ext4 makes every
# new inode walk past those freed in the last minutes (recently_deleted()),
# so back-to-back builds on one file system get slower run by run, and the
# order of the sides would decide the result. Prints per side the median
# wall time, the daemon's CPU time (utime+stime) and the share of the
# machine's CPU time left idle during the build (/proc/stat: the -j slots
# standing empty), with every run. BIN_DIR/env, when there, is sourced
# before each of that side's builds (environment for an A/B of a setting).
#
# Needs root (mount), mkfs.ext4 and python3. PROJECT comes from
#   bin/bench/bench_engine --kiln bin/kiln -n 1000 --gen-only DIR
# (use DIR/n1000-kiln). KILN_AB_IMG (default /tmp/kiln-ab.img, 2 GiB) and
# KILN_AB_MNT (default /mnt/kiln-ab) place the file system.
set -eu
if [ $# -lt 3 ]; then
	echo "usage: bench/engine/ab.sh RUNS PROJECT BIN_DIR..." >&2
	exit 2
fi
runs=$1 src=$2
shift 2
img=${KILN_AB_IMG:-/tmp/kiln-ab.img}
mnt=${KILN_AB_MNT:-/mnt/kiln-ab}
mkdir -p "$mnt"
truncate -s 2G "$img"
raw=$(mktemp)
trap 'umount "$mnt" 2>/dev/null || true; rm -f "$raw"' EXIT
for r in $(seq "$runs"); do
	for b in "$@"; do
		umount "$mnt" 2>/dev/null || true
		mkfs.ext4 -q -F -O ^has_journal "$img"
		mount -o loop "$img" "$mnt"
		cp -r "$src" "$mnt/p"
		rm -rf "$mnt/p/.kiln" "$mnt/p/build"
		sync
		cd "$mnt/p"
		idle0=$(awk '/^cpu /{print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)
		t0=$(date +%s%N)
		(if [ -f "$b/env" ]; then . "$b/env"; fi
		 "$b/kiln" build -j2 >/dev/null) || echo "ab.sh: the build with $b failed" >&2
		t1=$(date +%s%N)
		idle=$(awk -v s="$idle0" '/^cpu /{split(s, a, " ");
			printf "%.1f", 100 * ($5 + $6 - a[1]) / ($2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 - a[2])}' /proc/stat)
		cpu=$(awk '{print ($14 + $15) * 10}' "/proc/$(cat .kiln/kilnd.pid)/stat")
		"$b/kiln" stop >/dev/null 2>&1 || true
		cd /
		echo "$b $(((t1 - t0) / 1000000)) $cpu $idle" >>"$raw"
	done
done
python3 - "$raw" <<'PY'
import statistics, sys
wall, cpu, idle = {}, {}, {}
for line in open(sys.argv[1]):
    b, w, c, i = line.split()
    wall.setdefault(b, []).append(int(w))
    cpu.setdefault(b, []).append(int(c))
    idle.setdefault(b, []).append(float(i))
for b in wall:
    print(f"{b}: wall median {statistics.median(wall[b]):.0f} ms {sorted(wall[b])}, "
          f"kilnd CPU median {statistics.median(cpu[b]):.0f} ms {sorted(cpu[b])}, "
          f"idle median {statistics.median(idle[b]):.1f} % {sorted(idle[b])}")
PY
