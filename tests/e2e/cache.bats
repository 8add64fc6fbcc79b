#!/usr/bin/env bats
# The shared cache end to end (docs/cache.md, "Using a shared cache"): a
# real Debian nginx with its dav module on a free loopback port, and two
# projects with their own .kiln stores ("two machines") with the same
# kiln.yaml and sources. The tools log each run to a file outside both
# projects, so "the second machine ran nothing" is read from that file.

bats_require_minimum_version 1.5.0

load daemon_helpers

# The helpers' teardown stops the daemon of the current folder: keep it
# for each machine.
eval "one_teardown() $(declare -f teardown | tail -n +2)"

NGINX=${KILN_NGINX:-/usr/sbin/nginx}

setup() {
	[ -x "${KILN:-}" ] || { echo "KILN='${KILN:-}' is not an executable" >&2; return 1; }
	[ -x "${KILND:-}" ] || { echo "KILND='${KILND:-}' is not an executable" >&2; return 1; }
	[ -x "$NGINX" ] || { echo "no nginx at $NGINX (Debian: nginx)" >&2; return 1; }
	T=$BATS_TEST_TMPDIR
	mkdir -p "$T/m1" "$T/m2" "$T/tools" "$T/srv/data/kiln" "$T/srv/tmp"
	M1=$(cd "$T/m1" && pwd -P)
	M2=$(cd "$T/m2" && pwd -P)
	RUNS=$T/runs.log
	: >"$RUNS"
	cd "$M1"
}

teardown() {
	local rc=0
	for m in "$M1" "$M2"; do
		[ -d "$m" ] || continue
		cd "$m" && { P=$m; one_teardown || rc=1; }
	done
	nginx_stop
	return $rc
}

# ---- the server ----------------------------------------------------------

nginx_start() {
	free_port 77
	NPORT=$port
	local d=$T/srv
	cat >"$d/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
$( [ "$(id -u)" = 0 ] && echo 'user root;' )
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 64; }
http {
  access_log $d/access.log;
  default_type application/octet-stream;
  client_body_temp_path $d/tmp/body;
  proxy_temp_path $d/tmp/proxy;
  fastcgi_temp_path $d/tmp/fastcgi;
  uwsgi_temp_path $d/tmp/uwsgi;
  scgi_temp_path $d/tmp/scgi;
  server {
    listen 127.0.0.1:$NPORT;
    root $d/data;
    client_max_body_size 0;
    location /kiln/ {
      dav_methods PUT DELETE;
      create_full_put_path on;
      dav_access user:rw group:r all:r;
      limit_except GET HEAD PUT { deny all; }
    }
  }
}
EOF
	"$NGINX" -p "$d" -e "$d/error.log" -c "$d/nginx.conf" >"$d/nginx.out" 2>&1 &
	NGINX_PID=$!
	echo "$NGINX_PID" >"$T/nginx.bgpid"
	wait_for nginx_answers || { cat "$d/nginx.out" "$d/error.log"; return 1; }
	ROOT=$d/data/kiln
	URL=http://127.0.0.1:$NPORT/kiln
}

nginx_answers() {
	curl -s -o /dev/null "http://127.0.0.1:$NPORT/"
}

nginx_stop() {
	local pid
	[ -f "$T/nginx.bgpid" ] || return 0
	pid=$(cat "$T/nginx.bgpid")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$T/nginx.bgpid"
}

# ---- the projects --------------------------------------------------------

# write_machine DIR [MODE]: the project, the same on both machines. upper
# logs each run (its input's name) to $RUNS.
write_machine() {
	local dir=$1 mode=${2:-readwrite}
	cat >"$T/tools/upper.sh" <<EOF
#!/bin/sh
echo "\$1" >>"$RUNS"
tr a-z A-Z <"\$1" >"\$2"
EOF
	chmod +x "$T/tools/upper.sh"
	mkdir -p "$dir/src"
	printf 'alpha\n' >"$dir/src/a.txt"
	printf 'bravo\n' >"$dir/src/b.txt"
	[ -f "$T/big.txt" ] || head -c 300000 /dev/urandom | base64 >"$T/big.txt"
	cp "$T/big.txt" "$dir/src/big.txt"
	cat >"$dir/kiln.yaml" <<EOF
kiln: 1
project: cachetest
sources: [src]
profiles:
  pc:
cache:
  url: $URL
  mode: $mode
  timeout: 20s
tools:
  upper:
    run: [$T/tools/upper.sh, "\${in}", "\${out}"]
    trace: false
rules:
  - match: "src/*.txt"
    url: "up/\${match.name}.txt"
    tool: upper
EOF
}

# build_in DIR ARGS...: kiln build in DIR (its own daemon).
build_in() {
	cd "$1" && shift
	P=$(pwd -P)
	run --separate-stderr "$KILN" build --json "$@"
}

# runs: how many tool runs the log holds.
runs() {
	wc -l <"$RUNS" | tr -d ' '
}

# uploads_done DIR: the machine's daemon has nothing left to upload.
uploads_done() {
	(cd "$1" && [ "$(status_field cache_pending)" = 0 ])
}

# wait_uploads DIR N: every upload of DIR's daemon is over, and N results
# went up (their index entries written).
wait_uploads() {
	wait_for uploads_done "$1" || return 1
	local up
	up=$(cd "$1" && status_field cache_uploaded)
	[ "$up" -ge "$2" ] || { echo "uploaded $up results, expected $2" >&2; (cd "$1" && "$KILN" status) >&2; return 1; }
}

# same_outputs: build/pc of both machines holds the same bytes.
same_outputs() {
	diff -rq "$M1/build/pc/up" "$M2/build/pc/up"
}

# ac_files / cas_files: what the server holds.
ac_files() { find "$ROOT/ac" -type f 2>/dev/null | wc -l | tr -d ' '; }
cas_files() { find "$ROOT/cas" -type f 2>/dev/null | wc -l | tr -d ' '; }

# the first machine builds all three steps and uploads them
first_machine() {
	nginx_start
	write_machine "$M1" "${1:-readwrite}"
	write_machine "$M2" "${1:-readwrite}"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; return 1; }
	[ "$(runs)" = 3 ] || { echo "first machine ran $(runs) tools, expected 3"; return 1; }
}

# the CAS file of the blob machine 1 built for up/NAME
cas_of() {
	echo "$ROOT/cas/$(sha256sum "$M1/build/pc/up/$1" | cut -d' ' -f1)"
}

@test "a second machine downloads every result: zero tool runs, the same bytes, kiln why says downloaded" {
	first_machine
	wait_uploads "$M1" 3
	[ "$(ac_files)" = 6 ]   # an index and a result per step
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "the second machine ran: $(cat "$RUNS")"; false; }
	same_outputs
	printf '%s\n' "$output" | grep -q '"result":"reused"'
	run "$KILN" why -p pc up/big.txt
	[[ "$output" == *"downloaded from the shared cache"* ]] || { echo "$output"; false; }
	[ "$(status_field cache_hits)" = 3 ]
	run "$KILN" status
	[[ "$output" == *"3 steps downloaded"* ]] || { echo "$output"; false; }
	# and it is its own result now: a rebuild on that machine is a no-op
	build_in "$M2"
	[ "$(runs)" = 0 ]
}

@test "without a cache url the second machine runs everything (the test above needs the feature)" {
	first_machine
	wait_uploads "$M1" 3
	: >"$RUNS"
	sed -i '/^cache:/,/^  timeout:/d' "$M2/kiln.yaml"
	build_in "$M2"
	[ "$status" -eq 0 ]
	[ "$(runs)" = 3 ]
	[ "$(status_field cache_mode)" = off ]
}

@test "a corrupted CAS blob on the server is refused and that step is built locally" {
	first_machine
	wait_uploads "$M1" 3
	blob=$(cas_of big.txt)
	[ -f "$blob" ]
	# same length, other bytes: only the SHA-256 tells
	head -c "$(stat -c %s "$blob")" /dev/zero | tr '\0' x >"$blob"
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 1 ] || { echo "ran: $(cat "$RUNS")"; false; }
	grep -q 'big.txt' "$RUNS"
	same_outputs
	[ "$(status_field cache_corrupt)" -ge 1 ]
	grep -q 'is corrupt (treated as a miss' .kiln/kilnd.log
	# nothing of the bad bytes reached the store
	! grep -rqs xxxxxxxxxxxxxxxx .kiln/store/objects 2>/dev/null
}

@test "an AC entry naming a missing CAS blob is a miss: the step runs" {
	first_machine
	wait_uploads "$M1" 3
	rm "$(cas_of a.txt)"
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 1 ] || { echo "ran: $(cat "$RUNS")"; false; }
	grep -q 'src/a.txt' "$RUNS"
	same_outputs
}

@test "the server stopped before the build: it completes locally, exit 0" {
	first_machine
	wait_uploads "$M1" 3
	nginx_stop
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	same_outputs
	# its uploads fail in the background, counted, never in the build
	wait_for uploads_done "$M2"
	[ "$(status_field cache_uploaded)" = 0 ]
}

@test "the server stopped in the middle of a build: it completes locally, exit 0" {
	first_machine
	wait_uploads "$M1" 3
	# a slow tool: the server goes away while the second step runs
	cat >"$T/tools/upper.sh" <<EOF
#!/bin/sh
echo "\$1" >>"$RUNS"
[ -f "$T/stop-now" ] && kill -TERM \$(cat "$T/nginx.bgpid") && rm -f "$T/stop-now"
tr a-z A-Z <"\$1" >"\$2"
EOF
	# a new tool program: every key is new, nothing is on the server
	printf '# v2\n' >>"$T/tools/upper.sh"
	# a step after them, looked up once the server is gone
	sed -i 's/^tools:$/tools:\n  concat: { run: [sh, -c, '"'"'cat "$@" > "$0"'"'"', "${out}", "${in...}"] }/' "$M2/kiln.yaml"
	printf 'assets:\n  - url: all.txt\n    tool: concat\n    inputs: ["@up/**"]\n' >>"$M2/kiln.yaml"
	touch "$T/stop-now"
	: >"$RUNS"
	build_in "$M2" -j 1
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	[ ! -f "$T/stop-now" ]
	[ -s "$M2/build/pc/all.txt" ]
	# the lookup after the stop failed: counted, not fatal
	[ "$(status_field cache_errors)" -ge 1 ] || { "$KILN" status; false; }
	wait_for uploads_done "$M2"
}

@test "mode read looks up but uploads nothing" {
	first_machine read
	wait_for uploads_done "$M1"
	[ "$(status_field cache_mode)" = read ]
	[ "$(ac_files)" = 0 ] && [ "$(cas_files)" = 0 ] || { find "$ROOT"; false; }
	[ "$(status_field cache_misses)" = 3 ]
}

@test "mode readwrite uploads (the test above would see files without mode read)" {
	first_machine readwrite
	wait_uploads "$M1" 3
	[ "$(ac_files)" = 6 ]
	[ "$(cas_files)" -ge 3 ]
}

@test "every AC entry kiln wrote parses as an ActionResult with SHA-256 digests" {
	first_machine
	wait_uploads "$M1" 3
	n=0 idx=0 res=0
	for f in $(find "$ROOT/ac" -type f); do
		n=$((n + 1))
		[ "$(basename "$f" | grep -cE '^[0-9a-f]{64}$')" = 1 ]
		out=$(protoc --decode_raw <"$f") || { echo "$f does not decode"; false; }
		# execution_metadata { worker: "kiln" }
		printf '%s\n' "$out" | grep -q '^9 {' || { echo "$out"; false; }
		if printf '%s\n' "$out" | grep -q '^2 {'; then
			# output_files { path, digest { hash: 64 hex, size_bytes } }
			printf '%s\n' "$out" | grep -qE '^    1: "[0-9a-f]{64}"$' || { echo "$out"; false; }
			! printf '%s\n' "$out" | grep -E '^    1: "' | grep -vqE '"[0-9a-f]{64}"'
			res=$((res + 1))
		else
			# an index: its candidates in stdout_raw (5)
			printf '%s\n' "$out" | grep -q '^5' || { echo "$out"; false; }
			idx=$((idx + 1))
		fi
	done
	[ "$n" = 6 ] && [ "$idx" = 3 ] && [ "$res" = 3 ] || { echo "$n entries: $idx indexes, $res results"; false; }
	# every digest names a blob the server has, of that SHA-256
	for h in $(cat "$ROOT"/ac/* | protoc --decode_raw 2>/dev/null | sed -n 's/^ *1: "\([0-9a-f]\{64\}\)"$/\1/p'); do
		[ -f "$ROOT/cas/$h" ]
		[ "$(sha256sum "$ROOT/cas/$h" | cut -d' ' -f1)" = "$h" ]
	done
}

# ---- discovered dependencies ---------------------------------------------

write_shader_machine() {
	local dir=$1 inner=$2
	mkdir -p "$dir/shaders/lib"
	cat >"$dir/shaders/main.frag" <<'GLSL'
#version 450
#extension GL_GOOGLE_include_directive : require
#include "lib/common.glsl"
layout(location = 0) out vec4 color;
void main() { color = tint(); }
GLSL
	printf 'vec4 tint() { return vec4(%s, 0.0, 0.0, 1.0); }\n' "$inner" >"$dir/shaders/lib/common.glsl"
	cat >"$T/tools/glsl.sh" <<EOF
#!/bin/sh
echo "\$@" >>"$RUNS"
exec glslangValidator "\$@"
EOF
	chmod +x "$T/tools/glsl.sh"
	cat >"$dir/kiln.yaml" <<EOF
kiln: 1
project: shaders
sources: [shaders]
profiles:
  pc:
cache:
  url: $URL
  mode: readwrite
tools:
  glsl:
    run: [$T/tools/glsl.sh, -V, --depfile, "\${depfile}", -o, "\${out}", "\${in}"]
    depfile: true
    trace: false
rules:
  - match: "shaders/*.frag"
    url: "shaders/\${match.name}.spv"
    tool: glsl
EOF
}

@test "a result with a discovered include is not reused where the include differs, and is where it is the same" {
	command -v glslangValidator >/dev/null || skip "glslangValidator is not installed (Debian: glslang-tools)"
	nginx_start
	write_shader_machine "$M1" 0.5
	write_shader_machine "$M2" 0.25
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 1 ]
	wait_uploads "$M1" 1
	# machine 2's include differs: its own build
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 2 ] || { echo "the differing include was not built: $(cat "$RUNS")"; false; }
	! cmp -s "$M1/build/pc/shaders/main.spv" "$M2/build/pc/shaders/main.spv"
	wait_uploads "$M2" 1
	# a third machine with machine 1's include gets machine 1's result,
	# the second candidate of the index now
	M3=$T/m3
	mkdir -p "$M3"
	write_shader_machine "$M3" 0.5
	build_in "$M3"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 2 ] || { echo "machine 3 ran: $(cat "$RUNS")"; false; }
	cmp "$M1/build/pc/shaders/main.spv" "$M3/build/pc/shaders/main.spv"
	run "$KILN" why -p pc shaders/main.spv
	[[ "$output" == *"downloaded from the shared cache"* ]] || { echo "$output"; false; }
	P=$(cd "$M3" && pwd -P); one_teardown
}

# ---- configuration -------------------------------------------------------

@test "kiln check refuses a cache: with a bad url or mode, and one without a url" {
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
profiles:
  pc:
cache:
  url: ftp://cache/kiln
  mode: sometimes
YAML
	run "$KILN" check
	[ "$status" -ne 0 ]
	[[ "$output" == *"cache.url: 'ftp://cache/kiln' is not an http:// or https:// URL"* ]] || { echo "$output"; false; }
	[[ "$output" == *"cache.mode: 'sometimes' is not a cache mode"* ]] || { echo "$output"; false; }
	printf 'kiln: 1\nproject: t\nprofiles:\n  pc:\ncache:\n  mode: read\n' >kiln.yaml
	run "$KILN" check
	[[ "$output" == *"url"* ]] || { echo "$output"; false; }
	printf 'kiln: 1\nproject: t\nprofiles:\n  pc:\ncache:\n  mode: off\n' >kiln.yaml
	run "$KILN" check
	[ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "KILN_CACHE_URL and KILN_CACHE_MODE give one machine a cache its kiln.yaml lacks" {
	first_machine
	wait_uploads "$M1" 3
	sed -i '/^cache:/,/^  timeout:/d' "$M2/kiln.yaml"
	: >"$RUNS"
	cd "$M2"
	KILN_CACHE_URL=$URL KILN_CACHE_MODE=read build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "ran: $(cat "$RUNS")"; false; }
	[ "$(status_field cache_mode)" = read ]
	same_outputs
}

@test "a bad KILN_CACHE_MODE stops the daemon from starting" {
	printf 'kiln: 1\nproject: t\nprofiles:\n  pc:\n' >kiln.yaml
	P=$M1
	KILN_CACHE_MODE=sometimes run "$KILN" build
	[ "$status" -ne 0 ]
	[[ "$output" == *"KILN_CACHE_MODE='sometimes'"* ]] || { echo "$output"; false; }
}
