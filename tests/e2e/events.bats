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
hash_of() {
	xxh128sum "$1" | cut -d' ' -f1
}

@test "a live subscriber sees every put as a blob-stored event, in order" {
	"$KILN" status >/dev/null
	"$KILN" events --count 3 >ev.out 3>&- &
	ev=$!
	wait_for subscribed 1
	for f in a b c; do echo "$f" >$f; done
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
	"$KILN" status >/dev/null
	for i in $(seq 1 100); do echo "blob $i" >f.$i; done
	for s in 1 2 3 4; do "$KILN" events --count 100 >ev.$s 3>&- & done
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
	"$KILN" status >/dev/null
	for f in a b c d e; do echo "$f" >$f; done
	"$KILN" events --count 1 >first.out 3>&- &
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
	"$KILN" events >ev.out 2>ev.err 3>&- &
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
	"$KILN" status >/dev/null
	"$KILN" events --count 1 --json >ev.out 3>&- &
	ev=$!
	wait_for subscribed 1
	printf 'not a protobuf' >junk.bin
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
	"$KILN" status >/dev/null
	"$KILN" events --timeout 60 "$@" >ev.out 2>ev.err 3>&- &
	ev=$!
	wait_for subscribed 1
	BUILD_STATUS=0
	BUILD=$("$KILN" build -k --json 2>build.err) || BUILD_STATUS=$?
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
