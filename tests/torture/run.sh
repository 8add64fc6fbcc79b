#!/usr/bin/env bash
# tests/torture/run.sh BINDIR — the torture suite (issue 21; `make torture`).
# Builds a generated project (tools writing 1-8 MiB outputs, a pure
# function of their inputs) with BINDIR/kiln and BINDIR/kilnd, and for N
# rounds kills -9 the daemon and/or a client at a random moment, sometimes
# with two clients, sometimes with `kiln gc --grace 0s --max-age 0s`
# looping beside, sometimes after editing sources. After each round an
# independent check (tests/torture/lib.sh): blobs re-hash to their names,
# kiln fsck exits 0, tmp/ is empty, and after a clean build every output
# equals its reference. Then, as root, a full disk (a small tmpfs), and
# the fuzz targets for FUZZ_SECS each. Prints a summary; exits 1 on any
# inconsistency.
#
# Knobs (environment): N rounds (default 10), SEED (default: the time),
# NSRC sources (default 24), FUZZ_SECS (default 30; 0 skips fuzzing),
# KEEP=1 keeps the work folder.
set -u
BINDIR=$(cd "${1:-bin}" && pwd) || exit 2
KILN=$BINDIR/kiln KILND=$BINDIR/kilnd
export KILND
N=${N:-10} NSRC=${NSRC:-24} FUZZ_SECS=${FUZZ_SECS:-30}
SEED=${SEED:-$(date +%s)}
RANDOM=$SEED
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/torture/lib.sh
. "$HERE/lib.sh"
for t in xxh128sum timeout; do
	command -v $t >/dev/null || { echo "torture: needs $t (Debian: xxhash, coreutils)" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kiln-torture.XXXXXX")
P=$WORK/p
INCONS=0 ROUNDS=0 KILL_D=0 KILL_C=0 ENOSPC_RUNS=0 GC_LOOPS=0 EDITS=0 FUZZ_RUNS=0
T0=$(date +%s)
cleanup() {
	stop_daemon "$P" 2>/dev/null
	[ -n "${FS:-}" ] && mountpoint -q "$FS" && { stop_daemon "$FS/p"; umount "$FS" || umount -l "$FS"; }
	[ "${KEEP:-0}" = 1 ] && echo "torture: work folder kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# rand_delay: a random delay in seconds, 0 to 0.4 (a full build takes about that)
rand_delay() { printf '0.%03d' $((RANDOM % 400)); }

# daemon_of DIR: the pid of the project's daemon, waiting up to 2 s for it
daemon_of() {
	local pid=
	for _ in $(seq 1 40); do
		pid=$(cat "$1/.kiln/kilnd.pid" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && break
		pid=; sleep 0.05
	done
	echo "$pid"
}

# gc_loop DIR: `kiln gc` with no grace, over and over, until killed
gc_loop() {
	cd "$1" || exit 1
	while :; do "$KILN" gc --grace 0s --max-age 0s >/dev/null 2>>"$WORK/gc.log" ||
		echo "gc exit $?" >>"$WORK/gc.log"; done
}

# one_round R: the faults of round R, then the checks
one_round() {
	local r=$1 mode=$((RANDOM % 4)) gc=0 gcpid= c1 c2= dpid i k what
	if [ $((RANDOM % 4)) -ne 0 ]; then
		k=$((1 + RANDOM % 8))
		for _ in $(seq 1 "$k"); do edit_source "$P" $((1 + RANDOM % NSRC)) "$r"; done
		EDITS=$((EDITS + k))
	fi
	# gc loops in every third round
	[ $((r % 3)) -eq 0 ] && gc=1
	if [ $gc -eq 1 ]; then gc_loop "$P" & gcpid=$!; GC_LOOPS=$((GC_LOOPS + 1)); fi
	(cd "$P" && exec "$KILN" build >/dev/null 2>&1) & c1=$!
	if [ $mode -ge 2 ]; then
		sleep 0.0$((RANDOM % 10))
		(cd "$P" && exec "$KILN" build >/dev/null 2>&1) & c2=$!
	fi
	# a client is killed sooner: it returns as soon as the build is done
	if [ $((mode % 2)) -eq 1 ]; then sleep "$(printf "0.%02d" $((RANDOM % 20)))"; else sleep "$(rand_delay)"; fi
	dpid=$(daemon_of "$P")
	case $mode in
	0|2) what="daemon"
	     [ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null && KILL_D=$((KILL_D + 1)) ;;
	1|3) what="client"
	     kill -9 "$c1" 2>/dev/null && KILL_C=$((KILL_C + 1))
	     # and sometimes the daemon a moment later
	     if [ $((RANDOM % 2)) -eq 0 ]; then
		     sleep "$(rand_delay)"; what="client+daemon"
		     [ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null && KILL_D=$((KILL_D + 1))
	     fi ;;
	esac
	for c in $c1 $c2; do
		for _ in $(seq 1 600); do kill -0 "$c" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$c" 2>/dev/null; wait "$c" 2>/dev/null
	done
	if [ -n "$gcpid" ]; then kill "$gcpid" 2>/dev/null; wait "$gcpid" 2>/dev/null; fi
	note "round $r: killed $what$( [ -n "$c2" ] && echo ', two clients')$( [ $gc -eq 1 ] && echo ', gc looping')"
	final_check "$P" "round $r"
	ROUNDS=$((ROUNDS + 1))
}

# enospc_run: a copy of the project on a 48 MiB tmpfs (its outputs need
# more), built until the disk is full, killed; space freed (remount
# bigger), then the same checks.
enospc_run() {
	if [ "$(id -u)" -ne 0 ]; then note "ENOSPC run skipped: needs root to mount a tmpfs"; return; fi
	FS=$WORK/fs
	mkdir -p "$FS"
	mount -t tmpfs -o size=48m tmpfs "$FS" || { note "ENOSPC run skipped: cannot mount a tmpfs"; FS=; return; }
	mkdir "$FS/p"
	cp -r "$P/kiln.yaml" "$P/src" "$FS/p/"
	(cd "$FS/p" && timeout 120 "$KILN" build >"$WORK/enospc-build.log" 2>&1)
	note "ENOSPC run: build exit $?: $(grep -i -m1 "space\\|fail" "$WORK/enospc-build.log")"
	local dpid; dpid=$(cat "$FS/p/.kiln/kilnd.pid" 2>/dev/null)
	[ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null && KILL_D=$((KILL_D + 1))
	sleep 0.2
	mount -o remount,size=1g "$FS"
	ENOSPC_RUNS=$((ENOSPC_RUNS + 1))
	final_check "$FS/p" "ENOSPC run"
	stop_daemon "$FS/p"
	umount "$FS" || umount -l "$FS"
	FS=
}

# fuzz_runs: each libFuzzer target for FUZZ_SECS (tests/fuzz.sh)
fuzz_runs() {
	local t root
	root=$(cd "$HERE/../.." && pwd)
	[ "$FUZZ_SECS" -gt 0 ] || { note "fuzzing skipped (FUZZ_SECS=0)"; return; }
	for t in desc wire; do
		if [ ! -x "$BINDIR/fuzz/$t" ]; then note "fuzz: $BINDIR/fuzz/$t not built, skipped"; continue; fi
		(cd "$root" && tests/fuzz.sh "$BINDIR/fuzz/$t" "fuzz/corpus/$t" "$FUZZ_SECS") ||
			bad "fuzz target $t failed"
		FUZZ_RUNS=$((FUZZ_RUNS + 1))
	done
}

note "seed $SEED, $N rounds, $NSRC sources, work folder $WORK"
write_project "$P"
(cd "$P" && "$KILN" build >"$WORK/build.log" 2>&1) || bad "first build failed: $(tail -n 5 "$WORK/build.log")"
final_check "$P" "first build"
for r in $(seq 1 "$N"); do one_round "$r"; done
enospc_run
fuzz_runs

echo "torture summary (seed $SEED, $(( $(date +%s) - T0 )) s):"
echo "  rounds run:            $ROUNDS (sources edited: $EDITS)"
echo "  daemons killed (-9):   $KILL_D"
echo "  clients killed (-9):   $KILL_C"
echo "  ENOSPC runs:           $ENOSPC_RUNS"
echo "  gc loops:              $GC_LOOPS"
echo "  fuzz runs:             $FUZZ_RUNS (${FUZZ_SECS} s each)"
echo "  inconsistencies:       $INCONS"
[ "$INCONS" -eq 0 ]
