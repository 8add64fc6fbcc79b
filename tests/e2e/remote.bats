#!/usr/bin/env bats
# remote.bats — who may talk to kilnd: the tcp:// and tls+tcp:// listeners
# refuse every request without the token from --token-file, and the ipc
# socket refuses peers of another user even when its mode would let them in.

bats_require_minimum_version 1.5.0

load daemon_helpers

# A free-looking port for this case, and a 32-character token.
remote_setup() {
	free_port
	head -c 24 /dev/urandom | base64 | tr -d '\n/+=' | head -c 32 >token
	echo >>token
	printf 'a-wrong-token-of-32-characters!!\n' >wrong
	printf 'version: 1\nstatus {}\n' | encode_request >status.bin
}

@test "kilnd --listen needs --token-file, and plain tcp:// only on loopback" {
	remote_setup
	run --separate-stderr "$KILND" --project . --listen "tcp://127.0.0.1:$port"
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"needs --token-file"* ]]
	run --separate-stderr "$KILND" --project . --listen "tcp://0.0.0.0:$port" --token-file token
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"plain tcp:// only on the loopback"* ]]
	printf 'short\n' >short
	run --separate-stderr "$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file short
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"at least 16 characters"* ]]
	[ ! -e .kiln/kilnd.pid ]
}

@test "over tcp:// a request without the right token is refused; with it, served" {
	remote_setup
	"$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file token
	run send_raw status.bin "tcp://127.0.0.1:$port"
	[[ "$output" == *"status: STATUS_UNAUTHENTICATED"* ]] || { echo "$output"; false; }
	[[ "$output" != *"status_reply"* ]]
	run --separate-stderr "$KILN" --connect "tcp://127.0.0.1:$port" status
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"refused: missing or wrong token"* ]] || { echo "$stderr"; false; }
	run --separate-stderr "$KILN" --connect "tcp://127.0.0.1:$port" --token-file wrong status
	[ "$status" -eq 2 ]
	run --separate-stderr "$KILN" --connect "tcp://127.0.0.1:$port" --token-file token status
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	[[ "$output" == *"listen    tcp://127.0.0.1:$port"* ]]
	# The remote client can put and get blobs too.
	head -c 100000 /dev/urandom >r.bin
	h=$("$KILN" --connect "tcp://127.0.0.1:$port" --token-file token put r.bin | cut -d' ' -f1)
	"$KILN" --connect "tcp://127.0.0.1:$port" --token-file token cat "$h" | cmp - r.bin
	# The ipc socket needs no token; every refusal was counted and logged.
	[ "$(status_field bad_requests)" -ge 3 ]
	grep -q 'refused a status request from client [0-9]*: this listener needs the token' .kiln/kilnd.log
}

@test "over tls+tcp:// the daemon serves with its certificate, and still wants the token" {
	remote_setup
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout key.pem -out cert.pem -days 2 -subj /CN=127.0.0.1 2>/dev/null
	"$KILND" --project . --listen "tls+tcp://127.0.0.1:$port" --token-file token \
		--tls-cert cert.pem --tls-key key.pem
	url="tls+tcp://127.0.0.1:$port"
	run --separate-stderr "$KILN" --connect "$url" --tls-ca cert.pem --token-file token status
	[ "$status" -eq 0 ] || { echo "$stderr"; cat .kiln/kilnd.log; false; }
	[[ "$output" == *"listen    $url"* ]]
	run --separate-stderr "$KILN" --connect "$url" --tls-ca cert.pem status
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"refused: missing or wrong token"* ]]
	# A certificate that does not verify is said to be one, not a token
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout other-key.pem -out other.pem -days 2 -subj /CN=127.0.0.1 2>/dev/null
	run --separate-stderr "$KILN" --connect "$url" --tls-ca other.pem --token-file token status
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"TLS handshake failed"* ]] || { echo "$stderr"; false; }
	[[ "$stderr" != *"token"* ]] || { echo "$stderr"; false; }
	# Plain tcp to the TLS port gets nothing at all.
	run send_raw status.bin "tcp://127.0.0.1:$port"
	[ -z "$output" ]
}

@test "the ipc socket is private: a peer of another uid is refused even at mode 0666" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to run a client as another user"
	id nobody >/dev/null 2>&1 || skip "no user 'nobody'"
	"$KILN" status >/dev/null
	[ "$(stat -c %a .kiln/kilnd.sock)" = 600 ]
	printf 'version: 1\nstatus {}\n' | encode_request >status.bin
	chmod 0644 status.bin
	# Let nobody reach the socket: open every folder on the way and the
	# socket itself (a misconfiguration the peer-uid check still catches).
	d=$P/.kiln
	while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
	chmod 0666 .kiln/kilnd.sock
	run runuser -u nobody -- timeout 10 nngcat --req0 --dial "ipc://$P/.kiln/kilnd.sock" \
		--file "$P/status.bin" --raw --recv-timeout 2
	[ -z "$output" ] || { echo "nobody got an answer"; false; }
	grep -q "refused a connection from uid $(id -u nobody)" .kiln/kilnd.log
	run "$KILN" status
	[ "$status" -eq 0 ]
}

# sp_frame FILE: FILE's bytes as one req0 message in nng's SP-over-TCP
# framing (RFC sp-tcp-mapping): the 8-byte header naming protocol 0x30
# (req0), a 64-bit big-endian length, a request id, then the body.
sp_frame() {
	local len=$(( $(stat -c %s "$1") + 4 ))
	printf '\x00SP\x00\x00\x30\x00\x00\x00\x00\x00\x00'
	printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((len >> 24 & 255)) \
		$((len >> 16 & 255)) $((len >> 8 & 255)) $((len & 255)))"
	printf '\x80\x00\x00\x01'
	cat "$1"
}

# A request whose connection is gone before a handler takes it once
# counted as local (no token): this stop got through within ~20 tries.
@test "over tcp:// a request whose connection closes at once still needs the token" {
	remote_setup
	printf 'version: 1\nstop {}\n' | encode_request >stop.bin
	sp_frame stop.bin >msg.bin
	"$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file token
	for i in $(seq 300); do
		socat -u FILE:msg.bin "TCP:127.0.0.1:$port" 2>/dev/null || true
		[ -e .kiln/kilnd.pid ] || { echo "a stop without the token got through (try $i)"; false; }
	done
	! grep -q "stop requested" .kiln/kilnd.log || false
	"$KILN" status >/dev/null
}
