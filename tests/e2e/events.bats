#!/usr/bin/env bats
# events.bats — the daemon's event stream through the real kiln events:
# live delivery, resuming after a disconnect with the last sequence number,
# a subscriber that stops reading, and a daemon that restarted.
#
# Events come from real work: every blob put through the daemon publishes a
# blob-stored event, the daemon's warnings are log events, and a kiln build
# publishes a step event per step that did something and a build-done event.

bats_require_minimum_version 1.5.0

load daemon_helpers

# subscribed N: the daemon reports N subscriptions.
subscribed() {
	[ "$(status_field subscribers)" = "$1" ]
}

# hash_of FILE
# outside NAME: where a subscriber's output goes, outside the project, with
# NAME in the project a link to it. A file written in the project is a
# change the daemon reports: a `changed` event among those counted.
outside() {
	ln -sf "$BATS_TEST_TMPDIR/$1" "$1"
	printf '%s' "$BATS_TEST_TMPDIR/$1"
}

build_queued() {
	[ "$(status_field build_queue)" -gt 0 ]
}

hash_of() {
	xxh128sum "$1" | cut -d' ' -f1
}

@test "a live subscriber sees every put as a blob-stored event, in order" {
	# files written before the daemon starts: a change its watch saw
	# would be an event too
	for f in a b c; do echo "$f" >$f; done
	"$KILN" status >/dev/null
	"$KILN" events --count 3 >"$(outside ev.out)" 3>&- &
	ev=$!
	wait_for subscribed 1
	"$KILN" put a b c >/dev/null
	wait "$ev"
	[ "$(wc -l <ev.out)" -eq 3 ] || { cat ev.out; false; }
	run cut -d' ' -f2,3 ev.out
	[ "$output" = "blob-stored $(hash_of a)
blob-stored $(hash_of b)
blob-stored $(hash_of c)" ] || { cat ev.out; false; }
	s1=$(sed -n '1s/^[0-9a-f]*:\([0-9]*\) .*/\1/p' ev.out)
	[ "$(sed -n '3s/^[0-9a-f]*:\([0-9]*\) .*/\1/p' ev.out)" -eq $((s1 + 2)) ]
}

@test "four subscribers that keep up each get all of 100 events, in order, none twice" {
	for i in $(seq 1 100); do echo "blob $i" >f.$i; done
	"$KILN" status >/dev/null
	for s in 1 2 3 4; do "$KILN" events --count 100 >"$(outside ev.$s)" 3>&- & done
	wait_for subscribed 4
	"$KILN" put $(for i in $(seq 1 100); do echo f.$i; done) >put.out
	wait
	cut -d' ' -f1 put.out >want
	for s in 1 2 3 4; do
		cut -d' ' -f3 ev.$s | diff want - || { echo "subscriber $s differs"; false; }
		first=$(sed -n '1s/^[0-9a-f]*:\([0-9]*\) .*/\1/p' ev.$s)
		last=$(sed -n '100s/^[0-9a-f]*:\([0-9]*\) .*/\1/p' ev.$s)
		[ $((last - first)) -eq 99 ]
	done
}

@test "a client that reconnects with its last sequence number gets exactly the events it missed" {
	# the files exist before the daemon: a change it saw could be the
	# first event
	for f in a b c d e; do echo "$f" >$f; done
	"$KILN" status >/dev/null
	"$KILN" events --count 1 >"$(outside first.out)" 3>&- &
	ev=$!
	wait_for subscribed 1
	"$KILN" put a >/dev/null
	wait "$ev" # it saw a, printed its cursor and disconnected
	cursor=$(cut -d' ' -f1 first.out)
	[ "$(cut -d' ' -f3 first.out)" = "$(hash_of a)" ]
	"$KILN" put b c d >/dev/null # nobody listening
	run --separate-stderr "$KILN" events --since "$cursor" --timeout 1
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	epoch=${cursor%%:*} seq=${cursor##*:}
	[ "$output" = "$epoch:$((seq + 1)) blob-stored $(hash_of b) 2
$epoch:$((seq + 2)) blob-stored $(hash_of c) 2
$epoch:$((seq + 3)) blob-stored $(hash_of d) 2" ] || { echo "got:"; echo "$output"; false; }
	"$KILN" put e >/dev/null
	run "$KILN" events --since "$epoch:$((seq + 3))" --timeout 1
	[ "$output" = "$epoch:$((seq + 4)) blob-stored $(hash_of e) 2" ] || { echo "$output"; false; }
}

@test "a subscriber that stops reading gets an overflow event; the daemon never waits for it" {
	"$KILND" --project . --event-buffer 16
	"$KILN" events >"$(outside ev.out)" 2>"$(outside ev.err)" 3>&- &
	ev=$!
	wait_for subscribed 1
	kill -STOP "$ev"
	for i in $(seq 1 40); do echo "file $i" >f.$i; done
	timeout 60 "$KILN" put $(for i in $(seq 1 40); do echo f.$i; done) >/dev/null
	run timeout 5 "$KILN" status --json # answers while the subscriber sleeps
	[ "$status" -eq 0 ]
	[ "$(json_field events_held "$output")" -eq 16 ]
	kill -CONT "$ev"
	"$KILN" stop >/dev/null
	wait "$ev" || { cat ev.err; false; }
	over=$(grep -n ' overflow lost ' ev.out) || { echo "no overflow in:"; cat ev.out; false; }
	# Lost first..last, then every event from last+1 on, without a gap, up
	# to the daemon's stopping event.
	range=${over##* lost }
	first=${range%-*} last=${range#*-}
	[ "$first" -ge 2 ] && [ "$last" -ge "$first" ]
	line=${over%%:*}
	expect=$((last + 1))
	tail -n +$((line + 1)) ev.out | while read -r cur rest; do
		[ "${cur##*:}" -eq "$expect" ] || { echo "seq ${cur##*:}, expected $expect"; exit 1; }
		expect=$((expect + 1))
	done
	tail -1 ev.out | grep -q ' stopping stop request$'
	[ "$(wc -l <ev.out)" -lt 40 ]
}

@test "resuming after the daemon restarted starts with an overflow new-epoch event" {
	"$KILN" status >/dev/null
	echo x >x
	"$KILN" put x >/dev/null
	old="$(status_field event_epoch):$(status_field event_seq)"
	"$KILN" stop >/dev/null
	"$KILN" status >/dev/null # a new daemon, a new epoch
	"$KILN" put x >/dev/null
	run "$KILN" events --since "$old" --timeout 1
	new=$(status_field event_epoch)
	[ "$new" != "${old%%:*}" ]
	[ "$(sed -n 1p <<<"$output")" = "$new:0 overflow new-epoch" ] || { echo "$output"; false; }
	grep -q "^$new:[0-9]* blob-stored $(hash_of x) 2\$" <<<"$output"
}

@test "the daemon's warnings reach subscribers as log events" {
	printf 'not a protobuf' >junk.bin
	"$KILN" status >/dev/null
	"$KILN" events --count 1 --json >"$(outside ev.out)" 3>&- &
	ev=$!
	wait_for subscribed 1
	send_raw junk.bin >/dev/null
	wait "$ev"
	grep -q '"type":"log","level":"warning","text":"refused a malformed request of 14 bytes' ev.out ||
		{ cat ev.out; false; }
}

# write_build_project: a step that copies src/a.txt with cp, and one whose
# tool says two lines on stderr (one with quotes) and exits 3.
write_build_project() {
	mkdir -p src
	printf 'alpha\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  breaks: { run: [sh, -c, 'echo cannot frobnicate >&2; echo "at \"line\" 2" >&2; exit 3', "${in}"] }
assets:
  - url: a.txt
    tool: copy
    inputs: [src/a.txt]
  - url: broken.txt
    tool: breaks
    inputs: [src/a.txt]
YAML
}

# watch_build ARGS...: with `kiln events ARGS` subscribed, run
# `kiln build -k --json`; when a build-done event has been printed, stop
# the daemon (which ends kiln events). Leaves kiln events' output in
# ev.out, the build's in $BUILD, its status in $BUILD_STATUS, the hash kiln
# build reported for a.txt's output in $HASH and the build's id in $ID.
watch_build() {
	local t=$BATS_TEST_TMPDIR
	"$KILN" status >/dev/null
	# what kiln events prints goes outside the project (as in
	# follow_builds): a file written in the project while the build runs
	# is an edit, and a loaded machine let the build see it and decide a
	# step again (an extra step line)
	ln -sf "$t/ev.out" ev.out
	ln -sf "$t/ev.err" ev.err
	ln -sf "$t/build.err" build.err
	"$KILN" events --timeout 60 "$@" >"$t/ev.out" 2>"$t/ev.err" 3>&- &
	ev=$!
	wait_for subscribed 1
	BUILD_STATUS=0
	BUILD=$("$KILN" build -k --json 2>"$t/build.err") || BUILD_STATUS=$?
	HASH=$(printf '%s\n' "$BUILD" | grep '"url":"a.txt"' |
	       sed -n 's/.*"hash":"\([0-9a-f]*\)".*/\1/p')
	ID=$(printf '%s\n' "$BUILD" | sed -n 's/^{"event":"build","build":\([0-9]*\),.*/\1/p')
	wait_for grep -q 'build-done' ev.out || { cat ev.out; false; }
	"$KILN" stop >/dev/null
	wait "$ev" || { echo "kiln events failed:"; cat ev.err; false; }
}

# consecutive FILE: every line of FILE starts with a cursor, each one more
# than the line before (one line per event, no continuation lines).
consecutive() {
	local cur rest expect=""
	while read -r cur rest; do
		[[ "$cur" =~ ^[0-9a-f]{16}:[0-9]+$ ]] || { echo "not a cursor: '$cur $rest'"; return 1; }
		[ -z "$expect" ] || [ "${cur##*:}" -eq "$expect" ] ||
			{ echo "seq ${cur##*:}, expected $expect"; return 1; }
		expect=$((${cur##*:} + 1))
	done <"$1"
}

@test "a build shows as one step line per step (outputs, failure, duration) and a build-done line with the counts" {
	write_build_project
	watch_build
	[ "$BUILD_STATUS" -eq 1 ] || { echo "build status $BUILD_STATUS"; cat build.err; false; }
	[ -n "$HASH" ] && [ "$HASH" = "$(hash_of build/default/a.txt)" ] ||
		{ echo "kiln build said '$HASH'"; echo "$BUILD"; false; }
	consecutive ev.out || { cat ev.out; false; }
	[ "$(grep -c ' step ' ev.out)" -eq 2 ] || { cat ev.out; false; }
	# ran: the reason in quotes, the output as NAME=HASH PATH SIZE
	grep -qE "^[0-9a-f]{16}:[0-9]+ step default a\.txt ran \"[^\"]+\" out=$HASH build/default/a\.txt 6 [0-9]+\.[0-9]{3}s warnings=0\$" ev.out ||
		{ echo "no ran line for a.txt in:"; cat ev.out; false; }
	# failed: exit status, and the tool's stderr escaped onto the line
	line=$(grep ' step default broken\.txt failed "' ev.out) || { cat ev.out; false; }
	[[ "$line" =~ \ exit=3\ error=\"[^\"]*cannot\ frobnicate\\nat\ \\\"line\\\"\ 2\\n\"\ [0-9]+\.[0-9]{3}s\ warnings=0$ ]] ||
		{ echo "failed line: $line"; false; }
	grep -qE "^[0-9a-f]{16}:[0-9]+ build-done $ID default total=2 ran=1 reused=0 failed=1 skipped=0 cancelled=0 would-run=0 [0-9]+\.[0-9]{3}s\$" ev.out ||
		{ echo "no build-done $ID line in:"; cat ev.out; false; }
	tail -1 ev.out | grep -q ' stopping stop request$'
}

@test "an undone change reuses the earlier result: a reused step line with the first build's output" {
	write_build_project
	sed -i '/broken/,$d' kiln.yaml
	"$KILN" build >/dev/null
	first=$(hash_of build/default/a.txt)
	printf 'changed\n' >src/a.txt
	"$KILN" build >/dev/null
	printf 'alpha\n' >src/a.txt
	watch_build
	[ "$BUILD_STATUS" -eq 0 ] || { cat build.err; false; }
	grep -qE "^[0-9a-f]{16}:[0-9]+ step default a\.txt reused \"reused [^\"]+\" out=$first build/default/a\.txt 6 [0-9.]+s warnings=0\$" ev.out ||
		{ cat ev.out; false; }
	grep -q " build-done $ID default total=1 ran=0 reused=1 failed=0 " ev.out || { cat ev.out; false; }
}

@test "a URL with spaces and quotes stays one word on a step line, escaped" {
	write_build_project
	sed -i '/broken/,$d' kiln.yaml
	sed -i 's/url: a\.txt/url: '\''my "odd" a.txt'\''/' kiln.yaml
	watch_build
	[ "$BUILD_STATUS" -eq 0 ] || { cat build.err; false; }
	grep -qF ' step default my\x20\"odd\"\x20a.txt ran "' ev.out || { cat ev.out; false; }
	grep -qF ' build/default/my\x20\"odd\"\x20a.txt 6 ' ev.out || { cat ev.out; false; }
	[ -f 'build/default/my "odd" a.txt' ]
}

@test "with --json every event of a build is one JSON object holding all its fields" {
	write_build_project
	watch_build --json
	[ "$BUILD_STATUS" -eq 1 ] && [ -n "$HASH" ] && [ -n "$ID" ] || { echo "$BUILD"; false; }
	HASH=$HASH ID=$ID python3 - ev.out <<'PY' || { cat ev.out; false; }
import json, os, sys
evs = []
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    try:
        evs.append(json.loads(line))
    except ValueError as e:
        sys.exit("line %d is not JSON (%s): %r" % (n, e, line))
steps = {e["url"]: e for e in evs if e["type"] == "step"}
done = [e for e in evs if e["type"] == "build-done"]
build = int(os.environ["ID"])
want = {"a.txt": {"builds": [build], "profile": "default", "result": "ran",
                  "outputs": [{"name": "out", "hash": os.environ["HASH"],
                               "size": 6, "path": "build/default/a.txt"}],
                  "exit_code": 0, "signal": 0, "error": "", "warnings": []},
        "broken.txt": {"builds": [build], "result": "failed", "outputs": [],
                       "exit_code": 3, "signal": 0, "warnings": []}}
for url, fields in want.items():
    got = steps.get(url) or sys.exit("no step event for %s in %r" % (url, evs))
    for k, v in fields.items():
        if got.get(k) != v:
            sys.exit("%s: %s is %r, expected %r" % (url, k, got.get(k), v))
    for k in ("epoch", "seq", "time_ns", "reason", "log", "duration_ns", "done", "total"):
        if k not in got:
            sys.exit("%s: no %s in %r" % (url, k, got))
err = steps["broken.txt"]["error"]
if 'cannot frobnicate\nat "line" 2\n' not in err:
    sys.exit("broken.txt: error %r lacks the tool's stderr" % err)
if len(done) != 1:
    sys.exit("%d build-done events in %r" % (len(done), evs))
counts = {"build": build, "profile": "default", "total": 2, "ran": 1, "reused": 0,
          "failed": 1, "skipped": 0, "cancelled": 0, "would_run": 0, "error": ""}
for k, v in counts.items():
    if done[0].get(k) != v:
        sys.exit("build-done: %s is %r, expected %r" % (k, done[0].get(k), v))
for k in ("duration_ns", "files_statted", "index"):
    if k not in done[0]:
        sys.exit("build-done: no %s in %r" % (k, done[0]))
PY
}

@test "kiln events rejects a malformed --since and needs no daemon to say so" {
	run "$KILN" events --since nonsense
	[ "$status" -eq 2 ]
	[[ "$output" == *"--since 'nonsense': expected EPOCH:SEQ"* ]]
	[ ! -e .kiln/kilnd.pid ]
}

# ---- filters: the daemon sends a subscriber only the steps it names -------

# write_filter_project: two profiles, and a copy step per source file:
# art/a, art/b, art/c and audio/x, audio/y.
write_filter_project() {
	mkdir -p src/art src/audio
	for f in art/a art/b art/c audio/x audio/y; do echo "$f" >src/$f.txt; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
  ps5: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - match: "src/art/*.txt"
    url: "art/${match.name}"
    tool: copy
  - match: "src/audio/*.txt"
    url: "audio/${match.name}"
    tool: copy
YAML
}

# follow_builds 'EVENTS ARGS' BUILD-ARGS...: with `kiln events EVENTS
# ARGS` subscribed (split on spaces), run `kiln build BUILD-ARGS` for each
# BUILD-ARGS, then stop the daemon (which ends kiln events, after the
# events of the builds). kiln events' output in ev.out.
follow_builds() {
	local args=$1 b
	shift
	"$KILN" status >/dev/null
	# what kiln events prints goes outside the project (ev.out links to it):
	# a file written in the project while a build runs is an edit the
	# build must look at, and step starts are printed while it runs
	ln -sf "$BATS_TEST_TMPDIR/ev.out" ev.out
	ln -sf "$BATS_TEST_TMPDIR/ev.err" ev.err
	ln -sf "$BATS_TEST_TMPDIR/build.err" build.err
	# shellcheck disable=SC2086
	"$KILN" events --timeout 60 $args >"$BATS_TEST_TMPDIR/ev.out" 2>"$BATS_TEST_TMPDIR/ev.err" 3>&- &
	ev=$!
	wait_for subscribed 1
	for b in "$@"; do
		# shellcheck disable=SC2086
		"$KILN" build $b >/dev/null 2>"$BATS_TEST_TMPDIR/build.err" || { cat build.err; return 1; }
	done
	"$KILN" stop >/dev/null
	wait "$ev" || { echo "kiln events failed:"; cat ev.err; return 1; }
}

# step_urls FILE: "PROFILE URL" of each step line, sorted.
step_urls() {
	sed -n 's/^[0-9a-f]*:[0-9]* step \([^ ]*\) \([^ ]*\) .*/\1 \2/p' "$1" | sort
}

# increasing FILE: every line's seq is larger than the line before's.
increasing() {
	local cur rest last=0
	while read -r cur rest; do
		[ "${cur##*:}" -gt "$last" ] || { echo "seq ${cur##*:} after $last"; return 1; }
		last=${cur##*:}
	done <"$1"
}

@test "kiln events with globs gets only the steps whose URL matches, from a build of several steps" {
	write_filter_project
	follow_builds "art/a audio/*" "-p pc"
	[ "$(step_urls ev.out)" = "pc art/a
pc audio/x
pc audio/y" ] || { echo "steps seen:"; cat ev.out; false; }
	# the build's end and the daemon stopping are not steps: they come
	grep -qE ' build-done [0-9]+ pc total=5 ran=5 ' ev.out || { cat ev.out; false; }
	tail -1 ev.out | grep -q ' stopping stop request$' || { cat ev.out; false; }
	# the left-out events are gaps in the numbers, not losses
	increasing ev.out || { cat ev.out; false; }
	! grep -q ' overflow ' ev.out || { cat ev.out; false; }
}

@test "kiln events -p gets only that profile's steps and build ends" {
	write_filter_project
	follow_builds "-p ps5 art/**" "-p pc" "-p ps5" "-p pc art/a"
	[ "$(step_urls ev.out)" = "ps5 art/a
ps5 art/b
ps5 art/c" ] || { echo "steps seen:"; cat ev.out; false; }
	[ "$(grep -c ' build-done ' ev.out)" -eq 1 ] || { cat ev.out; false; }
	grep -qE ' build-done [0-9]+ ps5 total=5 ' ev.out || { cat ev.out; false; }
	tail -1 ev.out | grep -q ' stopping stop request$' || { cat ev.out; false; }
}

@test "a filter the daemon refuses ends kiln events with status 2 and says why; the daemon goes on" {
	"$KILN" status >/dev/null
	run --separate-stderr "$KILN" events --timeout 1 $(seq -f 'art/%g' 1 17)
	[ "$status" -eq 2 ] || { echo "status $status: $stderr"; false; }
	[[ "$stderr" == *"the event filter has 17 URL globs; at most 16"* ]] || { echo "$stderr"; false; }
	run --separate-stderr "$KILN" events --timeout 1 'art/[ab'
	[ "$status" -eq 2 ] && [[ "$stderr" == *"the event filter's URL glob 'art/[ab': "* ]] ||
		{ echo "status $status: $stderr"; false; }
	run --separate-stderr "$KILN" events --timeout 1 "$(head -c 1025 /dev/zero | tr '\0' x)"
	[ "$status" -eq 2 ] && [[ "$stderr" == *"URL glob 1 is 1025 bytes long; at most 1024"* ]] ||
		{ echo "status $status: $stderr"; false; }
	run --separate-stderr "$KILN" events --timeout 1 -p "$(head -c 256 /dev/zero | tr '\0' p)"
	[ "$status" -eq 2 ] && [[ "$stderr" == *"profile is 256 bytes long; at most 255"* ]] ||
		{ echo "status $status: $stderr"; false; }
	# any client, not only kiln: a raw request with a thousand globs
	{
		echo 'version: 1 subscribe {'
		for i in $(seq 1 1000); do echo " urls: \"a/**/b/**/c/$i\""; done
		echo '}'
	} | encode_request >hostile.bin
	run send_raw hostile.bin
	[[ "$output" == *"status: STATUS_BAD_REQUEST"* ]] &&
		[[ "$output" == *'error: "the event filter has 1000 URL globs; at most 16"'* ]] ||
		{ echo "reply: $output"; false; }
	[ "$(status_field subscribers)" = 0 ]
	# and the limits themselves are accepted
	run --separate-stderr "$KILN" events --timeout 1 $(seq -f 'art/%g' 1 16)
	[ "$status" -eq 0 ] || { echo "status $status: $stderr"; false; }
}

@test "a filtered subscriber that falls behind is not told it lost the events its filter left out" {
	write_filter_project
	for i in $(seq 1 30); do echo "$i" >src/audio/n$i.txt; done
	"$KILND" --project . --event-buffer 8
	"$KILN" events 'art/*' >"$(outside filtered.out)" 2>"$(outside filtered.err)" 3>&- &
	filtered=$!
	"$KILN" events >"$(outside all.out)" 2>"$(outside all.err)" 3>&- &
	all=$!
	wait_for subscribed 2
	kill -STOP "$filtered" "$all"
	"$KILN" build -p pc 'audio/*' >/dev/null # 32 step events and a build's end
	kill -CONT "$filtered" "$all"
	"$KILN" stop >/dev/null
	wait "$filtered" || { cat filtered.err; false; }
	wait "$all" || { cat all.err; false; }
	# the unfiltered one lost events; the filtered one lost none it wanted
	grep -q ' overflow lost ' all.out || { echo "no overflow in:"; cat all.out; false; }
	! grep -q ' overflow ' filtered.out || { cat filtered.out; false; }
	! grep -q ' step ' filtered.out || { cat filtered.out; false; }
	grep -qE ' build-done [0-9]+ pc total=32 ' filtered.out || { cat filtered.out; false; }
	tail -1 filtered.out | grep -q ' stopping stop request$'
}

@test "a filtered subscriber resumes with --since: the matching events it missed, and only those" {
	write_filter_project
	"$KILN" status >/dev/null
	# art/a's tool starts, then its step ends; what kiln events prints goes
	# outside the project (first.out links to it): its first line, written
	# in the project, would be a change, the second event a filter passes
	"$KILN" events --count 2 art/a >"$(outside first.out)" 3>&- &
	ev=$!
	wait_for subscribed 1
	"$KILN" build -p pc >/dev/null
	wait "$ev"
	grep -q ' started pc art/a ' first.out || { cat first.out; false; }
	grep -q ' step pc art/a ran ' first.out || { cat first.out; false; }
	cursor=$(tail -n 1 first.out | cut -d' ' -f1)
	# nobody listening: art/a and audio/x change, and are built again
	echo changed >src/art/a.txt
	echo changed >src/audio/x.txt
	"$KILN" build -p pc >/dev/null
	run --separate-stderr "$KILN" events --since "$cursor" --timeout 1 art/a
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	printf '%s\n' "$output" >resumed.out
	[ "$(step_urls resumed.out)" = "pc art/a" ] || { cat resumed.out; false; }
	[ "$(grep -c ' build-done ' resumed.out)" -eq 2 ] || { cat resumed.out; false; }
	! grep -q ' overflow ' resumed.out || { cat resumed.out; false; }
	grep -q "^${cursor%%:*}:[0-9]* step pc art/a ran \"" resumed.out
	increasing resumed.out || { cat resumed.out; false; }
	[ "$(sed -n '1s/^[0-9a-f]*:\([0-9]*\) .*/\1/p' resumed.out)" -gt "${cursor##*:}" ]
	# unfiltered, the same resume also shows what the filter left out
	run "$KILN" events --since "$cursor" --timeout 1
	grep -q ' step pc audio/x ran ' <<<"$output" || { echo "$output"; false; }
}

@test "kiln build that falls behind its own events says lines were lost, and ends with the daemon's summary" {
	mkdir -p src
	HOLD="$BATS_TEST_TMPDIR/hold"
	{
		printf 'kiln: 1\nproject: t\nsources: [src]\nprofiles:\n  pc: {}\n'
		printf 'tools:\n  gated: { shell: true, run: '\''while [ -e %s ]; do sleep 0.05; done; cat "${in}" > "${out}"'\'' }\nassets:\n' "$HOLD"
		for i in $(seq 1 40); do
			echo "$i" >src/f$i.txt
			printf '  - url: f%s.txt\n    tool: gated\n    inputs: [src/f%s.txt]\n' "$i" "$i"
		done
	} >kiln.yaml
	"$KILND" --project . --event-buffer 8
	touch "$HOLD"
	"$KILN" build >"$(outside b.out)" 2>"$(outside b.err)" 3>&- &
	b=$!
	# its steps wait at the gate: the build was asked for and runs
	wait_for build_queued
	kill -STOP "$b"
	rm "$HOLD"
	wait_for sh -c '[ "$(ls build/pc 2>/dev/null | grep -c "^f[0-9]*.txt$")" -eq 40 ]'
	kill -CONT "$b"
	rc=0
	wait "$b" || rc=$?
	[ "$rc" -eq 0 ] || { echo "exit $rc"; cat b.out b.err; false; }
	grep -q 'events were lost' b.err || { cat b.out b.err; false; }
	grep -q '40 ran' b.out || { cat b.out b.err; false; }
}

@test "kiln events ends with an error when the daemon gives no answer at all (it used to poll for ever, or say 'no events')" {
	"$KILN" status >/dev/null
	pid=$(daemon_pid)
	"$KILN" events --timeout 5 >"$(outside ev.out)" 2>"$(outside ev.err)" 3>&- &
	ev=$!
	wait_for subscribed 1
	kill -STOP "$pid"
	rc=0
	wait "$ev" || rc=$?
	kill -CONT "$pid"
	[ "$rc" -eq 2 ] || { echo "exit $rc"; cat ev.out ev.err; false; }
	grep -q 'did not answer a poll' ev.err || { cat ev.err; false; }
}

@test "a subscriber busy between two polls when the daemon stops still gets the stopping event" {
	for i in $(seq 1 500); do echo "file $i" >"$BATS_TEST_TMPDIR/f.$i"; done
	"$KILN" status >/dev/null
	# kiln events writes into a pipe nobody reads yet: once it is full,
	# the client is stuck in a write, with no poll parked in the daemon
	mkfifo "$BATS_TEST_TMPDIR/evpipe"
	GO="$BATS_TEST_TMPDIR/go"
	sh -c 'while [ ! -e "$1" ]; do sleep 0.05; done; cat' sh "$GO" \
		<"$BATS_TEST_TMPDIR/evpipe" >"$(outside ev.out)" 3>&- &
	"$KILN" events --json >"$BATS_TEST_TMPDIR/evpipe" 2>"$(outside ev.err)" 3>&- &
	ev=$!
	wait_for subscribed 1
	"$KILN" put "$BATS_TEST_TMPDIR"/f.* >/dev/null
	sleep 1 # the pipe fills (64 KiB: about 300 of these lines)
	"$KILN" stop >/dev/null 3>&- &
	stopper=$!
	sleep 0.3 # the stop has begun (the subject: nothing parked then)
	touch "$GO" # the reader drains the pipe: the client polls again
	rc=0
	wait "$ev" || rc=$?
	wait "$stopper" || true
	[ "$rc" -eq 0 ] || { echo "exit $rc"; cat ev.err; tail -3 ev.out; false; }
	tail -1 ev.out | grep -q '"type":"stopping"' || { tail -3 ev.out; false; }
}
