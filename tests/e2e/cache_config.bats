#!/usr/bin/env bats
# The shared cache's settings end to end (docs/cache.md, "Configuration"):
# the user's own file ($XDG_CONFIG_HOME/kiln/config.yaml), KILN_CACHE_* in
# the environment of the kiln that starts the daemon, and kiln.yaml's
# `cache:`, in that order of precedence, against a real nginx
# (cache_helpers.bash).

bats_require_minimum_version 1.5.0

load daemon_helpers
load cache_helpers

# no_cache_in DIR: DIR's kiln.yaml without its cache: section
no_cache_in() {
	sed -i '/^cache:/,/^  timeout:/d' "$1/kiln.yaml"
}

@test "the user's config.yaml gives a machine the cache its kiln.yaml lacks" {
	first_machine
	wait_uploads "$M1" 3
	no_cache_in "$M2"
	printf 'cache:\n  url: %s\n  mode: read\n' "$URL" >"$XDG_CONFIG_HOME/kiln/config.yaml"
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "the second machine ran: $(cat "$RUNS")"; false; }
	same_outputs
	[ "$(status_field cache_mode)" = read ]
	[ "$(status_field cache_url)" = "$URL" ]
}

@test "the environment wins over the user's file, which wins over kiln.yaml, key by key" {
	first_machine
	wait_uploads "$M1" 3
	# kiln.yaml: a server that is not there, mode readwrite
	sed -i "s|url: $URL|url: http://127.0.0.1:9/nowhere|" "$M2/kiln.yaml"
	printf 'cache:\n  url: %s\n' "$URL" >"$XDG_CONFIG_HOME/kiln/config.yaml"
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "ran: $(cat "$RUNS")"; false; }
	[ "$(status_field cache_url)" = "$URL" ]
	# the user's file gave no mode: kiln.yaml's
	[ "$(status_field cache_mode)" = readwrite ]
	# the user's file changed: read again at the next build, no restart
	printf 'cache:\n  url: %s\n  mode: read\n' "$URL" >"$XDG_CONFIG_HOME/kiln/config.yaml"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(status_field cache_mode)" = read ]
	# the environment over both (read when the daemon starts)
	run "$KILN" stop
	KILN_CACHE_MODE=off build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(status_field cache_mode)" = off ]
}

@test "a broken user file stops builds naming its path, line and field; fixed, the next build runs" {
	nginx_start
	write_machine "$M1" readwrite
	cfg=$XDG_CONFIG_HOME/kiln/config.yaml
	printf 'cache:\n  mode: sometimes\n' >"$cfg"
	build_in "$M1"
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"$cfg:2:"*"cache.mode: 'sometimes' is not a cache mode"* ]] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ]
	[ ! -e "$M1/build/pc/up" ]
	grep -q "config.yaml:2:.*'sometimes' is not a cache mode" .kiln/kilnd.log
	# a typo of a key is said so, with the nearest key
	printf 'cache:\n  mode: read\n  urll: %s\n' "$URL" >"$cfg"
	build_in "$M1"
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"$cfg:3:"*"unknown key 'urll' (did you mean 'url'?)"* ]] || { echo "$stderr"; false; }
	# fixed: the same daemon builds, with the user's mode over kiln.yaml's
	printf 'cache:\n  mode: read\n' >"$cfg"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	[ "$(status_field cache_mode)" = read ]
}

@test "credentials: the user's file names a file beside it; the environment's token replaces it" {
	nginx_start
	# /bearer/ serves what /auth/ stores: one cache, two ways in
	mkdir -p "$T/srv/data/auth"
	ln -s auth "$T/srv/data/bearer"
	write_machine "$M1" readwrite
	write_machine "$M2" read
	sed -i "s|url: $URL|url: $BASE/auth|" "$M1/kiln.yaml"
	sed -i "s|url: $URL|url: $BASE/bearer|" "$M2/kiln.yaml"
	printf 'kiln:%s\n' "$AUTH_PW" >"$XDG_CONFIG_HOME/kiln/cache-auth"
	chmod 600 "$XDG_CONFIG_HOME/kiln/cache-auth"
	printf 'cache:\n  basic_auth_file: cache-auth\n' >"$XDG_CONFIG_HOME/kiln/config.yaml"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	wait_uploads "$M1" 3
	[ "$(find "$T/srv/data/auth/ac" -type f | wc -l)" = 6 ]
	printf '%s\n' "$TOKEN" >"$T/token"
	chmod 600 "$T/token"
	: >"$RUNS"
	KILN_CACHE_BEARER_TOKEN_FILE=$T/token build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "ran: $(cat "$RUNS")"; (cd "$M2" && "$KILN" status); false; }
	same_outputs
	[ "$(grep -c '" 401 ' "$T/srv/access.log")" = 0 ] || { grep '" 401 ' "$T/srv/access.log"; false; }
}

@test "KILN_CACHE_TIMEOUT over kiln.yaml's timeout cuts a server that never answers short" {
	stall_start
	URL=$STALL_URL
	write_machine "$M1" read
	grep -q '^  timeout: 20s$' kiln.yaml
	start=$(date +%s)
	KILN_CACHE_TIMEOUT=1s build_in "$M1"
	took=$(($(date +%s) - start))
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	# the stall limit alone (10 s) would take that long at least; 1 s
	# each, the rest is the machine's speed (7 s was too little headroom
	# on a loaded machine)
	[ "$took" -lt 10 ] || { echo "took $took s"; false; }
	[ "$(status_field cache_errors)" -ge 3 ]
}

@test "bad KILN_CACHE_* values stop the daemon from starting, naming the variable" {
	printf 'kiln: 1\nproject: t\nprofiles:\n  pc:\n' >kiln.yaml
	P=$M1
	KILN_CACHE_BASIC_AUTH_FILE=auth run "$KILN" build
	[ "$status" -ne 0 ]
	[[ "$output" == *"KILN_CACHE_BASIC_AUTH_FILE='auth': expected an absolute path"* ]] || { echo "$output"; false; }
	KILN_CACHE_TIMEOUT=soon run "$KILN" build
	[ "$status" -ne 0 ]
	[[ "$output" == *"KILN_CACHE_TIMEOUT='soon'"* ]] || { echo "$output"; false; }
	KILN_CACHE_BASIC_AUTH_FILE=/a KILN_CACHE_BEARER_TOKEN_FILE=/b run "$KILN" build
	[ "$status" -ne 0 ]
	[[ "$output" == *"both set"* ]] || { echo "$output"; false; }
}
