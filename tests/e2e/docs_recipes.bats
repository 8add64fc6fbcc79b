#!/usr/bin/env bats
# docs_recipes.bats — the recipes of the docs, run as written: each fenced
# block that follows a "<!-- recipe: NAME" line in docs/*.md is extracted
# here and run, only its first line's parameters (a folder, a port, the
# names a certificate is for) replaced by the test's own. nginx's
# (docs/cache-http.md) is started as the docs say and a second machine
# restores a build through it; the certificates of docs/agents.md serve a
# build on an agent over tls+tcp://. Skipped, saying why, without nginx.

bats_require_minimum_version 1.5.0

load daemon_helpers

load cache_helpers

DOCS=$BATS_TEST_DIRNAME/../../docs

eval "cache_setup() $(declare -f setup | tail -n +2)"
eval "cache_teardown() $(declare -f teardown | tail -n +2)"

setup() {
	cache_setup
}

teardown() {
	local rc=0
	[ -n "${AGENT_PID:-}" ] && kill -TERM "$AGENT_PID" 2>/dev/null
	if [ -n "${NDIR:-}" ] && [ -f "$NDIR/nginx.pid" ]; then
		"$NGINX" -p "$NDIR" -c "$NDIR/nginx.conf" -s stop 2>/dev/null
		wait_for nginx_gone || rc=1
	fi
	[ -n "${NDIR:-}" ] && rm -rf "$NDIR"
	cache_teardown || rc=1
	if [ -f "$T/agent.log" ] && grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$T/agent.log"; then
		cat "$T/agent.log"
		rc=1
	fi
	return $rc
}

nginx_gone() {
	[ ! -f "$NDIR/nginx.pid" ]
}

# recipe NAME FILE: the fenced block after FILE's "<!-- recipe: NAME" line.
recipe() {
	awk -v name="$1" '
		index($0, "<!-- recipe: " name " ") == 1 { found = 1; next }
		found && /^```/ { if (inblock) exit; inblock = 1; next }
		inblock { print }
	' "$2"
}

# with_params FILE PREFIX LINE: FILE's first line, which must start with
# PREFIX (the recipe's parameters), replaced by LINE.
with_params() {
	local first
	first=$(head -n 1 "$1")
	[[ "$first" == "$2"* ]] || { echo "the recipe's first line is '$first', expected '$2...'" >&2; return 1; }
	{ printf '%s\n' "$3"; tail -n +2 "$1"; } >"$1.new" && mv "$1.new" "$1"
}

@test "docs/cache-http.md: nginx configured and started exactly as written serves PUT and GET (as root too), and a second machine restores through it" {
	[ -x "$NGINX" ] || skip "nginx is not installed at $NGINX (Debian: apt-get install nginx); the recipe needs it"
	# DIR where the workers' user can reach it when the test runs as root
	NDIR=$(mktemp -d /tmp/kiln-docs-nginx.XXXXXX)
	chmod 755 "$NDIR"
	free_port 63
	mkdir -p "$T/conf"
	cd "$T/conf"
	recipe nginx-conf "$DOCS/cache-http.md" >nginx.conf.in
	recipe nginx-start "$DOCS/cache-http.md" >start.sh
	[ -s nginx.conf.in ] && [ -s start.sh ]
	with_params start.sh "DIR=" "DIR=$NDIR PORT=$port PASSWORD=pw-of-the-test"
	PATH=$(dirname "$NGINX"):$PATH sh -e start.sh
	BASE=http://127.0.0.1:$port
	wait_for nginx_answers || { cat "$NDIR/error.log"; false; }
	# a PUT lands (it was a 500 when root's workers ran as nobody) and reads back
	key=$(printf 'docs' | sha256sum | cut -d' ' -f1)
	code=$(printf 'entry' | curl -s -o /dev/null -w '%{http_code}' -T - "$BASE/cache/ac/$key")
	[ "$code" = 201 ] || { echo "PUT: $code"; cat "$NDIR/error.log"; false; }
	[ "$(curl -s "$BASE/cache/ac/$key")" = entry ]
	code=$(printf 'x' | curl -s -o /dev/null -w '%{http_code}' -T - "$BASE/auth/ac/$key")
	[ "$code" = 401 ]
	code=$(printf 'x' | curl -s -o /dev/null -w '%{http_code}' -u kiln:pw-of-the-test -T - "$BASE/auth/ac/$key")
	[ "$code" = 201 ] || { echo "PUT with Basic: $code"; false; }
	# kiln through it: one machine uploads, the other runs nothing
	URL=$BASE/cache
	write_machine "$M1" readwrite
	write_machine "$M2" read
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	wait_uploads "$M1" 3
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "ran: $(cat "$RUNS")"; false; }
	same_outputs
	! grep -q 'Permission denied' "$NDIR/error.log"
}

@test "docs/agents.md: the certificates and tokens made as written serve kilnd on tls+tcp://0.0.0.0 and a build on an agent dialing 127.0.0.1" {
	mkdir -p "$T/certs"
	cd "$T/certs"
	recipe agents-certs "$DOCS/agents.md" >certs.sh
	[ -s certs.sh ]
	with_params certs.sh "SAN=" "SAN=IP:127.0.0.1"
	sh -e certs.sh
	[ "$(stat -c %a agent.token)" = 600 ]
	cd "$M1"
	P=$M1
	mkdir -p src
	echo hello >src/f1.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
assets:
  - { url: a1.txt, tool: copy, inputs: [src/f1.txt] }
YAML
	free_port 65
	c=$T/certs
	"$KILND" --project . --listen "tls+tcp://0.0.0.0:$port" --tls-cert "$c/cert.pem" \
		--tls-key "$c/key.pem" --token-file "$c/client.token" \
		--agent-token-file "$c/agent.token" --local-jobs 0
	mkdir -p "$T/agent"
	(cd "$T/agent" && exec "$KILN" agent --connect "tls+tcp://127.0.0.1:$port" \
		--tls-ca "$c/ca.pem" --token-file "$c/agent.token" --cache "$T/agent/cache" \
		--name a1 >"$T/agent.log" 2>&1) &
	AGENT_PID=$!
	wait_for agent_listed a1 || { cat "$T/agent.log"; false; }
	run --separate-stderr "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; cat "$T/agent.log"; false; }
	[[ "$output" == *"on a1"* ]] || { echo "$output"; false; }
	[ "$(cat build/pc/a1.txt)" = hello ]
	run --separate-stderr "$KILN" --connect "tls+tcp://127.0.0.1:$port" --tls-ca "$c/ca.pem" \
		--token-file "$c/client.token" status
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
}

agent_listed() {
	"$KILN" status | grep -q "$1: "
}
