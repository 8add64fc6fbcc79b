#!/usr/bin/env bats
# damaged_db.bats — a damaged LMDB file (<store>/db/data.mdb) must never
# crash kilnd or kiln fsck (before issue 21 both died with SIGBUS): a build
# refuses with a message naming the file and `kiln fsck --repair`, fsck
# reports it (exit 1), fsck --repair rebuilds a working database and the
# next build restores every output.
# The same file cut short under a running kilnd (issue 36: it died of
# SIGBUS, the client said "connection closed"): the daemon lives, refuses
# every request but stop naming the file and the repair, writes nothing
# more into the file, and stops cleanly. The helpers' teardown fails a case
# whose daemon log holds a sanitizer report.

bats_require_minimum_version 1.5.0

load daemon_helpers

DB=.kiln/store/db/data.mdb

# A project of two cp steps.
write_project() {
	mkdir -p src
	printf 'alpha\n' >src/a.txt
	printf 'bravo\n' >src/b.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - match: "src/*.txt"
    url: "copy/${match.name}.txt"
    tool: copy
YAML
}

# built_then_stopped: build once, check the outputs, stop the daemon.
built_then_stopped() {
	write_project
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ] || { echo "first build: status $status: $stderr"; false; }
	"$KILN" stop
	wait_for test ! -e .kiln/kilnd.pid
	[ -s "$DB" ] || { echo "no database at $DB"; ls -lR .kiln/store; false; }
}

# outputs_ok: every output is on disk with its source's content.
outputs_ok() {
	cmp build/default/copy/a.txt src/a.txt && cmp build/default/copy/b.txt src/b.txt
}

# not_a_crash STATUS WHAT: 128+7 (SIGBUS), 128+11 (SIGSEGV), 128+6 (abort)
# are crashes, not answers.
not_a_crash() {
	case "$1" in
	134|135|139) echo "$2 crashed: status $1"; return 1 ;;
	esac
	return 0
}

# u64 OFFSET: the little-endian 64-bit number at OFFSET of the database.
u64() {
	od -An -t u8 -j "$1" -N 8 "$DB" | tr -d ' '
}

# main_root_page: the root page of LMDB's main database (the one naming
# the named databases) in the newer meta page. LMDB 0.9's layout (mdb.c:
# MDB_page, MDB_meta, MDB_db; docs/store.md): meta page 0 at 0, page 1 at
# the page size (which 0's first MDB_db's md_pad holds, at offset 40); in
# each the main MDB_db's md_root is at 128 and mm_txnid at 144.
main_root_page() {
	local ps
	ps=$(od -An -t u4 -j 40 -N 4 "$DB" | tr -d ' ')
	if [ "$(u64 144)" -ge "$(u64 $((ps + 144)))" ]; then
		u64 128
	else
		u64 $((ps + 128))
	fi
}

# repair_and_rebuild: fsck --repair exits 0, keeps the damaged file in
# corrupt/, a second fsck is clean and the next build restores the outputs.
repair_and_rebuild() {
	rm -rf build
	run --separate-stderr "$KILN" fsck --repair
	not_a_crash "$status" "fsck --repair"
	echo "fsck --repair: $status: $output / $stderr"
	[ "$status" -eq 0 ] || [ "$status" -eq 1 ] || false
	ls .kiln/store/corrupt/ | grep -q 'data\.mdb' ||
		{ echo "damaged file not kept in corrupt/"; ls -l .kiln/store/corrupt; false; }
	run --separate-stderr "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "fsck after repair: $status: $output / $stderr"; false; }
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ] || { echo "build after repair: $status: $output / $stderr"; false; }
	outputs_ok
}

@test "a database truncated to half: build refuses, fsck reports, repair makes it build again" {
	built_then_stopped
	truncate -s $(($(stat -c %s "$DB") / 2)) "$DB"
	run --separate-stderr "$KILN" build
	not_a_crash "$status" "kiln build"
	[ "$status" -ne 0 ] || { echo "build succeeded on a truncated database"; false; }
	grep -q 'data.mdb' <<<"$stderr$(cat .kiln/kilnd.log 2>/dev/null)" ||
		{ echo "no message naming the file: $stderr"; false; }
	grep -q 'kiln fsck --repair' <<<"$stderr" ||
		{ echo "no hint to run fsck --repair: $stderr"; false; }
	run --separate-stderr "$KILN" fsck
	not_a_crash "$status" "kiln fsck"
	[ "$status" -eq 1 ] || { echo "fsck: status $status: $output / $stderr"; false; }
	grep -q 'data.mdb' <<<"$output$stderr" || { echo "fsck names no file: $output / $stderr"; false; }
	run --separate-stderr "$KILN" fsck --repair
	[ "$status" -eq 0 ] || { echo "fsck --repair: status $status: $output / $stderr"; false; }
	repair_and_rebuild
}

@test "a database with a page overwritten by garbage: fsck finds it, repair makes it build again" {
	built_then_stopped
	ps=$(od -An -t u4 -j 40 -N 4 "$DB" | tr -d ' ')
	root=$(main_root_page)
	[ "$root" -ge 2 ] || { echo "main root page $root"; false; }
	# garbage over that page's header and the start of its node table
	head -c 64 /dev/urandom | dd of="$DB" bs=1 seek=$((root * ps)) conv=notrunc status=none
	run --separate-stderr "$KILN" fsck
	not_a_crash "$status" "kiln fsck"
	[ "$status" -eq 1 ] || { echo "fsck: status $status: $output / $stderr"; false; }
	run --separate-stderr "$KILN" build
	not_a_crash "$status" "kiln build"
	repair_and_rebuild
}

# cut_under_daemon SIZE: build, then cut the database to SIZE bytes under
# the running daemon (issue 36: kilnd died of SIGBUS, the client said
# "connection closed"), change a source and build again.
cut_under_daemon() {
	write_project
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ] || { echo "first build: status $status: $stderr"; false; }
	pid=$(daemon_pid)
	truncate -s "$1" "$DB"
	printf 'changed\n' >src/a.txt
	run --separate-stderr "$KILN" build
	not_a_crash "$status" "kiln build"
	running "$pid" || { echo "kilnd died: $(tail -3 .kiln/kilnd.log)"; false; }
	[ "$status" -ne 0 ] || { echo "build succeeded on a database cut short"; false; }
	says_cut_short "kiln build" "$stderr"
	# nothing more was written into it (a commit would have made it
	# longer, pages past a hole its tree points into)
	[ "$(stat -c %s "$DB")" -eq "$1" ] ||
		{ echo "cut to $1 bytes, now $(stat -c %s "$DB")"; false; }
}

# says_cut_short WHAT TEXT: TEXT names the database file and the repair.
says_cut_short() {
	grep -q 'store/db/data.mdb' <<<"$2" || { echo "$1 names no file: $2"; false; }
	grep -q "kiln fsck --repair" <<<"$2" || { echo "$1 gives no hint to run fsck --repair: $2"; false; }
}

# then_stop: kiln status says the same and fails, the log said it once,
# and kiln stop stops the daemon cleanly (not a signal: its log ends with
# "stopped").
then_stop() {
	run --separate-stderr "$KILN" status
	not_a_crash "$status" "kiln status"
	[ "$status" -ne 0 ] || { echo "kiln status: 0: $output"; false; }
	says_cut_short "kiln status" "$stderr"
	n=$(grep -c 'was cut short while kilnd had it open' .kiln/kilnd.log || true)
	[ "$n" -eq 1 ] || { echo "the log says it $n times:"; cat .kiln/kilnd.log; false; }
	run --separate-stderr "$KILN" stop
	[ "$status" -eq 0 ] || { echo "kiln stop: $status: $output / $stderr"; false; }
	wait_for test ! -e .kiln/kilnd.pid
	for _ in $(seq 1 100); do running "$pid" || break; sleep 0.05; done
	! running "$pid" || { echo "kilnd $pid still runs after kiln stop"; false; }
	[ "$(tail -1 .kiln/kilnd.log | sed 's/.*: //')" = stopped ] ||
		{ echo "kilnd did not stop cleanly:"; tail -5 .kiln/kilnd.log; false; }
}

# then_stop_and_repair: then_stop, and fsck --repair makes the next build
# work.
then_stop_and_repair() {
	then_stop
	repair_and_rebuild
}

@test "a database cut to its meta pages under a running daemon: no bus error, every command says so, repair makes it build again" {
	cut_under_daemon 8192
	then_stop_and_repair
}

@test "a database cut to nothing under a running daemon: no bus error, every command says so, after a stop it builds again" {
	cut_under_daemon 0
	then_stop
	# an empty file is what a crash at creation leaves: fsck --repair (as
	# the message says) has nothing to set aside, and a new database
	# starts in it
	run --separate-stderr "$KILN" fsck --repair
	[ "$status" -eq 0 ] || { echo "fsck --repair: $status: $output / $stderr"; false; }
	rm -rf build
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ] || { echo "build after stop: $status: $output / $stderr"; false; }
	outputs_ok
}

@test "a database cut to half under a running daemon: no bus error, every command says so, repair makes it build again" {
	write_project
	"$KILN" build >/dev/null
	half=$(($(stat -c %s "$DB") / 2))
	"$KILN" stop >/dev/null
	wait_for test ! -e .kiln/kilnd.pid
	cut_under_daemon "$half"
	then_stop_and_repair
}

@test "a database cut short while a build runs: the build fails saying so, the daemon lives, repair makes it build again" {
	write_project
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ] || { echo "first build: status $status: $stderr"; false; }
	pid=$(daemon_pid)
	# a slow step, found running by its unusual sleep
	cat >kiln.yaml <<YAML
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  slow: { run: [sh, -c, 'sleep 1.37; cp "\$0" "\$1"', "\${in}", "\${out}"] }
rules:
  - match: "src/*.txt"
    url: "copy/\${match.name}.txt"
    tool: slow
YAML
	"$KILN" build >build.out 2>build.err &
	client=$!
	wait_for pgrep -f 'sleep 1[.]37' >/dev/null
	truncate -s 8192 "$DB"
	wait "$client" && st=0 || st=$?
	not_a_crash "$st" "kiln build"
	running "$pid" || { echo "kilnd died: $(tail -3 .kiln/kilnd.log)"; false; }
	[ "$st" -ne 0 ] || { echo "the build succeeded: $(cat build.out build.err)"; false; }
	says_cut_short "kiln build" "$(cat build.err)"
	write_project
	then_stop_and_repair
}

@test "fsck --repair refuses while a kilnd has the store open, and moves nothing" {
	cut_under_daemon 8192
	# the daemon still holds the file (and LMDB's reader table): setting
	# them aside now would leave it writing into the moved file
	ino=$(stat -c %i "$DB")
	run --separate-stderr "$KILN" fsck --repair
	[ "$status" -eq 2 ] || { echo "fsck --repair beside kilnd: $status: $output / $stderr"; false; }
	grep -q "in use by another process" <<<"$stderr" && grep -q "kiln stop" <<<"$stderr" ||
		{ echo "no reason given: $stderr"; false; }
	[ "$(stat -c %i "$DB")" = "$ino" ] || { echo "$DB was moved under the daemon"; false; }
	! ls .kiln/store/corrupt/data.mdb.* 2>/dev/null
	# a plain fsck beside it still reads (and reports the damage)
	run --separate-stderr "$KILN" fsck
	[ "$status" -eq 1 ] || { echo "fsck beside kilnd: $status: $stderr"; false; }
	then_stop_and_repair
}
