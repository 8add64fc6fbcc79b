# tests/torture/lib.sh — what the torture rounds share: the generated
# project, its reference outputs, stopping the daemon, and the independent
# check of a store and its build/. Sourced by tests/torture/run.sh, which
# sets KILN, KILND, NSRC and the counters (INCONS).

# The tool: a pure function of its input. Source src/s<I>_<MB>.txt becomes
# an output of exactly MB MiB: the source's bytes repeated, then cut.
# shellcheck disable=SC2016
GROW='mb=$(basename "$0" .txt | sed "s/.*_//"); sz=$((mb * 1048576)); out=$1; in=$0; n=$((sz / $(wc -c <"$in") + 1)); set --; while [ $# -lt $n ]; do set -- "$@" "$in"; done; cat "$@" | head -c $sz >"$out"'

# write_project DIR: kiln.yaml and NSRC sources (1..8 MiB outputs).
write_project() {
	local i
	mkdir -p "$1/src"
	cat >"$1/kiln.yaml" <<YAML
kiln: 1
project: torture
sources: [src]
profiles:
  default: {}
tools:
  grow: { run: [sh, -c, '$GROW', "\${in}", "\${out}"] }
rules:
  - match: "src/*.txt"
    url: "grow/\${match.name}.bin"
    tool: grow
YAML
	for i in $(seq 1 "$NSRC"); do
		edit_source "$1" "$i" 0
	done
}

# edit_source DIR I ROUND: new content for source I (deterministic in
# I and ROUND, 16-48 KiB, not a power of two so outputs end mid-copy).
edit_source() {
	local mb=$(( ($2 * 5) % 8 + 1 )) kib=$(( 16 + ($2 * 7 + $3) % 32 ))
	rm -f "$1"/src/s"$2"_*.txt
	{ printf 'source %s round %s\n' "$2" "$3"; seq 1 $((kib * 200)); } |
		head -c $((kib * 1024 + $2)) >"$1/src/s$2_$mb.txt"
}

# expected_hash SRC: the XXH3-128 of what the tool must make of SRC,
# computed here without kiln.
expected_hash() {
	local mb sz n
	mb=$(basename "$1" .txt); mb=${mb##*_}
	sz=$((mb * 1048576))
	n=$(( sz / $(wc -c <"$1") + 1 ))
	yes "$1" | head -n "$n" | xargs cat 2>/dev/null | head -c "$sz" | xxh128sum 2>/dev/null | cut -d' ' -f1
}

# stop_daemon DIR: stop the project's daemon; kill -9 it if it will not go.
stop_daemon() {
	local pid
	[ -f "$1/.kiln/kilnd.pid" ] || return 0
	pid=$(cat "$1/.kiln/kilnd.pid" 2>/dev/null)
	(cd "$1" && timeout 20 "$KILN" stop >/dev/null 2>&1)
	[ -n "$pid" ] || return 0
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
	note "daemon $pid did not stop in 5 s; killed"
	kill -9 "$pid" 2>/dev/null
	return 0
}

# bad WHAT: count and print one inconsistency.
bad() {
	INCONS=$((INCONS + 1))
	echo "torture: INCONSISTENT: $*" >&2
}
note() { echo "torture: $*" >&2; }

# check_store DIR WHEN: with the daemon stopped, every blob re-hashes to
# its name (xxh128sum, not kiln), kiln fsck exits 0, and no temp file is
# left in the store's tmp/ after fsck (opening the store sweeps files of
# dead writers; no writer is alive).
check_store() {
	local d=$1 when=$2 f name got n
	for f in "$d"/.kiln/store/objects/*/*; do
		[ -f "$f" ] || continue
		name=$(basename "$(dirname "$f")")$(basename "$f")
		got=$(xxh128sum "$f" 2>/dev/null | cut -d' ' -f1)
		[ "$got" = "$name" ] || bad "$when: blob $name re-hashes to $got"
	done
	if ! (cd "$d" && "$KILN" fsck >"$d/../fsck.log" 2>&1); then
		bad "$when: kiln fsck failed: $(tail -n 5 "$d/../fsck.log")"
	fi
	n=$(find "$d/.kiln/store/tmp" -mindepth 1 2>/dev/null | wc -l)
	[ "$n" -eq 0 ] || bad "$when: $n leftovers in .kiln/store/tmp"
}

# check_outputs DIR WHEN: build/default/ holds, for every source, exactly
# the reference output, listed in the index map with its hash and size.
check_outputs() {
	local d=$1 when=$2 src stem want line hash size path got
	local index=$d/build/default/kiln-index.txt
	[ -f "$index" ] || { bad "$when: no $index"; return; }
	for src in "$d"/src/*.txt; do
		stem=$(basename "$src" .txt)
		want=$(expected_hash "$src")
		line=$(grep -P "^grow/$stem\\.bin\\t" "$index")
		[ -n "$line" ] || { bad "$when: grow/$stem.bin not in the index map"; continue; }
		IFS=$'\t' read -r _ hash size path <<<"$line"
		[ "$hash" = "$want" ] || bad "$when: index says $stem is $hash, reference is $want"
		[ "$size" -eq $(( ${stem##*_} * 1048576 )) ] || bad "$when: index size of $stem is $size"
		got=$(xxh128sum "$d/build/default/$path" 2>/dev/null | cut -d' ' -f1)
		[ "$got" = "$want" ] || bad "$when: build/default/$path is ${got:-missing}, reference is $want"
	done
	n=$(grep -c $'\t' "$index")
	[ "$n" -eq "$NSRC" ] || bad "$when: index map has $n entries for $NSRC sources"
}

# final_check DIR WHEN: store sound as the faults left it, then after one
# clean build (daemon stopped again) store sound and outputs right.
final_check() {
	local d=$1 when=$2
	stop_daemon "$d"
	check_store "$d" "$when, after faults"
	if ! (cd "$d" && timeout 300 "$KILN" build >"$d/../build.log" 2>&1); then
		bad "$when: clean build failed: $(tail -n 5 "$d/../build.log")"
	fi
	stop_daemon "$d"
	check_store "$d" "$when, after a clean build"
	check_outputs "$d" "$when"
}
