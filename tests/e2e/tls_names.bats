#!/usr/bin/env bats
# tls_names.bats — which certificates kiln takes from a daemon it dials by
# address (tls+tcp://127.0.0.1:PORT): one made the usual way, with
# subjectAltName=IP:127.0.0.1 and signed by a CA (before
# third_party/nng/tls-ip-san.patch, mbedTLS 2.28 matched the address
# against dNSName entries only and refused it: "TLS handshake failed"),
# one without subjectAltName whose CN is the address, and not one that
# names another address. The certificates are made with openssl as
# docs/agents.md says.

bats_require_minimum_version 1.5.0

load daemon_helpers

# A CA, and a token for the listener.
tls_setup() {
	free_port
	head -c 24 /dev/urandom | base64 | tr -d '\n/+=' | head -c 32 >token
	echo >>token
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout ca.key -out ca.pem -days 2 -subj "/CN=kiln test CA" 2>/dev/null
}

# server_cert NAME SAN: NAME.pem and NAME.key signed by the CA, with
# subjectAltName SAN (empty: none; CN 127.0.0.1 either way).
server_cert() {
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1.key" -out "$1.csr" -subj /CN=127.0.0.1 2>/dev/null
	if [ -n "$2" ]; then
		printf 'subjectAltName=%s\n' "$2" >"$1.ext"
		openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
			-days 2 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
	else
		openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
			-days 2 -out "$1.pem" 2>/dev/null
	fi
}

# serve_with NAME: a daemon on tls+tcp://127.0.0.1:$port with NAME's
# certificate (a fresh port and project folder each time).
serve_with() {
	free_port
	mkdir -p "d-$1"
	(cd "d-$1" && "$KILND" --project . --listen "tls+tcp://127.0.0.1:$port" \
		--token-file ../token --tls-cert "../$1.pem" --tls-key "../$1.key")
	echo "$P/d-$1" >>daemon-dirs
	URL="tls+tcp://127.0.0.1:$port"
}

ask() {
	run --separate-stderr "$KILN" --connect "$URL" --tls-ca ca.pem --token-file token status
}

# the helpers' teardown (stop the daemon, look for sanitizer reports) in
# each daemon's folder
eval "one_teardown() $(declare -f teardown | tail -n +2)"

teardown() {
	local d rc=0
	[ -f "$P/daemon-dirs" ] || return 0
	while read -r d; do
		(cd "$d" && one_teardown) || rc=1
	done <"$P/daemon-dirs"
	return $rc
}

@test "tls: a daemon certificate with subjectAltName=IP:127.0.0.1 signed by the CA is taken when dialing 127.0.0.1" {
	tls_setup
	server_cert ip IP:127.0.0.1
	serve_with ip
	ask
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	[[ "$output" == *"listen    $URL"* ]] || { echo "$output"; false; }
}

@test "tls: one naming another address (IP:127.0.0.2, DNS:localhost) is refused when dialing 127.0.0.1" {
	tls_setup
	server_cert other "IP:127.0.0.2,DNS:localhost"
	serve_with other
	ask
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"TLS handshake failed"* ]] || { echo "$stderr"; false; }
	# a host name is still checked by name: localhost is in it
	run --separate-stderr "$KILN" --connect "tls+tcp://localhost:$port" --tls-ca ca.pem \
		--token-file token status
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
}

@test "tls: one without subjectAltName whose CN is 127.0.0.1 is still taken; one whose CN is another name is not" {
	tls_setup
	server_cert cn ""
	serve_with cn
	ask
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout cn2.key -out cn2.csr -subj /CN=build-server 2>/dev/null
	openssl x509 -req -in cn2.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
		-out cn2.pem 2>/dev/null
	serve_with cn2
	ask
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"TLS handshake failed"* ]] || { echo "$stderr"; false; }
}

@test "tls: a certificate for IP:127.0.0.1 signed by another CA is refused" {
	tls_setup
	server_cert ip IP:127.0.0.1
	mv ca.pem real-ca.pem
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout other-ca.key -out ca.pem -days 2 -subj "/CN=another CA" 2>/dev/null
	serve_with ip
	ask
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"TLS handshake failed"* ]] || { echo "$stderr"; false; }
}
