#!/usr/bin/env bats
# live.bats — kiln watch: a live build that rebuilds on every save, through
# the daemon's inotify watch and its SourcesChanged events (issue 23's first
# part). kiln watch's output goes outside the project, as a user's terminal.

bats_require_minimum_version 1.5.0

load daemon_helpers

live_project() {
	mkdir -p src
	printf 'one\n' >src/a.txt
	printf 'b\n' >src/b.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
assets:
  - url: a.txt
    tool: copy
    inputs: [src/a.txt]
  - url: b.txt
    tool: copy
    inputs: [src/b.txt]
YAML
}

# watch_start ARGS...: kiln watch --json ARGS in the background, its output
# in $W ($watch_pid); returns once its first build has ended.
watch_start() {
	W="$BATS_TEST_TMPDIR/watch.out"
	"$KILN" watch --json "$@" >"$W" 2>"$W.err" &
	watch_pid=$!
	wait_for grep -q '"event":"build"' "$W" || { cat "$W" "$W.err"; false; }
}

watch_stop() {
	kill -INT "$watch_pid" 2>/dev/null || true
	wait "$watch_pid" || true
}

# runs_of URL: how many times kiln watch reported URL's tool ran.
runs_of() {
	grep -c "\"url\":\"$1\",\"profile\":\"pc\",\"result\":\"ran\"" "$W" || true
}

subscribers_are() {
	[ "$(status_field subscribers)" = "$1" ]
}

# output_is FILE TEXT: build/pc/FILE holds exactly TEXT and a newline.
output_is() {
	[ -f "build/pc/$1" ] && [ "$(cat "build/pc/$1")" = "$2" ]
}

@test "kiln watch rebuilds on a save by rename, and its event carries the new hash" {
	live_project
	watch_start
	output_is a.txt one
	[ "$(runs_of a.txt)" -eq 1 ]
	# an editor's atomic save: write a temp file, rename it over
	printf 'two\n' >src/.a.txt.swp
	mv src/.a.txt.swp src/a.txt
	wait_for output_is a.txt two || { cat "$W"; false; }
	wait_for test "$(runs_of a.txt)" -eq 2 || { cat "$W"; false; }
	line=$(grep '"url":"a.txt"' "$W" | tail -n 1)
	[ "$(json_field hash "$line")" = "$(xxh128sum src/a.txt | cut -d' ' -f1)" ] ||
		{ echo "$line"; false; }
	# b.txt was not touched: not run again
	[ "$(runs_of b.txt)" -eq 1 ]
	watch_stop
}

@test "a burst of 100 writes gives a few runs and the last content" {
	live_project
	watch_start a.txt
	for i in $(seq 100); do
		printf '%s\n' "$i" >src/a.txt
	done
	wait_for output_is a.txt 100 || { cat "$W"; cat build/pc/a.txt; false; }
	# the last write's build may still be on its way: let it end. (Not
	# by counting kiln watch's build lines: under load a burst's run of
	# a.txt was printed and its build's summary never was, the next
	# build doing nothing; see the issue 36 report.)
	wait_for sh -c "[ \"\$('$KILN' status --json | sed -n 's/.*\"build_queue\":\([0-9]*\).*/\1/p')\" = 0 ]" ||
		{ cat "$W" "$W.err"; false; }
	# a few runs, not one per write: a loaded machine (stress-ng beside
	# make test) pauses the writing shell mid-burst, and each pause
	# longer than the settle time is a build of its own (8 were seen)
	n=$(runs_of a.txt)
	[ "$n" -ge 2 ] && [ "$n" -le 20 ] || { echo "$n runs"; cat "$W"; false; }
	watch_stop
	output_is a.txt 100
}

@test "a save while a slow build runs is built when it ends" {
	live_project
	cat >>kiln.yaml <<'YAML'
  - url: slow.txt
    tool: slow
    inputs: [src/b.txt]
YAML
	sed -i 's/^tools:$/tools:\n  slow: { shell: true, run: "sleep 1; cat \\"${in}\\" > \\"${out}\\"" }/' kiln.yaml
	watch_start
	printf 'b2\n' >src/b.txt
	# while slow.txt's second run sleeps, change its input again
	wait_for sh -c "[ \"\$(grep -c '\"url\":\"slow.txt\"' '$W')\" -ge 1 ] && [ -e .kiln ]"
	sleep 0.3 # inside the second run's sleep (the subject of this test)
	printf 'b3\n' >src/b.txt
	# (slow.txt may get b3 in the build that was running, its check after
	# the run seeing the edit; b.txt then waits for the next build)
	wait_for both_are b3 || { cat "$W"; cat build/pc/*.txt; false; }
	watch_stop
}

both_are() {
	output_is slow.txt "$1" && output_is b.txt "$1"
}

@test "kiln watch's own output in the project causes no rebuilds" {
	live_project
	"$KILN" watch >watch.log 2>&1 &
	watch_pid=$!
	wait_for grep -q '^profile pc:' watch.log
	printf 'two\n' >src/a.txt
	wait_for output_is a.txt two
	wait_for sh -c "[ \"\$(grep -c '^profile pc:' watch.log)\" -eq 2 ]"
	# each summary written to watch.log is a change in the project; a
	# build that changed nothing prints nothing, so it stops there
	sleep 1 # a loop would print more within this second (the subject)
	[ "$(grep -c '^profile pc:' watch.log)" -eq 2 ] || { cat watch.log; false; }
	watch_stop
}

@test "kiln events shows the changes the watch saw" {
	live_project
	"$KILN" build >/dev/null
	# (its output outside the project, or its own lines would be changes)
	EV="$BATS_TEST_TMPDIR/ev.out"
	"$KILN" events --timeout 20 >"$EV" 2>"$EV.err" &
	ev=$!
	# (kiln events may not have subscribed yet: save until it shows)
	wait_for edit_seen || { cat "$EV" "$EV.err"; kill "$ev"; false; }
	kill "$ev"
	grep -q '^[0-9a-f]*:[0-9]* changed src/a.txt$' "$EV" || { cat "$EV"; false; }
}

edit_seen() {
	printf '%s\n' "$RANDOM" >src/a.txt
	sleep 0.05
	grep -q 'src/a.txt' "$EV"
}

@test "kiln watch with a target that matches nothing says so and exits 2" {
	live_project
	run --separate-stderr timeout 20 "$KILN" watch nothing.txt
	[ "$status" -eq 2 ] || { echo "$stderr"; false; }
	[[ "$stderr" == *"nothing.txt"* ]] || { echo "$stderr"; false; }
}

@test "a new asset added to kiln.yaml while watching is built" {
	live_project
	watch_start
	printf 'c\n' >src/c.txt
	cat >>kiln.yaml <<'YAML'
  - url: c.txt
    tool: copy
    inputs: [src/c.txt]
YAML
	wait_for output_is c.txt c || { cat "$W" "$W.err" .kiln/kilnd.log; false; }
	watch_stop
}

# An edit of kiln.yaml that lands while the daemon is loading it (a build
# started by the save of a source just before): the load read the old
# text, and the next build must load it again. Each round saves a source,
# then appends an asset for it a little later — the gap swept over a few
# milliseconds, where the build that save starts is loading kiln.yaml —
# and waits until the asset is built. (Before the fix, the load's start
# was read from the fine wall clock while the file's ctime comes from the
# coarse one: an edit within that tick looked older than the load, and the
# new asset was never built.)
@test "kiln.yaml edited while a build loads it is loaded again" {
	live_project
	watch_start
	# pauses of a fraction of a millisecond without a process: read -t
	# on a FIFO nobody writes
	mkfifo "$BATS_TEST_TMPDIR/never"
	exec {never}<>"$BATS_TEST_TMPDIR/never"
	for i in $(seq 40); do
		printf 'c%s\n' "$i" >"src/c$i.txt"
		printf -v gap '0.%04d' $((i % 20 * 5)) # 0 to 9.5 ms
		read -r -t "$gap" -u "$never" || true
		printf '  - url: c%s.txt\n    tool: copy\n    inputs: [src/c%s.txt]\n' \
			"$i" "$i" >>kiln.yaml
		wait_for output_is "c$i.txt" "c$i" ||
			{ echo "round $i"; cat "$W" "$W.err" .kiln/kilnd.log; false; }
	done
	exec {never}>&-
	watch_stop
}

@test "a deleted source fails its step with a clear event; the last good output stays" {
	live_project
	watch_start
	rm src/a.txt
	wait_for grep -q '"url":"a.txt","profile":"pc","result":"failed"' "$W" ||
		{ cat "$W" "$W.err"; false; }
	grep '"result":"failed"' "$W" | grep -q 'src/a.txt' || { cat "$W"; false; }
	output_is a.txt one
	# and a new save brings it back
	printf 'back\n' >src/a.txt
	wait_for output_is a.txt back || { cat "$W"; false; }
	watch_stop
}

@test "the watch survives the removal and re-creation of a whole source folder" {
	live_project
	watch_start
	rm -rf src
	# a project without its source folder has an error: said, and watched on
	wait_for grep -q "source folder 'src' does not exist" "$W.err" ||
		{ cat "$W" "$W.err"; false; }
	mkdir src
	printf 'new a\n' >src/a.txt
	printf 'new b\n' >src/b.txt
	wait_for both_new || { cat "$W"; false; }
	# and an edit in the new folder is seen too
	printf 'newer a\n' >src/a.txt
	wait_for output_is a.txt 'newer a' || { cat "$W"; false; }
	watch_stop
}

both_new() {
	output_is a.txt 'new a' && output_is b.txt 'new b'
}

@test "saves in a source folder no build has read yet are seen" {
	live_project
	mkdir -p src/deep/er
	printf 'x\n' >src/deep/er/x.txt
	watch_start a.txt
	EV="$BATS_TEST_TMPDIR/ev.out"
	"$KILN" events --timeout 20 >"$EV" 2>"$EV.err" &
	ev=$!
	wait_for deep_edit_seen || { cat "$EV" "$EV.err"; kill "$ev"; false; }
	kill "$ev"
}

deep_edit_seen() {
	printf '%s\n' "$RANDOM" >src/deep/er/x.txt
	sleep 0.05
	grep -q ' changed .*src/deep/er/x.txt' "$EV"
}

@test "kiln hold around 1,000 file changes gives one batch and one build" {
	live_project
	mkdir -p src/many
	watch_start
	run "$KILN" hold sh -c 'for i in $(seq 1000); do echo $i >src/many/f$i.txt; done
		echo done >src/a.txt
		sleep 0.5 # held: no build may start meanwhile (the subject)
		cat build/pc/a.txt >held.txt'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat held.txt)" = one ] || { cat held.txt "$W"; false; }
	wait_for output_is a.txt done || { cat "$W"; false; }
	wait_for sh -c "[ \"\$(grep -c '\"event\":\"build\"' '$W')\" -ge 2 ]" ||
		{ cat "$W" "$W.err"; false; }
	sleep 0.3 # a second batch would start a third build within this
	[ "$(grep -c '"event":"build"' "$W")" -eq 2 ] || { cat "$W"; false; }
	[ "$(runs_of a.txt)" -eq 2 ]
	watch_stop
}

@test "a hold ends with its connection, and kiln release ends every hold" {
	live_project
	watch_start
	# kiln hold says so on stderr once the daemon has the hold (a fixed
	# 0.3 s for it was too short on a loaded machine); outside the
	# project, where a write is no edit
	# (3>&-: a holder a failed assertion leaves behind must not keep
	# bats waiting on its output for ever, as one did)
	HE="$BATS_TEST_TMPDIR/hold.err"
	"$KILN" hold 2>"$HE" 3>&- &
	holder=$!
	wait_for grep -q 'holding change reports' "$HE" || { cat "$HE"; false; }
	printf 'two\n' >src/a.txt
	sleep 0.5 # held: not built meanwhile (the subject)
	output_is a.txt one || { cat "$W"; false; }
	kill -9 "$holder"
	wait_for output_is a.txt two || { cat "$W"; false; }
	# kiln release ends a hold whose holder still runs (its own file: the
	# first holder's line, still in the old one, passed the wait before
	# the second hold was taken, and the edit below was built at once)
	HE="$BATS_TEST_TMPDIR/hold2.err"
	"$KILN" hold 2>"$HE" 3>&- &
	holder=$!
	wait_for grep -q 'holding change reports' "$HE" || { cat "$HE"; false; }
	printf 'three\n' >src/a.txt
	sleep 0.5 # held, as above
	output_is a.txt two || { cat "$W"; false; }
	"$KILN" release
	wait_for output_is a.txt three || { cat "$W"; false; }
	# and the holder, told its hold ended, ends too (it held for ever)
	wait_for sh -c "! kill -0 $holder 2>/dev/null" ||
		{ kill "$holder"; cat "$HE"; false; }
	wait "$holder" || { echo "kiln hold exited $?"; cat "$HE"; false; }
	grep -q 'released' "$HE" || { cat "$HE"; false; }
	watch_stop
}

@test "kiln hold without a command ends, with 1, when the daemon stops" {
	live_project
	"$KILN" build >/dev/null
	HE="$BATS_TEST_TMPDIR/hold.err"
	"$KILN" hold 2>"$HE" 3>&- &
	holder=$!
	wait_for grep -q 'holding change reports' "$HE" || { cat "$HE"; false; }
	"$KILN" stop >/dev/null
	wait_for sh -c "! kill -0 $holder 2>/dev/null" ||
		{ kill "$holder"; cat "$HE"; false; }
	rc=0
	wait "$holder" || rc=$?
	[ "$rc" -eq 1 ] || { echo "exit $rc"; cat "$HE"; false; }
	grep -q 'the daemon went away' "$HE" || { cat "$HE"; false; }
}

@test "the hot-reload example gets a reload with the new hash for each save" {
	live_project
	hr="$(dirname "$KILN")/examples/hot-reload"
	[ -x "$hr" ] || { echo "no $hr (make test builds it)"; false; }
	"$hr" 'a*' >hr.out 2>hr.err &
	pid=$!
	wait_for grep -q '^reload a.txt build/pc/a.txt ' hr.out || { cat hr.out hr.err; false; }
	for text in two three; do
		printf '%s\n' "$text" >src/.a.new
		mv src/.a.new src/a.txt
		h=$(xxh128sum src/a.txt | cut -d' ' -f1)
		wait_for grep -q "^reload a.txt build/pc/a.txt $h\$" hr.out ||
			{ cat hr.out hr.err; kill "$pid"; false; }
		output_is a.txt "$text"
	done
	# a failure is a line too, and the last good asset stays
	rm src/a.txt
	wait_for grep -q '^failed a.txt: ' hr.out || { cat hr.out hr.err; kill "$pid"; false; }
	output_is a.txt three
	kill -INT "$pid"
	wait "$pid"
	# b.txt does not match a*: never reloaded
	! grep -q 'b.txt' hr.out || false
}

@test "a save during another client's long build reaches kiln watch before that build ends" {
	live_project
	cat >>kiln.yaml <<'YAML'
  - url: slow.txt
    tool: slow
    inputs: [src/b.txt]
YAML
	# slow.txt runs until the test lets it end (a fixed sleep 6 could end
	# before a loaded machine had rebuilt a.txt): its tool waits for $GO
	GO="$BATS_TEST_TMPDIR/go"
	sed -i "s|^tools:\$|tools:\\n  slow: { shell: true, run: 'while [ ! -e $GO ]; do sleep 0.1; done; cat \"\${in}\" > \"\${out}\"' }|" kiln.yaml
	grep -q "slow: .*$GO" kiln.yaml || { cat kiln.yaml; false; }
	# the batch build: a.txt done at once, slow.txt keeps the wave going
	"$KILN" build >batch.out 2>&1 &
	batch=$!
	wait_for output_is a.txt one
	watch_start a.txt
	printf 'two\n' >src/.a.new
	mv src/.a.new src/a.txt
	wait_for output_is a.txt two || { cat "$W" batch.out; false; }
	# and kiln watch hears of it (the file is in place before the event
	# goes out: beside stress-ng the check came in between)
	h=$(xxh128sum src/a.txt | cut -d' ' -f1)
	wait_for grep -q "\"url\":\"a.txt\".*\"hash\":\"$h\"" "$W" ||
		{ cat "$W" batch.out; false; }
	# within the batch build's wave: it has not ended yet
	[ ! -e build/pc/slow.txt ] || { echo "the batch build ended first"; false; }
	watch_stop
	touch "$GO"
	wait "$batch"
	output_is slow.txt b
	output_is a.txt two
}

@test "a hostile file name in a source folder: one escaped changed line, the watch goes on" {
	live_project
	watch_start a.txt
	EV="$BATS_TEST_TMPDIR/ev.out"
	"$KILN" events --timeout 20 >"$EV" 2>"$EV.err" &
	ev=$!
	wait_for hostile_seen || { cat "$EV" "$EV.err"; kill "$ev"; false; }
	kill "$ev"
	# every line is one event: a cursor first
	! grep -qv '^[0-9a-f]*:[0-9]* ' "$EV" || { cat "$EV"; false; }
	printf 'two\n' >src/a.txt
	wait_for output_is a.txt two || { cat "$W" "$W.err"; false; }
	watch_stop
	[ ! -e pwned ] && [ ! -e src/pwned ]
}

hostile_seen() {
	: >"src/bad$RANDOM
\$(touch pwned) name.txt"
	sleep 0.05
	grep -q 'changed .*src/bad[0-9]*\\n\$(touch\\x20pwned)\\x20name.txt' "$EV"
}

@test "kiln watch ends with status 1 when the daemon stops" {
	live_project
	watch_start
	"$KILN" stop >/dev/null
	wait "$watch_pid" && st=0 || st=$?
	[ "$st" -eq 1 ] || { echo "exit $st"; cat "$W.err"; false; }
	grep -q 'the daemon stopped or went away\|daemon is stopping' "$W.err" || { cat "$W.err"; false; }
}

@test "an inotify queue overflow rescans: an edit made inside a flood of changes is built" {
	live_project
	# more files than the kernel queues events for one inotify instance
	max=$(cat /proc/sys/fs/inotify/max_queued_events)
	mkdir -p src/flood
	python3 -c 'import sys
for i in range(int(sys.argv[1])): open("src/flood/f%d" % i, "w").close()' "$((max + 1000))"
	# the daemon's watch reads its queue 2 s after each wake-up (a test
	# hook), so that the flood overflows the kernel's queue without
	# lowering the machine-wide max_queued_events
	export KILN_TEST_WATCH_STALL_MS=2000
	watch_start
	EV="$BATS_TEST_TMPDIR/ev.out"
	"$KILN" events --timeout 30 >"$EV" 2>"$EV.err" &
	ev=$!
	# (kiln events may not have subscribed yet: touch until it shows)
	wait_for ping_seen || { cat "$EV" "$EV.err"; kill "$ev"; false; }
	# and the last ping's stall and build are over: the flood begins on a
	# quiet watch, whose reader then sits on the queue for all of it
	wait_for quiet || { cat "$EV"; kill "$ev"; false; }
	# the flood: a touch of every file (an event each) fills the queue
	# before the edit, whose events the kernel then drops; then another
	# round (cheap calls, so all of it fits well within the 2 s)
	python3 - "$((max + 1000))" <<'PY'
import os, sys
n = int(sys.argv[1])
for i in range(n):
    os.utime("src/flood/f%d" % i)
with open("src/a.txt", "w") as f:
    f.write("flooded\n")
for i in range(n):
    os.utime("src/flood/f%d" % i)
PY
	wait_for output_is a.txt flooded || { cat "$W" "$EV"; cat .kiln/kilnd.log; kill "$ev"; false; }
	wait_for grep -q "the watch's queue overflowed" .kiln/kilnd.log ||
		{ cat .kiln/kilnd.log; kill "$ev"; false; }
	wait_for grep -q ' changed everything ' "$EV" || { cat "$EV"; kill "$ev"; false; }
	grep -q "log info the watch's queue overflowed" "$EV" || { cat "$EV"; kill "$ev"; false; }
	kill "$ev"
	watch_stop
	# and a warm build agrees: nothing left to do, the outputs right
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output" "$stderr"; false; }
	line=$(printf '%s\n' "$output" | grep '"event":"build"')
	[ "$(json_field ran "$line")" = 0 ] || { echo "$output"; false; }
	output_is a.txt flooded
	output_is b.txt b
}

ping_seen() {
	: >src/flood/ping
	sleep 0.05
	grep -q 'changed .*src/flood/ping' "$EV"
}

# quiet: kiln events printed nothing for longer than the watch's stall,
# and the last it printed ends a build
quiet() {
	local n
	n=$(wc -l <"$EV")
	sleep 2.5
	[ "$(wc -l <"$EV")" -eq "$n" ] && tail -n 1 "$EV" | grep -q ' build-done '
}

@test "kiln watch that fell behind its build's end builds again after the overflow" {
	live_project
	# a.txt's tool waits while $HOLD exists, so that the watch's build can
	# be caught running
	HOLD="$BATS_TEST_TMPDIR/hold"
	sed -i "s|^tools:\$|tools:\\n  gated: { shell: true, run: 'while [ -e $HOLD ]; do sleep 0.05; done; cat \"\${in}\" > \"\${out}\"' }|" kiln.yaml
	sed -i '0,/tool: copy/s//tool: gated/' kiln.yaml
	grep -q "gated: .*$HOLD" kiln.yaml || { cat kiln.yaml; false; }
	"$KILND" --project . --event-buffer 16
	watch_start
	EV="$BATS_TEST_TMPDIR/ev.out"
	"$KILN" events --timeout 60 >"$EV" 2>"$EV.err" 3>&- &
	ev=$!
	wait_for subscribers_are 2
	touch "$HOLD"
	printf 'two\n' >src/a.txt
	wait_for grep -q ' started .*a.txt' "$EV" || { cat "$EV" "$W"; kill "$ev"; false; }
	kill "$ev"
	# the watch sleeps through its build's end and 40 more events: the
	# ring of 16 loses that end
	kill -STOP "$watch_pid"
	rm "$HOLD"
	wait_for output_is a.txt two || { kill -CONT "$watch_pid"; false; }
	for i in $(seq 1 40); do echo "file $i" >"$BATS_TEST_TMPDIR/f.$i"; done
	"$KILN" put "$BATS_TEST_TMPDIR"/f.* >/dev/null
	kill -CONT "$watch_pid"
	# still live: the next save is built (it waited for the lost end)
	printf 'three\n' >src/a.txt
	wait_for output_is a.txt three || { cat "$W" "$W.err"; false; }
	grep -q 'events were lost' "$W.err" || { cat "$W" "$W.err"; false; }
	watch_stop
}

# self_writer_project HOW: a.txt's tool copies its input, then changes it
# (HOW: 'touch' or 'append'), which kiln catches as a write outside its
# scratch folder.
self_writer_project() {
	live_project
	if [ "$1" = touch ]; then
		sed -i 's|^tools:$|tools:\n  selfw: { shell: true, run: '"'"'cat "${in}" > "${out}"; touch "${in}"'"'"' }|' kiln.yaml
	else
		sed -i 's|^tools:$|tools:\n  selfw: { shell: true, run: '"'"'cat "${in}" > "${out}"; echo x >> "${in}"'"'"' }|' kiln.yaml
	fi
	sed -i '/url: a.txt/{n;s/tool: copy/tool: selfw/}' kiln.yaml
	grep -q 'tool: selfw' kiln.yaml || { cat kiln.yaml; false; }
}

# builds_of W: how many builds kiln watch's output in W reported.
builds_of() {
	grep -c '"event":"build"' "$1" || true
}

# builds_at_least N: kiln watch's output in $W reported N builds or more.
builds_at_least() {
	[ "$(builds_of "$W")" -ge "$1" ]
}

@test "a tool that appends to its own input fails once: kiln watch does not loop, and a later edit is built" {
	self_writer_project append
	# the tool's change reaches the edits thread after its run ended, as
	# it does when the tool ends at once (an edit seen while the tool
	# still runs cancels it: runs again, at most EDITS_MAX_CANCELS times)
	export KILN_TEST_HOLD_EDITS_MS=500
	watch_start
	grep -q '"url":"a.txt".*"result":"failed".*wrote outside its scratch folder: src/a.txt' "$W" ||
		{ cat "$W"; false; }
	# its write is reported once the tool ended and kiln knows whose it
	# was: not at all
	sleep 3 # a loop would run dozens of builds in this time (the subject)
	n=$(builds_of "$W")
	[ "$n" -eq 1 ] || { echo "$n builds"; cat "$W"; false; }
	[ "$(wc -l <src/a.txt)" -eq 2 ] || { echo "the tool ran again:"; cat src/a.txt; false; }
	# and a build that comes anyway finds the failure standing, the
	# tool not run again
	run "$KILN" build --json a.txt
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -q '"url":"a.txt".*"reason":"not run again: its last run wrote src/a.txt' ||
		{ echo "$output"; false; }
	[ "$(wc -l <src/a.txt)" -eq 2 ] || { echo "the tool ran again:"; cat src/a.txt; false; }
	sleep 1 # (that build's summary may reach kiln watch: no build of its own)
	n=$(builds_of "$W")
	# an artist's edit of that file is an edit: built (and failed again)
	runs=$(grep -c '"url":"a.txt".*"reason":"in src/a.txt changed' "$W" || true)
	printf 'edited\n' >>src/a.txt
	wait_for sh -c "[ \$(grep -c '\"url\":\"a.txt\".*\"reason\":\"in src/a.txt changed' '$W') -gt $runs ]" ||
		{ cat "$W"; false; }
	wait_for builds_at_least $((n + 1)) || { cat "$W"; false; }
	sleep 3 # as above
	[ "$(builds_of "$W")" -eq $((n + 1)) ] || { cat "$W"; false; }
	watch_stop
	# b.txt was never disturbed
	[ "$(runs_of b.txt)" -eq 1 ]
}

@test "a tool that touches its own input: kiln build -k prints its FAILED block once, and decides nothing again" {
	self_writer_project touch
	# the tool's change reaches the edits thread after the step failed
	# (on a busy machine it did by itself: 8 decisions again, 9 blocks)
	export KILN_TEST_HOLD_EDITS_MS=500
	# (-k: a build stopped by its failure decides nothing again anyway)
	run "$KILN" build -k
	[ "$(printf '%s\n' "$output" | grep -c '^FAILED a.txt')" -eq 1 ] || { echo "$output"; false; }
	! grep -q 'files were edited while it ran' .kiln/kilnd.log || { cat .kiln/kilnd.log; false; }
	# and the next build does not run it again (nothing it reads changed
	# since its run): the same failure, at once
	sleep 1 # the held edit is applied
	run "$KILN" build -k
	[ "$(printf '%s\n' "$output" | grep -c '^FAILED a.txt')" -eq 1 ] || { echo "$output"; false; }
	printf '%s\n' "$output" | grep -q 'wrote outside its scratch folder: src/a.txt' ||
		{ echo "$output"; false; }
	# a real edit runs it again
	printf 'two\n' >src/a.txt
	run "$KILN" build --json
	printf '%s\n' "$output" | grep -q '"url":"a.txt".*"reason":"in src/a.txt changed' ||
		{ echo "$output"; false; }
}

@test "kiln watch's own output in the project beside a tool that wrote its input: the failure is printed once, no loop" {
	self_writer_project append
	# a.txt alone: any step that fails anew in every build feeds kiln
	# watch's output back to it, which is not the subject here (b.txt's
	# cp did so once in a TSan run beside two other suites, for a reason
	# not found: the case passed alone and in the whole suite under TSan)
	sed -i '/url: b.txt/,+2d' kiln.yaml
	! grep -q b.txt kiln.yaml || { cat kiln.yaml; false; }
	export KILN_TEST_HOLD_EDITS_MS=500   # (as in the case above)
	"$KILN" watch >watch.log 2>&1 &
	watch_pid=$!
	wait_for grep -q '^profile pc:' watch.log || { cat watch.log; false; }
	# each line kiln watch writes is a change in the project, which
	# builds again: the failure, reported again without a run of the
	# tool, must print nothing, or that is a loop
	sleep 3 # a loop would print dozens of blocks in this time (the subject)
	[ "$(grep -c '^FAILED a.txt' watch.log)" -eq 1 ] || { cat watch.log; false; }
	[ "$(grep -c '^profile pc:' watch.log)" -eq 1 ] || { cat watch.log; false; }
	[ "$(wc -l <src/a.txt)" -eq 2 ] || { echo "the tool ran again:"; cat src/a.txt; false; }
	# an edit runs the tool again: its failure is news
	printf 'edited\n' >>src/a.txt
	wait_for sh -c "[ \$(grep -c '^FAILED a.txt' watch.log) -eq 2 ]" || { cat watch.log; false; }
	sleep 3 # as above
	[ "$(grep -c '^FAILED a.txt' watch.log)" -eq 2 ] || { cat watch.log; false; }
	watch_stop
}
