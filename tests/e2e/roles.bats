#!/usr/bin/env bats
# roles.bats — what each remote token may do (docs/protocol.md, "Roles"):
# the client token (--token-file) what a user's kiln does but not stop,
# the agent token (--agent-token-file) agent requests, blobs and status,
# the admin token (--admin-token-file) everything; and mutual TLS
# (--tls-client-ca): no certificate from that CA, no connection. The real
# kilnd and kiln over tcp:// and tls+tcp:// on the loopback.

bats_require_minimum_version 1.5.0

load daemon_helpers

# A free-looking port, one 32-character token per role, a wrong one, and a
# one-step project (run from a folder of its own: `other`, so that the
# remote client has no project of its own to fall back on).
roles_setup() {
	free_port 29
	for r in client agent admin; do
		head -c 24 /dev/urandom | base64 | tr -d '\n/+=' | head -c 32 >"$r.token"
		echo >>"$r.token"
	done
	printf 'a-wrong-token-of-32-characters!!\n' >wrong.token
	mkdir -p src other
	printf 'alpha\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
assets:
  - url: a.txt
    tool: copy
    inputs: [src/a.txt]
YAML
	url="tcp://127.0.0.1:$port"
}

# start_roles [OPTION...]: kilnd on $url with all three tokens.
start_roles() {
	"$KILND" --project . --listen "$url" --token-file client.token \
		--agent-token-file agent.token --admin-token-file admin.token "$@"
}

# as ROLE ARGS...: run kiln against $url with ROLE's token, from other/.
as() {
	local role=$1
	shift
	run --separate-stderr sh -c 'cd other && exec "$@"' sh "$KILN" --connect "$url" \
		--token-file "../$role.token" "$@"
}

# gone PID: wait (at most 5 s) until PID has exited.
gone() {
	for _ in $(seq 100); do running "$1" || return 0; sleep 0.05; done
	echo "pid $1 still runs" >&2
	return 1
}

# raw ROLE TEXT: send a request (protobuf text format, without the
# envelope's version and token) with ROLE's token; the reply as text.
raw() {
	printf 'version: 1\ntoken: "%s"\n%s\n' "$(head -n 1 "$1.token")" "$2" |
		encode_request >req.bin
	send_raw req.bin "$url"
}

@test "kilnd: --listen needs a role's token file, and no two roles may share a token" {
	roles_setup
	run --separate-stderr "$KILND" --project . --listen "$url"
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"needs --token-file, --agent-token-file or --admin-token-file"* ]] || { echo "$stderr"; false; }
	run --separate-stderr "$KILND" --project . --agent-token-file agent.token
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"need --listen"* ]] || { echo "$stderr"; false; }
	cp client.token same.token
	run --separate-stderr "$KILND" --project . --listen "$url" --token-file client.token \
		--admin-token-file same.token
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--token-file and --admin-token-file hold the same token"* ]] || { echo "$stderr"; false; }
	printf 'short\n' >short.token
	run --separate-stderr "$KILND" --project . --listen "$url" --agent-token-file short.token
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--agent-token-file short.token: the token (its first line) must have at least 16"* ]] || { echo "$stderr"; false; }
	run --separate-stderr "$KILND" --project . --listen "$url" --admin-token-file admin.token \
		--tls-client-ca admin.token
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--tls-client-ca needs a tls+tcp:// listener"* ]] || { echo "$stderr"; false; }
	[ ! -e .kiln/kilnd.pid ]
}

@test "a missing or wrong token is refused; each role's own token is served" {
	roles_setup
	start_roles
	printf 'version: 1\nstatus {}\n' | encode_request >status.bin
	run send_raw status.bin "$url"
	[[ "$output" == *"status: STATUS_UNAUTHENTICATED"* ]] || { echo "$output"; false; }
	[[ "$output" == *"needs the token of a role"* ]] || { echo "$output"; false; }
	as wrong status
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"refused: missing or wrong token"* ]] || { echo "$stderr"; false; }
	for r in client agent admin; do
		as "$r" status
		[ "$status" -eq 0 ] || { echo "$r: $stderr"; false; }
	done
	# a daemon with only an admin token knows no client token
	"$KILN" stop >/dev/null
	free_port 31
	url="tcp://127.0.0.1:$port"
	"$KILND" --project . --listen "$url" --admin-token-file admin.token
	as client status
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"needs the token of a role"* ]] || { echo "$stderr"; false; }
	as admin status
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
}

@test "the client token builds, but 'kiln stop' is refused and the daemon runs on" {
	roles_setup
	start_roles
	pid=$(daemon_pid)
	as client build
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	[ "$(cat build/default/a.txt)" = alpha ]
	as client stop
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"the client token may not send 'stop'"* ]] || { echo "$stderr"; false; }
	sleep 0.3
	running "$pid" || { echo "the daemon stopped"; false; }
	[ "$(daemon_pid)" = "$pid" ]
	grep -q "refused a stop request from client [0-9]*: the client token may not send 'stop'" .kiln/kilnd.log
	! grep -q "stop requested" .kiln/kilnd.log || false
	# the ipc socket is admin: the project's own user stops it, no token
	"$KILN" stop
	gone "$pid"
}

@test "the admin token stops the daemon" {
	roles_setup
	start_roles
	pid=$(daemon_pid)
	as admin stop
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	gone "$pid"
	grep -q "stop requested by client" .kiln/kilnd.log
}

@test "the agent token may put and has blobs and ask the status; not read other blobs, build, subscribe or stop" {
	roles_setup
	start_roles
	pid=$(daemon_pid)
	head -c 100000 /dev/urandom >other/r.bin
	as agent put r.bin
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	h=${output%% *}
	# it may read only the inputs of steps agents hold (agents.bats): not
	# a blob it put itself, nor anything else in the store
	run --separate-stderr sh -c "cd other && '$KILN' --connect '$url' --token-file ../agent.token cat $h"
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"may only read the inputs of steps agents hold"* ]] || { echo "$stderr"; false; }
	(cd other && "$KILN" --connect "$url" --token-file ../client.token cat "$h" >got.bin)
	cmp other/got.bin other/r.bin
	id=$(printf '%s' "$h" | sed 's/../\\x&/g')
	run raw agent "blob_has { ids: \"$id\" }"
	[[ "$output" == *"present: true"* ]] || { echo "$output"; false; }
	as agent status
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	# build: the request itself, and kiln build (refused at its subscribe)
	run raw agent 'build { profile: "default" }'
	[[ "$output" == *"status: STATUS_UNAUTHENTICATED"* ]] || { echo "$output"; false; }
	[[ "$output" == *"the agent token may not send "*build* ]] || { echo "$output"; false; }
	as agent build
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"the agent token may not send"* ]] || { echo "$stderr"; false; }
	[ ! -e build/default/a.txt ]
	as agent stop
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"the agent token may not send 'stop'"* ]] || { echo "$stderr"; false; }
	sleep 0.3
	running "$pid" || { echo "the daemon stopped"; false; }
}

# An agent request is a Request field numbered 50..59 (kiln.proto): one
# this daemon does not know is still the agents' alone. Encoded by hand:
# version 1, the token, then field 55 as an empty message.
@test "an agent request (fields 50..59) is refused to the client token, not to agent or admin" {
	roles_setup
	start_roles
	for r in client agent admin; do
		tok=$(head -n 1 "$r.token")
		{ printf '\x08\x01\x12'; printf "\\x$(printf %02x ${#tok})"; printf '%s' "$tok"
		  printf '\xba\x03\x00'; } >"$r.bin"
	done
	run send_raw client.bin "$url"
	[[ "$output" == *"status: STATUS_UNAUTHENTICATED"* ]] || { echo "$output"; false; }
	[[ "$output" == *"the client token may not send"* ]] || { echo "$output"; false; }
	for r in agent admin; do
		run send_raw "$r.bin" "$url"
		[[ "$output" == *"status: STATUS_"* ]] || { echo "$r: no reply"; false; }
		[[ "$output" != *"STATUS_UNAUTHENTICATED"* ]] || { echo "$r: $output"; false; }
	done
}

# make_cert NAME CA CN: NAME.pem and NAME-key.pem, signed by CA (made
# with `make_ca CA` first).
make_ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1-key.pem" -out "$1.pem" -days 2 -subj "/CN=$1" 2>/dev/null
}
make_cert() {
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1-key.pem" -out "$1.csr" -subj "/CN=$3" 2>/dev/null
	openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2-key.pem" \
		-CAcreateserial -out "$1.pem" -days 2 2>/dev/null
}

@test "with --tls-client-ca a client needs a certificate from that CA, and still a token" {
	roles_setup
	make_ca ca
	make_ca otherca
	make_cert server ca 127.0.0.1
	make_cert mine ca kiln-client
	make_cert theirs otherca kiln-client
	url="tls+tcp://127.0.0.1:$port"
	start_roles --tls-cert server.pem --tls-key server-key.pem --tls-client-ca ca.pem
	grep -q "and a client certificate" .kiln/kilnd.log
	# no certificate
	as client --tls-ca ../ca.pem status
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"TLS handshake failed"* ]] || { echo "$stderr"; false; }
	[[ "$stderr" == *"client certificate"* ]] || { echo "$stderr"; false; }
	# a certificate from another CA
	as client --tls-ca ../ca.pem --tls-cert ../theirs.pem --tls-key ../theirs-key.pem status
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"TLS handshake failed"* ]] || { echo "$stderr"; false; }
	# one from the CA
	as client --tls-ca ../ca.pem --tls-cert ../mine.pem --tls-key ../mine-key.pem status
	[ "$status" -eq 0 ] || { echo "$stderr"; cat .kiln/kilnd.log; false; }
	[[ "$output" == *"listen    $url"* ]]
	# the certificate is not a token
	as wrong --tls-ca ../ca.pem --tls-cert ../mine.pem --tls-key ../mine-key.pem status
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"refused: missing or wrong token"* ]] || { echo "$stderr"; false; }
	# a certificate without its key is a usage error
	as client --tls-ca ../ca.pem --tls-cert ../mine.pem status
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--tls-cert and --tls-key go together"* ]] || { echo "$stderr"; false; }
}
