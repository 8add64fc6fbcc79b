#!/usr/bin/env bats
# events.bats — the daemon's event stream through the real kiln events:
# live delivery, resuming after a disconnect with the last sequence number,
# a subscriber that stops reading, and a daemon that restarted.
#
# Events come from real work: every blob put through the daemon publishes a
# blob-stored event, and the daemon's warnings are log events.

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

@test "kiln events rejects a malformed --since and needs no daemon to say so" {
	run "$KILN" events --since nonsense
	[ "$status" -eq 2 ]
	[[ "$output" == *"--since 'nonsense': expected EPOCH:SEQ"* ]]
	[ ! -e .kiln/kilnd.pid ]
}
