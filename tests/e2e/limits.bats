#!/usr/bin/env bats
# limits.bats — what one client must not be able to do to the others: hold
# every worker by pipelining requests it never reads the replies of, leak
# subscriptions and uploads by hanging up at once, crowd in past
# --max-clients, or flood the log (and the event ring) with refused
# requests. The misbehaving clients are raw streams (bash's /dev/tcp,
# socat) speaking nng's SP framing by hand.

bats_require_minimum_version 1.5.0

load daemon_helpers

# A free-looking port for this case and a token, as in remote.bats.
limits_setup() {
	free_port 17
	head -c 24 /dev/urandom | base64 | tr -d '\n/+=' | head -c 32 >token
	echo >>token
}

# hog_open: connect fd $hog to the tcp listener and pipeline 200 requests
# for a 1 MiB blob on it (with the token), never reading a reply.
hog_open() {
	head -c 1048576 /dev/urandom >blob
	local h
	h=$("$KILN" put blob | cut -d' ' -f1)
	printf 'version: 1\ntoken: "%s"\nblob_get { id: "%s" }\n' "$(head -n 1 token)" \
		"$(printf '%s' "$h" | sed 's/../\\x&/g')" | encode_request >get.bin
	sp_tcp_msg get.bin >get.msg
	exec {hog}<>"/dev/tcp/127.0.0.1/$port"
	{ sp_header; for _ in $(seq 200); do cat get.msg; done; } >&"$hog"
}

# timed_status LIMIT_S: kiln status, given LIMIT_S seconds; sets status
# and ms (how long it took).
timed_status() {
	local t0
	t0=$(date +%s%N)
	run timeout "$1" "$KILN" status
	ms=$((($(date +%s%N) - t0) / 1000000))
}

# status_is NAME VALUE: that status field has that value now.
status_is() {
	[ "$(status_field "$1")" = "$2" ]
}

# bad_at_least N [URL]: the daemon counts N bad requests or more (asked
# with a 5 s limit: a stalled daemon fails the wait, not hangs it).
bad_at_least() {
	local bad
	bad=$(json_field bad_requests "$(timeout 5 "$KILN" status --json)")
	[ "${bad:-0}" -ge "$1" ]
}

# connected N: the daemon's log (kilnd -v) shows N connections admitted.
connected() {
	[ "$(grep -c 'client [0-9]* connected (' .kiln/kilnd.log)" -ge "$1" ]
}

# hog_stuck: the daemon's replies to the hog no longer move: its socket
# to the hog holds unsent bytes (the hog's receive buffer is full) and
# the hog's side holds the same unread bytes on two looks 0.2 s apart.
# Then each worker that takes a hog's request sits in its send.
hog_stuck() {
	local a b
	a=$(ss -Htn state established "( dport = :$port )" | awk '{ print $1 }')
	[ -n "$a" ] && [ "$a" -gt 0 ] || return 1
	sleep 0.2
	b=$(ss -Htn state established "( dport = :$port )" | awk '{ print $1 }')
	[ "$a" = "$b" ] &&
		[ "$(ss -Htn state established "( sport = :$port )" | awk '{ print $2 }')" -gt 0 ]
}

@test "a client pipelining requests it never reads does not stall the others" {
	limits_setup
	"$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file token
	t0=$SECONDS
	hog_open
	# the daemon has taken what it will of the 200: most are dropped
	wait_for bad_at_least 100 || { "$KILN" status --json; false; }
	# a stalled daemon never answers: the hog's requests are never read
	# (no bound in ms here, which a busy machine breaks)
	timed_status 20
	[ "$status" -eq 0 ] || { echo "status failed ($status) after ${ms} ms"; false; }
	# Past its 16 requests in progress the hog's requests were dropped,
	# counted, and logged a line a second at most: no more lines than
	# seconds the drops could have spanned, however slow the machine
	bad=$(status_field bad_requests)
	[ "$bad" -ge 100 ] || { echo "bad_requests $bad"; false; }
	n=$(grep -c 'dropped a request from client' .kiln/kilnd.log)
	[ "$n" -ge 1 ] && [ "$n" -le $((SECONDS - t0 + 2)) ] ||
		{ echo "$n lines in $((SECONDS - t0)) s"; grep dropped .kiln/kilnd.log; false; }
	exec {hog}>&-
	"$KILN" status >/dev/null
}

@test "a reply that cannot be delivered is given up after the send timeout" {
	limits_setup
	# Two workers: the hog's requests in progress can hold both.
	"$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file token \
		--workers 1 --max-subscribers 1
	hog_open
	wait_for hog_stuck || { ss -tn "( sport = :$port or dport = :$port )"; false; }
	timed_status 25
	[ "$status" -eq 0 ] || { echo "status failed ($status) after ${ms} ms"; false; }
	# (answered within its timeout: the 10 s give-up freed a worker; no
	# bound in ms, which a busy machine breaks)
	grep -q 'gave up a reply to client [0-9]* after 10 s' .kiln/kilnd.log
	exec {hog}>&-
}

# hang_ups ADDRESS: 20 rounds of peers that go away before the SP header
# exchange is over, to socat's ADDRESS (UNIX-CONNECT:... or TCP:...): one
# that sends nothing, one that sends half a header, one that sends a wrong
# header. Each makes the daemon's own header write or read fail; in nng
# 1.5.2 as Debian ships it the first kind stops the listener for good
# (nng issue #1518: every later client hangs until its timeout).
hang_ups() {
	for _ in $(seq 20); do
		socat -u FILE:/dev/null "$1" 2>/dev/null || true
		printf '\0SP' | socat -u STDIN "$1" 2>/dev/null || true
		printf 'GET / HTTP/1.0\r\n\r\n' | socat -u STDIN "$1" 2>/dev/null || true
	done
}

@test "peers that hang up during the handshake do not stop the ipc listener" {
	"$KILND" --project .
	"$KILN" status >/dev/null
	# One more that connects and says nothing, held open meanwhile.
	# (sleep 30: what holds it open until it is killed below)
	socat -u EXEC:'sleep 30' UNIX-CONNECT:.kiln/kilnd.sock 2>/dev/null &
	silent=$!
	hang_ups UNIX-CONNECT:.kiln/kilnd.sock
	timed_status 10
	kill "$silent" 2>/dev/null || true
	[ "$status" -eq 0 ] || { echo "status failed ($status) after ${ms} ms"; false; }
	# a wedged listener answers nobody: the timeout is the bound (a
	# bound in ms broke on a busy machine)
	# And again after the silent one has gone too.
	hang_ups UNIX-CONNECT:.kiln/kilnd.sock
	timed_status 10
	[ "$status" -eq 0 ] || { echo "second status failed ($status) after ${ms} ms"; false; }
}

@test "peers that hang up during the handshake do not stop the tcp listener" {
	limits_setup
	"$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file token
	hang_ups "TCP:127.0.0.1:$port"
	t0=$(date +%s%N)
	run --separate-stderr timeout 10 "$KILN" --connect "tcp://127.0.0.1:$port" \
		--token-file token status
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$status" -eq 0 ] || { echo "status failed ($status) after ${ms} ms: $stderr"; false; }
	# a wedged listener answers nobody: the timeout is the bound (a
	# bound in ms broke on a busy machine)
}

@test "connections that hang up right after subscribing or starting an upload leave nothing behind" {
	limits_setup
	"$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file token
	tok=$(head -n 1 token)
	printf 'version: 1\ntoken: "%s"\nsubscribe {}\n' "$tok" | encode_request >sub.bin
	printf 'version: 1\ntoken: "%s"\nblob_put {}\ndata: "abc"\n' "$tok" |
		encode_request >put.bin
	{ sp_header; sp_tcp_msg sub.bin; } >sub.msg
	{ sp_header; sp_tcp_msg put.bin; } >put.msg
	for _ in $(seq 8); do
		for _ in $(seq 40); do
			socat -u FILE:sub.msg "TCP:127.0.0.1:$port" 2>/dev/null
			socat -u FILE:put.msg "TCP:127.0.0.1:$port" 2>/dev/null
		done 3>&- &
	done
	wait
	# Each one was dropped when its connection closed, or never made.
	wait_for status_is subscribers 0 || { "$KILN" status --json; false; }
	wait_for status_is uploads 0 || { "$KILN" status --json; false; }
	run --separate-stderr timeout 10 "$KILN" --connect "tcp://127.0.0.1:$port" \
		--token-file token events --timeout 1
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
}

@test "--max-clients holds however many connections come, closing the idlest" {
	limits_setup
	"$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file token \
		--max-clients 3 --verbose
	# Three connections fill the daemon; each of five more takes the slot
	# of the one idle longest (an eviction once gave back a slot twice).
	# Each is admitted before the next comes, so idle ages follow the
	# order they came in.
	fds=()
	for i in 1 2 3 4 5 6 7 8; do
		exec {fd}<>"/dev/tcp/127.0.0.1/$port"
		fds+=("$fd")
		sp_header >&"$fd"
		wait_for connected "$i" || { cat .kiln/kilnd.log; false; }
	done
	n=$(ss -Htn state established "( sport = :$port )" | wc -l)
	[ "$n" -eq 3 ] || { echo "$n connections admitted"; ss -tn "( sport = :$port )"; false; }
	grep -q 'closed idle client [0-9]* to admit a new one' .kiln/kilnd.log
	for fd in "${fds[@]:0:6}"; do exec {fd}>&-; done
	# Two held, and kiln status's own.
	wait_for status_is clients 3 || { "$KILN" status --json; false; }
	for fd in "${fds[@]:6}"; do exec {fd}>&-; done
	wait_for status_is clients 1
}

@test "a flood of requests without the token logs a line a second, not one each" {
	limits_setup
	"$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file token
	printf 'version: 1\nstatus {}\n' | encode_request >status.bin
	seq0=$(status_field event_seq)
	t0=$(date +%s)
	for _ in $(seq 200); do
		send_raw status.bin "tcp://127.0.0.1:$port" >/dev/null
	done
	# Kept on purpose: the time is the subject. Past the log's 1 s
	# period the next refusal logs a line, with the count of those not
	# logged.
	sleep 1.1
	send_raw status.bin "tcp://127.0.0.1:$port" | grep -q STATUS_UNAUTHENTICATED
	s=$(($(date +%s) - t0 + 1))
	n=$(grep -c 'refused a status request from client' .kiln/kilnd.log)
	[ "$n" -ge 2 ] && [ "$n" -le $((s + 1)) ] ||
		{ echo "$n lines in $s s:"; grep refused .kiln/kilnd.log | head; false; }
	grep -q 'refused a status request .*(and [0-9]* more like it, not logged)' .kiln/kilnd.log
	[ "$(status_field bad_requests)" -eq 201 ]
	# Each line is an event too: as few of them.
	seq1=$(status_field event_seq)
	[ $((seq1 - seq0)) -le $((s + 1)) ] || { echo "$((seq1 - seq0)) events"; false; }
}

# idle_ipc N: hold N connections to the ipc socket that send nng's SP
# header and then nothing, in one background process ($idle_pid); they
# stay open until it is killed. $P/idle.up appears once all are open.
idle_ipc() {
	python3 - "$1" "$P/.kiln/kilnd.sock" "$P/idle.up" <<'PY' &
import socket, sys, time
n, path, up = int(sys.argv[1]), sys.argv[2], sys.argv[3]
held = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"\x00SP\x00\x00\x30\x00\x00")
    held.append(s)
open(up, "w").close()
time.sleep(600)
PY
	idle_pid=$!
}

@test "300 idle ipc connections do not lock out kiln status" {
	"$KILND" --project . --verbose
	idle_ipc 300
	wait_for test -e idle.up
	# the daemon has admitted the last of them (evicting the idlest past
	# --max-clients 256)
	wait_for connected 300 ||
		{ echo "$(grep -c 'connected (' .kiln/kilnd.log) admitted"; kill "$idle_pid"; false; }
	run timeout 20 "$KILN" status
	kill "$idle_pid"
	[ "$status" -eq 0 ] || { echo "status failed ($status): $output"; false; }
	grep -q 'closed idle client [0-9]* to admit a new one' .kiln/kilnd.log
}

@test "64 idle kiln events watchers do not stop kiln build; the oldest is told it was evicted" {
	mkdir src
	printf 'src\n' >src/in.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
assets:
  - url: out.txt
    tool: copy
    inputs: [src/in.txt]
YAML
	"$KILND" --project .
	"$KILN" events >ev.0 2>err.0 &
	first=$!
	wait_for status_is subscribers 1
	pids=()
	for i in $(seq 63); do
		"$KILN" events >"ev.$i" 2>/dev/null &
		pids+=($!)
	done
	wait_for status_is subscribers 64 || { "$KILN" status --json; false; }
	run --separate-stderr timeout 60 "$KILN" build
	kill "${pids[@]}" 2>/dev/null || true
	[ "$status" -eq 0 ] || { echo "build failed ($status): $stderr"; kill "$first"; false; }
	# The oldest watcher was evicted for the build, said so, and ended.
	wait_for test -s err.0 || { kill "$first"; cat ev.0; false; }
	run wait "$first"
	[ "$status" -eq 1 ] || { echo "kiln events exited $status"; false; }
	grep -q ' overflow evicted$' ev.0 || { cat ev.0; false; }
	grep -q 'resume with --since' err.0
}
